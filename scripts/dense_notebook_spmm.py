"""The SpMM notebook's own cells: its specs, operands, comparisons, picture and GPU call."""

from __future__ import annotations

LIBRARY = "lanes_over_n"
CORPUS_SPEC = "teaal-specs/loops/spmm_thread_mapped__cell08_0.yaml"  # in the shared corpus
CORPUS_LABELS = ("loops_thread_mapped",)  # the specs made from it
CHECKS = (
    "reference multiplies every (nonzero, n) exactly once",
    "values reference == NumPy",
    "values simulation == NumPy",
    "owners reference == simulation",
)
GPU_CHECKS = (
    "values kernel == NumPy",
    "owners trace == simulation",
    "owners trace == reference",
)

SPECS = '''\
LIBRARY_SPEC = REPO / "specs" / "spmm" / "lanes_over_n.yaml"
CORPUS_SPEC = CORPUS / "@CORPUS_SPEC@"
add_spec("lanes_over_n", LIBRARY_SPEC, {})
# the same rows with each thread owning N_VEC = 4 neighbouring columns (N1 in space, N0 in
# time): the values are the same, the owners of (nonzero, n) move
add_spec("lanes_over_n_vec", REPO / "specs" / "spmm" / "lanes_over_n_vec.yaml", {})
if CORPUS_SPEC.is_file():
    # 8 row tiles dealt to 4 threads: thread t owns rows t, t + 4, t + 8 (as in
    # thread_mapped.ipynb)
    add_spec("loops_thread_mapped", CORPUS_SPEC, {"NUM_TILES": 8, "NUM_THREADS": 4})
else:
    print(f"skipped: {CORPUS_SPEC} @CORPUS_SKIP@, "
          "or set TEAAL_LOOPS_CORPUS): the cells below show the library spec alone")
'''

OPERANDS = '''\
B = rng.uniform(-1.0, 1.0, size=(COLS, D))  # dense [K, N], row-major
OPERANDS = (B,)  # the dense operands, in the order simulate and the kernels take them
TENSORS = {"A": A, "B": B}  # the reference's inputs, by the specs' tensor names
EXPECTED = A @ B  # NumPy's Z


def result_text(z: np.ndarray) -> str:
    return "Z =\\n" + np.array2string(z, precision=2, suppress_small=True)


print(f"A: {A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros; row lengths {row_lengths.tolist()}")
print(f"B: {B.shape[0]} x {B.shape[1]} (N = D = {D})")
'''

THREE_VIEWS = '''\
def three_views(label: str) -> np.ndarray:
    """Compare the label's reference with NumPy and with the simulation (values, and the owner
    of every (nonzero, n)); record the verdicts; return the reference's owners."""
    ref, sim = refs[label], sims[label]
    owners = compare_owners(specs[label], bounds[label], A, ref.stamps, sim.owner)
    assert owners.compared and owners.reference is not None, owners.text
    z_ref = np.asarray(ref.outputs["Z"], dtype=np.float64)
    close = dict(rtol=1e-12, atol=1e-12)
    AGREEMENT[f"{label}: reference multiplies every (nonzero, n) exactly once"] = (
        owners.reference.each_once
    )
    AGREEMENT[f"{label}: values reference == NumPy"] = bool(np.allclose(z_ref, EXPECTED, **close))
    AGREEMENT[f"{label}: values simulation == NumPy"] = bool(
        np.allclose(sim.y, EXPECTED, **close)
    )
    AGREEMENT[f"{label}: owners reference == simulation"] = owners.ok
    print(f"{label}: max |Z_ref - A @ B| = {np.abs(z_ref - EXPECTED).max():.3g}, "
          f"max |Z_sim - A @ B| = {np.abs(sim.y - EXPECTED).max():.3g}")
    print(f"  owners (reference vs simulation): {owners.text}")
    return owners.reference.atom_owner()


ref_owner = {label: three_views(label) for label in specs}
for label in specs:
    print(f"\\n{label}: the first stamps")
    for stamp in refs[label].stamps[:3]:
        print("  " + stamp_text(stamp))
    print(f"  row 0's {A.indptr[1]} nonzeros, thread of each for n = 0..{D - 1} "
          "(reference | simulation):")
    for n in range(D):
        print(f"    n = {n}: {ref_owner[label][:A.indptr[1], n].tolist()} | "
              f"{sims[label].owner[:A.indptr[1], n].tolist()}")
'''

PICTURE = '''\
def output_owner(matrix, owner: np.ndarray) -> np.ndarray:
    """rows x D: the thread owning Z[m, n], that is row m's nonzeros for index n (-1: row m
    is empty; -2: several threads share the row, combined atomically)."""
    grid = np.full((matrix.shape[0], owner.shape[1]), -1, dtype=np.int64)
    for m in range(matrix.shape[0]):
        part = owner[matrix.indptr[m]:matrix.indptr[m + 1]]
        for n in range(owner.shape[1]):
            threads = np.unique(part[:, n])
            if len(threads):
                grid[m, n] = threads[0] if len(threads) == 1 else -2
    return grid


grids = {label: output_owner(A, sims[label].owner) for label in specs}
for label, grid in grids.items():
    same = np.array_equal(grid, output_owner(A, ref_owner[label]))
    print(f"{label}: the thread owning Z[m, n] in the simulation ('.': row m is empty; "
          f"{'the reference agrees' if same else 'THE REFERENCE DIFFERS'})")
    print("          " + "".join(f"n={n:<4d}" for n in range(D)))
    for m, row in enumerate(grid):
        print(f"  row {m:2d}  " + "".join(f"{'.' if t == -1 else t:<6}" for t in row))
    print()

fig, axes = plt.subplots(len(specs), 2, figsize=(12, 5 * len(specs)), squeeze=False,
                         gridspec_kw={"width_ratios": [1, 2]})
for (ax, bx), (label, grid) in zip(axes, grids.items(), strict=True):
    for m, n in np.ndindex(*grid.shape):
        if grid[m, n] != -1:
            cell(ax, n, m, int(grid[m, n]), "*" if grid[m, n] == -2 else str(grid[m, n]))
    ax.set_xlim(-0.5, D - 0.5)
    ax.set_ylim(ROWS - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_xticks(range(D))
    ax.set_yticks(range(ROWS))
    ax.set_yticklabels([f"{m} ({k})" for m, k in enumerate(np.diff(A.indptr))])
    ax.set_xlabel("n (column of B and Z)")
    ax.set_ylabel("row m (its nonzeros)")
    b = bounds[label]
    ax.set_title(f"{label}\\nowner of Z[m, n]: DS = {b.dense_space}, DT = {b.dense_time}")
    bars(bx, sims[label].owner, b.threads, "(nonzero, n) pairs owned")
fig.tight_layout()
show(fig)
'''

GPU_CALL = '''\
        values_gpu = np.asarray(kernel(A, B).get())  # Z = A @ B, a CuPy array
        owner_gpu = np.asarray(kernel.trace_dense(A, OPERANDS).get())  # nonzeros x N
        expected = EXPECTED
'''


def cells(code: dict[str, str], md, gpu_md: str) -> tuple[tuple[str, str], ...]:
    return (
        ("md", md("""\
            # SpMM: where the dense rank N goes

            `Z[m, n] = A[m, k] * B[k, n]`: a sparse `A` times a dense `B` of `N` columns. The
            rows and nonzeros of `A` are mapped exactly as for SpMV (`thread_mapped.ipynb` and
            its siblings); what SpMM adds is the *dense rank* `N`, kept by the output, which the
            spec's spacetime puts in space or in time (docs/einsums.md):

            * `specs/spmm/lanes_over_n.yaml` puts `N` in **space** (`space: [M, N]`): every row
              is a worker with `DS = N` threads, thread `m * N + n` computing `Z[m, n]`.
              Neighbouring threads read neighbouring elements of a row of `B` (one coalesced
              load) and share the row's nonzeros (one broadcast load).
            * loops' own SpMM notebook (`spmm_thread_mapped`, in the shared corpus) puts `N` in
              **time** (`time: [M2, M1, N, K]`): every thread loops over all of `N` for each
              row it owns (`DS = 1`, `DT = N`).

            Both go through the whole pipeline below (the corpus spec when the shared corpus is
            beside the checkout): spec, schedule IR, bound sizes, HiFiber, CUDA, and the three
            views that must agree (HiFiber reference, CPU simulation, the GPU kernel where
            there is one): the same values, and the same thread owning every (nonzero, n).
            Everything is seeded; it runs in seconds on a CPU.""")),
        ("code", code["SETUP"]),
        ("md", md("""\
            ## 1. The specs

            The same einsum twice; only the mapping differs. The corpus spec's comments are
            loops' own (its notebook's cell 8).""")),
        ("code", SPECS.replace("@CORPUS_SPEC@", CORPUS_SPEC)),
        ("md", md("""\
            ## 2. The schedule IR

            `lower` binds every final rank to a GPU level. Both are thread-mapped: `M` (or its
            innermost tile `M0`) selects the thread. The `N` line is the difference: `space ->
            dense slot within the thread` against `time -> sequential loop`, and the `dense:`
            line gives the thread of (worker, n): `(worker * DS + n mod DS) * G + lane`.""")),
        ("code", code["IR"]),
        ("md", md("""\
            ## 3. A small matrix and the bound sizes

            12 x 16 with seeded values, row 3 empty and row 7 holding 14 nonzeros (as in the
            SpMV notebooks), and `B` with `N = 4` columns. `bind(..., dense_size=D)` fixes
            every size; the simulation (`simulate(bound, A, B)`) executes the bound schedule
            with NumPy: `Z`, the owner of every (nonzero, n), and the load balance. With `N`
            in space there are `DS = 4` threads per row and `DT = 1` step each; in time,
            `DS = 1` and `DT = 4`.""")),
        ("code", code["MATRIX"] + OPERANDS),
        ("code", code["BIND"]),
        ("md", md("""\
            ## 4. The HiFiber programs and their results

            The reference: each spec as a program over fibers (fibertree's API), executed by
            `run_reference` (on fibertree when it is installed, else on teaal-loops' built-in
            fibers), recording the spacetime stamp of every multiply. With `N` in space the
            `n` loop's position joins the space stamp; in time it joins the time stamp.""")),
        ("code", code["HIFIBER"]),
        ("md", md("""\
            ## 5. The CUDA

            `teaal_loops.compile(spec).source` (what `teaal-loops generate` writes; no GPU is
            needed to render it): the first spec in full, the others as a diff against it.
            The dense rank's split is the same code for every placement: `dense_space` (DS)
            and `dense_time` (DT) are launch arguments, so the diff shows the header and the
            row tiling.""")),
        ("code", code["CUDA"]),
        ("md", md("""\
            ## 6. The three views agree

            Values against NumPy's `A @ B`, and the owner of every (nonzero, n) pair between
            the reference (its stamps mapped to threads by `compare_owners`, as `teaal-loops
            check` does) and the simulation.""")),
        ("code", THREE_VIEWS),
        ("md", md("""\
            ## 7. Who owns which (row, n)

            Left, the thread owning each output element `Z[m, n]`; right, the (nonzero, n)
            pairs of every thread. With `N` in space each element has its own thread (the
            colours change along a row of `Z`), so the long row 7 costs 4 threads 14 steps
            each; with `N` in time a row of `Z` has one colour, and its thread does all
            `14 x 4` multiplies.""")),
        ("code", code["SHOW"] + "\n\n" + PICTURE),
        ("md", gpu_md),
        ("code", code["GPU_HEAD"] + GPU_CALL + code["GPU_TAIL"]),
    )
