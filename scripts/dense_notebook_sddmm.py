"""The SDDMM notebook's own cells: its specs, operands, comparisons, picture and GPU call."""

from __future__ import annotations

LIBRARY = "thread_per_nonzero"
CORPUS_SPEC = "teaal-specs/teaal-compiler/sddmm.yaml"  # in the shared corpus
CORPUS_LABELS = ("teaal_sddmm", "teaal_sddmm_mapped")  # the specs made from it
CHECKS = (
    "reference multiplies every (nonzero, k) exactly once",
    "values reference == NumPy",
    "values simulation == NumPy",
    "owners reference == simulation",
    "one thread sums each nonzero's K",
)
GPU_CHECKS = (
    "pattern kernel == C",
    "values kernel == NumPy",
    "owners trace == simulation",
    "owners trace == reference",
)

SPECS = '''\
LIBRARY_SPEC = REPO / "specs" / "sddmm" / "thread_per_nonzero.yaml"
CORPUS_SPEC = CORPUS / "@CORPUS_SPEC@"
# chunks of 5 nonzeros: the 44 nonzeros below make 9 threads (as in work_oriented.ipynb)
add_spec("thread_per_nonzero", LIBRARY_SPEC, {"WORK_PER_THREAD": 5})
if CORPUS_SPEC.is_file():
    add_spec("teaal_sddmm", CORPUS_SPEC, {})  # einsums only: no mapping, all of it in time
    # the same einsums with a mapping added here: row m to thread m mod 4, which samples the
    # row's nonzeros and sums K for each
    MAPPING = """
mapping:
  partitioning:
    Z:
      M: [uniform_shape(NUM_THREADS)]
  loop-order:
    Z: [M1, M0, N]
  spacetime:
    Z:
      space: [M0]
      time: [M1, N]
"""
    add_spec("teaal_sddmm_mapped", CORPUS_SPEC, {"NUM_THREADS": 4},
             text=CORPUS_SPEC.read_text().rstrip() + "\\n" + MAPPING)
else:
    print(f"skipped: {CORPUS_SPEC} @CORPUS_SKIP@, "
          "or set TEAAL_LOOPS_CORPUS): the cells below show the library spec alone")
'''

OPERANDS = '''\
A = rng.uniform(-1.0, 1.0, size=(ROWS, D))  # dense [M, K]
B = rng.uniform(-1.0, 1.0, size=(D, COLS))  # dense [K, N]
OPERANDS = (A, B)  # the dense operands, in the order simulate and the kernels take them
TENSORS = {"C": C, "A": A, "B": B}  # the reference's inputs, by the specs' tensor names
ROW_OF = np.repeat(np.arange(ROWS), np.diff(C.indptr))  # the row of every nonzero of C
EXPECTED = C.data * (A @ B)[ROW_OF, C.indices]  # NumPy's Z, one value per nonzero of C
EXPECTED_DENSE = np.zeros((ROWS, COLS))
EXPECTED_DENSE[ROW_OF, C.indices] = EXPECTED  # the reference's Z is dense: zero elsewhere


def result_text(z: np.ndarray) -> str:
    """Z at C's nonzeros, row by row, and its largest magnitude elsewhere."""
    outside = np.abs(np.where(EXPECTED_DENSE == 0, z, 0)).max()
    lines = [f"Z at C's nonzeros (elsewhere max |Z| = {outside:.3g})"]
    for m in range(ROWS):
        at = z[m, C.indices[C.indptr[m]:C.indptr[m + 1]]]
        lines.append(f"  row {m:2d}: " + np.array2string(at, precision=2, suppress_small=True,
                                                       max_line_width=120))
    return "\\n".join(lines)


print(f"C: {C.shape[0]} x {C.shape[1]}, {C.nnz} nonzeros; row lengths {row_lengths.tolist()}")
print(f"A: {A.shape[0]} x {A.shape[1]}, B: {B.shape[0]} x {B.shape[1]} (K = D = {D})")
'''

THREE_VIEWS = '''\
from collections import Counter


def three_views(label: str) -> np.ndarray:
    """Compare the label's reference with NumPy and with the simulation (values, and the owner
    of every (nonzero, k), or of every nonzero for TeAAL's two einsums); record the verdicts;
    return the reference's owner of every nonzero."""
    ref, sim = refs[label], sims[label]
    owners = compare_owners(specs[label], bounds[label], C, ref.stamps, sim.owner)
    assert owners.compared and owners.reference is not None, owners.text
    z_ref = np.asarray(ref.outputs["Z"], dtype=np.float64)
    close = dict(rtol=1e-12, atol=1e-12)
    key = "nonzero" if owners.reference.per_atom else "(nonzero, k)"
    AGREEMENT[f"{label}: reference multiplies every {key} exactly once"] = (
        owners.reference.each_once
    )
    AGREEMENT[f"{label}: values reference == NumPy"] = bool(
        np.allclose(z_ref, EXPECTED_DENSE, **close)
    )
    AGREEMENT[f"{label}: values simulation == NumPy"] = bool(
        np.allclose(sim.y, EXPECTED, **close)
    )
    AGREEMENT[f"{label}: owners reference == simulation"] = owners.ok
    # the summed rank stays with the nonzero's thread: one owner for all of its k
    AGREEMENT[f"{label}: one thread sums each nonzero's K"] = bool(
        (sim.owner == sim.owner[:, :1]).all()
    )
    stamped = ", ".join(f"{n} of {e}" for e, n in Counter(s.einsum for s in ref.stamps).items())
    print(f"{label}: multiplies stamped: {stamped}")
    print(f"  max |Z_ref - NumPy| = {np.abs(z_ref - EXPECTED_DENSE).max():.3g}, "
          f"max |Z_sim - NumPy| = {np.abs(sim.y - EXPECTED).max():.3g}")
    print(f"  owners (reference vs simulation): {owners.text}")
    owner = owners.reference.atom_owner()  # nonzeros x K, or one column (TeAAL's two)
    return owner if owner.ndim == 1 else owner[:, 0]  # a nonzero's K has one owner (below)


ref_owner = {label: three_views(label) for label in specs}
for label in specs:
    print(f"\\n{label}: the first stamps of each einsum")
    for einsum in dict.fromkeys(s.einsum for s in refs[label].stamps):
        for stamp in [s for s in refs[label].stamps if s.einsum == einsum][:2]:
            print("  " + stamp_text(stamp))
'''

PICTURE = '''\
for label, sim in sims.items():
    same = np.array_equal(sim.owner[:, 0], ref_owner[label])
    print(f"{label}: row m, the thread of each of its nonzeros in the simulation "
          f"({'the reference agrees' if same else 'THE REFERENCE DIFFERS'})")
    for m in range(ROWS):
        print(f"  row {m:2d}: {sim.owner[C.indptr[m]:C.indptr[m + 1], 0].tolist()}")
    print()

fig, axes = plt.subplots(len(specs), 2, figsize=(13, 4.8 * len(specs)), squeeze=False,
                         gridspec_kw={"width_ratios": [3, 2]})
for (ax, bx), (label, sim) in zip(axes, sims.items(), strict=True):
    for m, n, t in zip(ROW_OF, C.indices, sim.owner[:, 0], strict=True):
        cell(ax, n, m, int(t), str(t))
    ax.set_xlim(-0.5, COLS - 0.5)
    ax.set_ylim(ROWS - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_xticks(range(COLS))
    ax.set_yticks(range(ROWS))
    ax.set_yticklabels([f"{m} ({k})" for m, k in enumerate(np.diff(C.indptr))])
    ax.set_xlabel("column n")
    ax.set_ylabel("row m (its nonzeros)")
    b = bounds[label]
    ax.set_title(f"{label}\\nthe thread summing each nonzero's {D} products")
    bars(bx, sim.owner, b.threads, "(nonzero, k) pairs owned")
fig.tight_layout()
show(fig)
'''

GPU_CALL = '''\
        z_gpu = kernel(C, A, B)  # a cupyx CSR matrix: C's pattern, C * (A @ B) at its nonzeros
        AGREEMENT[f"gpu: {label}: pattern kernel == C"] = bool(
            np.array_equal(z_gpu.indptr.get(), C.indptr)
            and np.array_equal(z_gpu.indices.get(), C.indices)
        )
        values_gpu = np.asarray(z_gpu.data.get())  # one value per nonzero, in C's order
        owner_gpu = np.asarray(kernel.trace_dense(C, OPERANDS).get())  # nonzeros x K
        expected = EXPECTED
'''


def cells(code: dict[str, str], md, gpu_md: str) -> tuple[tuple[str, str], ...]:
    return (
        ("md", md("""\
            # SDDMM: the dense product, sampled at the nonzeros

            `Z[m, n] = C[m, n] * A[m, k] * B[k, n]`: the product of the dense `A` and `B`,
            computed only where the sparse `C` has a nonzero, and scaled by it. The nonzeros of
            `C` are the atoms, mapped as for SpMV; the *dense rank* is the summed `K`, which
            stays in time within the thread that owns the nonzero (a reduction across threads
            is not generated), so every nonzero has one owner for all of its `k`
            (docs/einsums.md).

            * `specs/sddmm/thread_per_nonzero.yaml`: one einsum, work-oriented: `C`'s nonzeros
              flattened and cut into chunks of `WORK_PER_THREAD`, one thread per chunk, each
              writing its nonzeros' values with plain stores. It stores `B` as `[N, K]`, so a
              nonzero's `K` loop streams two contiguous rows.
            * TeAAL's `sddmm.yaml` (the compiler's examples, in the shared corpus): two
              einsums, `T1[m, n] = A[m, k] * B[k, n]` then `Z[m, n] = C[m, n] * T1[m, n]`, and
              no mapping. teaal-loops recognises the pair as the same SDDMM: its kernel never
              forms `T1` (the HiFiber reference does). Without a mapping everything is time:
              one thread. So it appears twice, as given and with a mapping added here.

            Each goes through the whole pipeline below (the corpus ones when the shared corpus
            is beside the checkout): spec, schedule IR, bound sizes, HiFiber, CUDA, and the
            three views that must agree (HiFiber reference, CPU simulation, the GPU kernel
            where there is one): the same values, and the same thread owning every nonzero.
            Everything is seeded; it runs in seconds on a CPU.""")),
        ("code", code["SETUP"]),
        ("md", "## 1. The specs"),
        ("code", SPECS.replace("@CORPUS_SPEC@", CORPUS_SPEC)),
        ("md", md("""\
            ## 2. The schedule IR

            `lower` recognises the form (`sddmm`, `C` the sampler) and binds every final rank
            to a GPU level. `K`, the summed dense rank, is a time loop in all of them; the
            `combine:` line says that every nonzero's value is written once, by its owner.""")),
        ("code", code["IR"]),
        ("md", md("""\
            ## 3. A small matrix and the bound sizes

            `C` is 12 x 16 with seeded values, row 3 empty and row 7 holding 14 nonzeros (as
            in the SpMV notebooks); `A` and `B` have `K = 4`. `bind(..., dense_size=D)` fixes
            every size (for SDDMM always `DS = 1`, `DT = K`); `simulate(bound, C, A, B)`
            executes the bound schedule with NumPy: one value per nonzero of `C`, the owner of
            every (nonzero, k), the load balance.""")),
        ("code", code["MATRIX"] + OPERANDS),
        ("code", code["BIND"]),
        ("md", md("""\
            ## 4. The HiFiber programs and their results

            The reference: each spec as a program over fibers (fibertree's API), executed by
            `run_reference` (on fibertree when it is installed, else on teaal-loops' built-in
            fibers), recording the spacetime stamp of every multiply. Its `Z` is dense, zero
            away from `C`'s nonzeros. TeAAL's two einsums compute all of `T1` first.""")),
        ("code", code["HIFIBER"]),
        ("md", md("""\
            ## 5. The CUDA

            `teaal_loops.compile(spec).source` (what `teaal-loops generate` writes; no GPU is
            needed to render it): the library spec in full, the others as a diff against it.
            There is no `T1` in any of them: each thread sums `A[m, :] * B[:, n]` for its
            nonzeros.""")),
        ("code", code["CUDA"]),
        ("md", md("""\
            ## 6. The three views agree

            Values against NumPy, and owners between the reference (its stamps mapped to
            threads by `compare_owners`, as `teaal-loops check` does) and the simulation: for
            every (nonzero, k) pair, or, for TeAAL's two einsums, whose sampling einsum is
            stamped without `k`, for every nonzero.""")),
        ("code", THREE_VIEWS),
        ("md", md("""\
            ## 7. Who owns which nonzero

            Left, `C`'s pattern with every nonzero coloured and labelled by its thread; right,
            the (nonzero, k) pairs of every thread. Work-oriented chunks give every thread 5
            nonzeros wherever the rows end (the long row 7 is shared by three threads, each
            writing its own nonzeros: nothing to combine); dealing rows to threads gives the
            thread holding row 7 the most; without a mapping one thread does everything.""")),
        ("code", code["SHOW"] + "\n\n" + PICTURE),
        ("md", gpu_md),
        ("code", code["GPU_HEAD"] + GPU_CALL + code["GPU_TAIL"]),
    )
