"""Write notebooks/<schedule>.ipynb: one walk-through notebook per SpMV schedule of specs/.

Every notebook shows the spec, its schedule IR, the generated HiFiber and CUDA, runs the HiFiber
reference on a small seeded matrix, compares it with NumPy and with the CPU simulation (values and
the owning thread of every nonzero), draws who owns what, and runs on the GPU when there is one.
The notebooks differ only in the schedule, its small parameters and the prose, so they are built
from one template here; the committed .ipynb files carry no outputs (CI executes them).

    python -m scripts.make_notebooks            # (re)write notebooks/*.ipynb
    python -m scripts.make_notebooks --check    # exit 1 when the committed files are stale
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent

import nbformat
from nbformat.notebooknode import NotebookNode

from scripts.notebook_files import write_or_check

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO / "notebooks"
# The line the verdict cell prints; tests/notebooks/test_notebooks.py parses it.
VERDICT_MARKER = "AGREEMENT_JSON "
# Comparisons that every notebook must have made (and passed) on the small matrix.
REQUIRED_CHECKS = (
    "small: reference multiplies every nonzero exactly once",
    "small: values reference == NumPy",
    "small: values simulation == NumPy",
    "small: owners reference == simulation",
)


@dataclass(frozen=True)
class Schedule:
    name: str
    title: str
    params: dict[str, int]
    intro: str  # what the schedule does (markdown)
    picture: str  # what to look for in the ownership picture (markdown)


SCHEDULES = (
    Schedule(
        name="thread_mapped",
        title="Thread-mapped SpMV: one row per thread",
        params={"NUM_TILES": 8, "NUM_THREADS": 4},
        intro="""\
            The simplest schedule (loops' `thread_mapped`): the row rank `M` is tiled twice with
            `uniform_shape`, and only the innermost tile rank `M0` is in `space`. So row `m` is
            owned by thread `(m mod NUM_TILES) mod NUM_THREADS`, which walks the tiles `M2`, `M1`
            (a grid-stride loop) and the row's nonzeros `K` sequentially, then stores `y[m]`.

            Here `NUM_TILES = 8` and `NUM_THREADS = 4` (the defaults would give one thread per
            row), so 4 threads share the 12 rows: thread `t` owns rows `t`, `t + 4`, `t + 8`.""",
        picture="""\
            Every row has a single colour: one thread owns the whole row, so no atomics are
            needed. The long row 7 belongs to thread 3, which therefore does far more work than
            the others (the bar chart): thread-mapped is only balanced when rows are.""",
    ),
    Schedule(
        name="group_mapped",
        title="Group-mapped SpMV: a group of lanes per row",
        params={"NUM_TILES": 12, "GRID_SIZE": 4, "BLOCK_SIZE": 4},
        intro="""\
            loops' `group_mapped` ("vector CSR"): the row rank is tiled as in thread-mapped and
            `M0` picks a *group*; the nonzeros of a row are cut by
            `uniform_occupancy(A.BLOCK_SIZE)`, and `K0` (the position inside a chunk) is also in
            `space`: it is the *lane*. Lane `l` takes nonzeros `l, l + G, l + 2G, ...` of the row
            (the time rank `K1`), then the group reduces its lanes' partial sums and one lane
            stores the row.

            Here groups have `G = BLOCK_SIZE = 4` lanes (a warp would be 32), `GRID_SIZE = 4`
            groups, `NUM_TILES = 12`: row `m` goes to group `m mod 4`, and nonzero `j` of the row
            to thread `4 * group + (j mod 4)`.""",
        picture="""\
            Within a row the colours cycle through the group's 4 lanes; the long row 7 is spread
            over all lanes of group 3 (threads 12-15), so its 14 nonzeros cost each lane at most
            4 steps. A row shorter than the group leaves its upper lanes without work, hence
            the uneven bars.""",
    ),
    Schedule(
        name="work_oriented",
        title="Work-oriented SpMV: equal nonzeros per thread",
        params={"WORK_PER_THREAD": 5},
        intro="""\
            loops' `work_oriented` in its nonzero-split form: the ranks `(M, K)` are flattened
            into `MK`, the nonzeros in row-major order, and `uniform_occupancy(A.WORK_PER_THREAD)`
            cuts them into chunks of equal size. `MK1` (which chunk) is `space`: one thread per
            chunk. Rows wholly inside a chunk are stored; a row split across chunks gets one
            `atomicAdd` from every chunk that holds part of it (the output is zeroed first).

            Here `WORK_PER_THREAD = 5`: 44 nonzeros make 9 threads.""",
        picture="""\
            Colours run in consecutive blocks of 5 nonzeros in row-major order regardless of row
            boundaries, so every bar has the same height (the last thread takes the remainder).
            The long row 7 is cut across three threads, which combine it atomically.""",
    ),
    Schedule(
        name="merge_path",
        title="Merge-path SpMV: equal shares of rows plus nonzeros",
        params={"ITEMS_PER_THREAD": 6},
        intro="""\
            Merge-path (Merrill & Garland; loops' `merge_path_flat`). TeAAL has no partitioner for
            it, so the spec uses our documented extension `x_merge_path(A.ITEMS_PER_THREAD)` on
            the flattened `(M, K)` rank: the merge of row ends and nonzeros (`rows + nnz` items)
            is cut into chunks of `ITEMS_PER_THREAD` items, one thread per chunk (`MK1` in
            `space`). Nonzero `a` of row `r` is item `a + r`; each thread finds its start with a
            binary search along its merge diagonal. Its HiFiber is `splitUnEqual` at the chunks'
            first nonzeros.

            Here `ITEMS_PER_THREAD = 6`: 12 rows + 44 nonzeros = 56 items make 10 threads.""",
        picture="""\
            Like work-oriented, colours run in row-major blocks, but a chunk also pays one item
            per row end it crosses: threads whose chunk holds several row ends (including the
            empty row 3) own fewer nonzeros. Neither long rows nor runs of empty rows can
            overload a thread.""",
    ),
)


# ---- the cells ----------------------------------------------------------------------------

SETUP = '''\
# Setup: find the checkout (this notebook runs from notebooks/ or from the repository root),
# (its specs and the corpus beside it) and fix the random seed; teaal_loops is the installed
# package (pip install ".[test]").
import json
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp


def find_repo(start: Path) -> Path:
    for folder in (start, *start.parents):
        if (folder / "specs" / "thread_mapped.yaml").is_file():
            return folder
    raise FileNotFoundError("run this notebook inside the teaal-loops checkout")


REPO = find_repo(Path.cwd().resolve())  # for the specs and the corpus beside it

SCHEDULE = "@SCHEDULE@"
SPEC_PATH = REPO / "specs" / f"{SCHEDULE}.yaml"
# small sizes, so that a 12-row matrix keeps several threads busy
PARAMS = @PARAMS@
SEED = 7
AGREEMENT: dict[str, bool] = {}  # every comparison records its verdict; the last cell asserts
'''

SPEC = '''\
from teaal_loops.spec import load_spec

print(SPEC_PATH.read_text())
spec = load_spec(SPEC_PATH)
'''

IR = '''\
from teaal_loops.lowering import explain_text, lower, simulate
from teaal_loops.schedules import bind

schedule = lower(spec, params=PARAMS)
print(explain_text(schedule))
'''

HIFIBER = '''\
from teaal_loops.reference import hifiber_source

print(hifiber_source(spec, params=PARAMS))
'''

CUDA = '''\
from teaal_loops.pipeline.generate import render_spec

cu_name, cuda_source = render_spec(SPEC_PATH, dtype="float32", params=PARAMS)
print(f"// ---- {cu_name} ----")
print(cuda_source)
'''

MATRIX = '''\
rng = np.random.default_rng(SEED)
ROWS, COLS = 12, 16
row_lengths = rng.integers(1, 5, size=ROWS)
row_lengths[3] = 0  # an empty row
row_lengths[7] = 14  # a long row
columns = [np.sort(rng.choice(COLS, size=n, replace=False)) for n in row_lengths]
indptr = np.concatenate([[0], np.cumsum(row_lengths)])
values = rng.uniform(-1.0, 1.0, size=int(indptr[-1]))
A = sp.csr_matrix((values, np.concatenate(columns), indptr), shape=(ROWS, COLS))
x = rng.uniform(-1.0, 1.0, size=COLS)
print(f"A: {A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros; row lengths {row_lengths.tolist()}")
'''

SIMULATE = '''\
from teaal_loops.matrix import matrix_shape

bound = bind(schedule, matrix_shape(A))
sim = simulate(bound, A, x)
print(explain_text(schedule, bound, sim))
print("\\nowner of every nonzero (CSR order):", sim.owner.tolist())
'''

REFERENCE = '''\
from teaal_loops.reference import run_reference
from teaal_loops.reference.ownership import compare_owners


def three_views(A: sp.csr_matrix, x: np.ndarray, label: str):
    """Run the HiFiber reference and the CPU simulation on A x; compare them with NumPy and
    with each other (values and the owning thread of every nonzero); record the verdicts."""
    bound = bind(schedule, matrix_shape(A))
    sim = simulate(bound, A, x)
    ref = run_reference(spec, {"A": A, "B": x}, params=PARAMS)
    y_ref = np.asarray(ref.outputs["Z"], dtype=np.float64)
    y_numpy = A @ x
    # the stamps -> the owning thread of every nonzero (CSR order), and the comparison
    owners = compare_owners(spec, bound, A, ref.stamps, sim.owner)
    assert owners.compared and owners.reference is not None, owners.text
    ref_owner = owners.reference.atom_owner()
    close = dict(rtol=1e-12, atol=1e-12)
    AGREEMENT[f"{label}: reference multiplies every nonzero exactly once"] = (
        owners.reference.each_once
    )
    AGREEMENT[f"{label}: values reference == NumPy"] = bool(np.allclose(y_ref, y_numpy, **close))
    AGREEMENT[f"{label}: values simulation == NumPy"] = bool(np.allclose(sim.y, y_numpy, **close))
    AGREEMENT[f"{label}: owners reference == simulation"] = owners.ok
    print(f"{label}: {A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros, reference on {ref.engine}, "
          f"{len(ref.stamps)} multiplies stamped")
    print(f"  max |y_ref - y_numpy| = {np.abs(y_ref - y_numpy).max(initial=0.0):.3g}, "
          f"max |y_sim - y_numpy| = {np.abs(sim.y - y_numpy).max(initial=0.0):.3g}")
    print(f"  owners (reference vs simulation): {owners.text}")
    return bound, sim, ref, ref_owner


bound, sim, ref, ref_owner = three_views(A, x, "small")
print("\\nfirst stamps of the reference (indices, space, time):")
for stamp in ref.stamps[:4]:
    print(" ", dict(stamp.indices), stamp.space, stamp.time)
print("\\nrow m: owning thread of each nonzero (reference | simulation)")
for m in range(A.shape[0]):
    lo, hi = A.indptr[m], A.indptr[m + 1]
    print(f"  row {m:2d}: {ref_owner[lo:hi].tolist()} | {sim.owner[lo:hi].tolist()}")
'''

PICTURE = '''\
import io

import matplotlib.pyplot as plt
from IPython.display import Image, display
from matplotlib.patches import Rectangle


def show(fig) -> None:
    """Display a figure as PNG whatever the matplotlib backend (inline, or Agg under CI)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    display(Image(buffer.getvalue()))


def draw_owners(A: sp.csr_matrix, owner: np.ndarray, threads: int, title: str,
                annotate: bool = True) -> None:
    """Left: the sparsity pattern, each nonzero coloured (and labelled) by its owning thread.
    Right: nonzeros (atoms) per thread."""
    cmap = plt.get_cmap("tab20")
    rows, cols = A.shape
    row_of = np.repeat(np.arange(rows), np.diff(A.indptr))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    for m, k, t in zip(row_of, A.indices, owner, strict=True):
        ax.add_patch(Rectangle((k - 0.45, m - 0.45), 0.9, 0.9, color=cmap(int(t) % 20)))
        if annotate:
            ax.text(k, m, str(int(t)), ha="center", va="center", fontsize=8)
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_aspect("equal")
    if annotate:
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
        ax.set_yticklabels([f"{m} ({n})" for m, n in enumerate(np.diff(A.indptr))])
    ax.set_xlabel("column k")
    ax.set_ylabel("row m (its nonzeros)")
    ax.set_title("owning thread of every nonzero")
    counts = np.bincount(owner, minlength=threads)
    bx.bar(range(threads), counts, color=[cmap(t % 20) for t in range(threads)])
    bx.axhline(counts.mean(), color="k", linestyle="--", label=f"mean {counts.mean():.2f}")
    bx.set_xlabel("thread (global id)")
    bx.set_ylabel("nonzeros owned")
    bx.set_title(f"atoms per thread: max {counts.max()}, {int((counts == 0).sum())} idle")
    bx.set_ylim(0, counts.max() * 1.25 + 0.5)  # room for the legend above the bars
    bx.legend(loc="upper right")
    fig.suptitle(title)
    fig.tight_layout()
    show(fig)


draw_owners(A, sim.owner, sim.stats.threads, f"{SCHEDULE} {PARAMS} on the 12 x 16 matrix")
'''

CORPUS = '''\
from teaal_loops.matrix import read_matrix_market

corpus = Path(os.environ.get("TEAAL_LOOPS_CORPUS", REPO.parent / "shared" / "corpus"))
mtx = corpus / "matrices" / "chesapeake.mtx.gz"
if not mtx.is_file():
    print(f"skipped: {mtx} not found (the shared corpus lives beside the checkout)")
else:
    C = read_matrix_market(mtx)  # a pattern matrix: give it seeded random values
    corpus_rng = np.random.default_rng(SEED + 1)
    C.data = corpus_rng.uniform(-1.0, 1.0, size=C.nnz)
    xc = corpus_rng.uniform(-1.0, 1.0, size=C.shape[1])
    _, sim_c, _, _ = three_views(C, xc, "chesapeake")
    draw_owners(C, sim_c.owner, sim_c.stats.threads, f"{SCHEDULE} {PARAMS} on chesapeake",
                annotate=False)
'''

GPU = '''\
try:
    from teaal_loops import pipeline, runtime

    has_gpu = runtime.gpu_available()
except ImportError as exc:  # the runtime is optional for this notebook
    has_gpu, runtime = False, None
    print(f"(teaal_loops.runtime not importable: {exc})")

if not has_gpu:
    print("skipped: no CUDA GPU / CuPy")
else:
    kernel = pipeline.compile(SPEC_PATH, dtype="float64", params=PARAMS)
    y_gpu = np.asarray(kernel(A, x).get())
    owner_gpu = np.asarray(kernel.trace(A, x).get())
    AGREEMENT["gpu: values kernel == NumPy"] = bool(
        np.allclose(y_gpu, A @ x, rtol=1e-12, atol=1e-12)
    )
    AGREEMENT["gpu: owners trace == simulation"] = bool(np.array_equal(owner_gpu, sim.owner))
    print(kernel)
    print("max |y_gpu - y_numpy| =", np.abs(y_gpu - A @ x).max())
    print("owners differing (trace vs simulation):", int((owner_gpu != sim.owner).sum()))
'''

VERDICT = '''\
for what, ok in AGREEMENT.items():
    print(f"{'ok  ' if ok else 'FAIL'}  {what}")
REQUIRED = @REQUIRED@
missing = [what for what in REQUIRED if what not in AGREEMENT]
assert not missing, f"comparisons that did not run: {missing}"
failed = [what for what, ok in AGREEMENT.items() if not ok]
assert not failed, f"views disagree: {failed}"
print("@MARKER@" + json.dumps(AGREEMENT, sort_keys=True))
'''


def _list_literal(items: tuple[str, ...]) -> str:
    return "[\n" + "".join(f"    {json.dumps(item)},\n" for item in items) + "]"


def _md(text: str) -> str:
    return dedent(text).strip()


def build_notebook(s: Schedule) -> NotebookNode:
    """The notebook of one schedule (no outputs; deterministic cell ids)."""
    code = {
        "SETUP": SETUP.replace("@SCHEDULE@", s.name).replace("@PARAMS@", json.dumps(s.params)),
        "VERDICT": VERDICT.replace("@REQUIRED@", _list_literal(REQUIRED_CHECKS)).replace(
            "@MARKER@", VERDICT_MARKER
        ),
    }
    cells: list[tuple[str, str]] = [
        ("md", f"# {s.title}\n\n" + _md(s.intro) + "\n\n" + _md("""\
            This notebook walks the whole teaal-loops pipeline for `specs/@NAME@.yaml`: the
            spec, its schedule IR, the HiFiber and CUDA generated from it, and the three views
            that must agree (HiFiber reference, CPU simulation, and the GPU kernel where there
            is one): the same values, and the same thread owning every nonzero. Everything is
            seeded; it runs in seconds on a CPU.""").replace("@NAME@", s.name)),
        ("code", code["SETUP"]),
        ("md", "## 1. The spec\n\nA TeAAL spec: the SpMV einsum plus a mapping "
               "(`partitioning`, `loop-order`, `spacetime`)."),
        ("code", SPEC),
        ("md", _md("""\
            ## 2. The schedule IR

            `lower` recognises the schedule and binds every final rank to a GPU level:
            a `space` rank selects a thread (or a group, or a lane), a `time` rank is a
            sequential loop. `combine` says how partial rows meet in the output.""")),
        ("code", IR),
        ("md", _md("""\
            ## 3. The generated HiFiber

            The reference: the same spec as a program over fibers (fibertree's API). It runs
            on fibertree when that is installed, otherwise on teaal-loops' built-in fibers, and
            records the spacetime stamp of every multiply.""")),
        ("code", HIFIBER),
        ("md", _md("""\
            ## 4. The generated CUDA

            What `teaal-loops generate specs/@NAME@.yaml` writes with these parameters (the
            trace build, `-DTEAAL_TRACE=1`, also records the owner of every nonzero).""")
            .replace("@NAME@", s.name)),
        ("code", CUDA),
        ("md", _md("""\
            ## 5. A small matrix

            12 x 16 with seeded random values; row 3 is empty and row 7 holds 14 nonzeros, the
            two cases that unbalance naive schedules.""")),
        ("code", MATRIX),
        ("md", _md("""\
            ## 6. The CPU simulation

            `simulate` executes the bound schedule with NumPy: the product, the owning
            global thread of every nonzero, and the load balance.""")),
        ("code", SIMULATE),
        ("md", _md("""\
            ## 7. The HiFiber reference against NumPy and the simulation

            Each stamp names the multiply's indices `m, k` (hence its nonzero) and the
            `(position, coordinate)` of every space rank; `compare_owners` (from
            `teaal_loops.reference.ownership`, which `teaal-loops check` uses too) maps the
            latter to the thread the IR binds it to. Values must match NumPy, and owners must
            match the simulation nonzero by nonzero.""")),
        ("code", REFERENCE),
        ("md", "## 8. Who owns which nonzero\n\n" + _md(s.picture)),
        ("code", PICTURE),
        ("md", _md("""\
            ## 9. A real matrix: chesapeake

            The same three-view comparison on `chesapeake` (39 x 39, 340 nonzeros) from the
            shared corpus, when the corpus is beside the checkout.""")),
        ("code", CORPUS),
        ("md", _md("""\
            ## 10. On the GPU

            Where CuPy and a CUDA device are present, compile the kernel, run it, and run its
            trace build: values must match NumPy and the traced owners must match the
            simulation exactly. Elsewhere this cell says it skipped.""")),
        ("code", GPU),
        ("md", "## 11. Verdict\n\nEvery comparison above must have run and agreed."),
        ("code", code["VERDICT"]),
    ]
    nb = nbformat.v4.new_notebook()
    nb.metadata = NotebookNode(
        {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        }
    )
    for i, (kind, source) in enumerate(cells):
        cell_id = f"{s.name}-{i:02d}"
        source = source.rstrip("\n")
        if kind == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(source, id=cell_id))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(source, id=cell_id))
    nbformat.validate(nb)
    return nb


def expected_files() -> dict[Path, str]:
    """Notebook path -> its JSON text, for every schedule."""
    return {
        NOTEBOOK_DIR / f"{s.name}.ipynb": nbformat.writes(build_notebook(s)) for s in SCHEDULES
    }


def main(argv: list[str] | None = None) -> int:
    return write_or_check(expected_files(), argv, description=__doc__.splitlines()[0],
                          command="python -m scripts.make_notebooks")


if __name__ == "__main__":
    sys.exit(main())
