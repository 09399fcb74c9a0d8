"""Write notebooks/solvers.ipynb: iterative solvers on generated kernels.

The notebook solves a 2-D Poisson problem with conjugate gradients and runs PageRank on a
corpus graph. On any machine it runs both with a generated schedule's CPU simulation as the
matrix-vector product (SciPy's ``cg`` on a ``LinearOperator``) and checks them against SciPy;
on a machine with CuPy and a CUDA GPU it runs them with the generated kernel's
``kernel.linear_operator(A)`` under cupyx's ``cg`` and compares the time an iteration with
cupyx on the same problem (elsewhere that cell says it skipped). The committed .ipynb carries no
outputs (CI executes it); edit this generator, not the notebook.

    python -m scripts.make_solver_notebook            # (re)write notebooks/solvers.ipynb
    python -m scripts.make_solver_notebook --check    # exit 1 when the committed file is stale
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from textwrap import dedent

import nbformat
from nbformat.notebooknode import NotebookNode

from scripts.notebook_files import write_or_check

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "solvers.ipynb"
# The line the verdict cell prints; tests/notebooks/test_solver_notebook.py parses it.
VERDICT_MARKER = "SOLVERS_JSON "
GPU_SKIP_LINE = "skipped: no CUDA GPU / CuPy"
# Comparisons the notebook must have made (and passed) on every machine.
REQUIRED_CHECKS = (
    "cpu: CG on the simulated kernel converged",
    "cpu: CG solution == the exact one",
    "cpu: CG residuals simulated kernel == SciPy",
    "cpu: PageRank is a probability vector at a fixed point",
    "cpu: PageRank simulated kernel == SciPy",
)
# ... and on a machine with a GPU.
GPU_CHECKS = (
    "gpu: CG iterates kernel == cupyx",
    "gpu: PageRank kernel == CPU reference",
    "gpu: PageRank kernel == cupyx",
)

SETUP = '''\
# Setup: find the checkout (this notebook runs from notebooks/ or from the repository root),
# (its specs and the corpus beside it); teaal_loops is the installed package
# (pip install ".[test]").
import json
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla


def find_repo(start: Path) -> Path:
    for folder in (start, *start.parents):
        if (folder / "specs" / "thread_mapped.yaml").is_file():
            return folder
    raise FileNotFoundError("run this notebook inside the teaal-loops checkout")


REPO = find_repo(Path.cwd().resolve())  # for the specs and the corpus beside it

CPU_GRID = 64  # the CPU's Poisson problem: 64 x 64 grid, 4,096 rows
GPU_GRID = 1000  # the GPU's: 1000 x 1000 grid, 1M rows, 5M nonzeros
CG_ITERATIONS = 200  # fixed, for timing (tolerance 0)
PAGERANK_ITERATIONS = 100
GRAPH = "soc-Slashdot0902.mtx.gz"  # from the shared corpus; a seeded R-MAT graph otherwise
AGREEMENT: dict[str, bool] = {}  # every comparison records its verdict; the last cell asserts
'''

PROBLEMS = '''\
import inspect

from teaal_loops.bench.api_costs import pagerank, pagerank_matrix, poisson_2d

for function in (poisson_2d, pagerank_matrix, pagerank):
    print(inspect.getsource(function))
'''

CPU_CG = '''\
from teaal_loops.lowering import lower, simulate
from teaal_loops.matrix import matrix_shape
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec


def simulated_operator(spec_name: str, A: sp.csr_matrix) -> spla.LinearOperator:
    """A's product computed by the CPU simulation of a generated schedule (the same work
    split, owners and combine as the kernel), as a SciPy linear operator."""
    schedule = lower(load_spec(REPO / "specs" / f"{spec_name}.yaml"))
    bound = bind(schedule, matrix_shape(A))
    return spla.LinearOperator(
        A.shape, matvec=lambda v: simulate(bound, A, np.ravel(v)).y, dtype=np.float64
    )


A_small = poisson_2d(CPU_GRID)
b_small = A_small @ np.ones(A_small.shape[0])  # the exact solution is all ones
residuals: dict[str, list[float]] = {}
solutions = {}
KERNEL_LABEL = "simulated thread-mapped kernel"
operators = {KERNEL_LABEL: simulated_operator("thread_mapped", A_small), "SciPy": A_small}
for label, operator in operators.items():
    history = residuals[label] = []
    x, info = spla.cg(
        operator, b_small, rtol=1e-10, maxiter=5000,
        callback=lambda xk, h=history: h.append(
            float(np.linalg.norm(b_small - A_small @ xk) / np.linalg.norm(b_small))
        ),
    )
    solutions[label] = (x, info)
    print(f"{label:32s} {len(history)} iterations, final relative residual {history[-1]:.2e}")

x_sim, info_sim = solutions[KERNEL_LABEL]
sim_history = np.array(residuals[KERNEL_LABEL])
ref_history = np.array(residuals["SciPy"])
AGREEMENT["cpu: CG on the simulated kernel converged"] = bool(
    info_sim == 0 and sim_history[-1] < 1e-9
)
AGREEMENT["cpu: CG solution == the exact one"] = bool(np.allclose(x_sim, 1.0, rtol=0, atol=1e-6))
AGREEMENT["cpu: CG residuals simulated kernel == SciPy"] = bool(
    len(sim_history) == len(ref_history)
    and np.allclose(sim_history, ref_history, rtol=1e-6, atol=1e-14)
)
'''

PLOT = '''\
import io

import matplotlib.pyplot as plt
from IPython.display import Image, display

fig, ax = plt.subplots(figsize=(7, 4))
for label, history in residuals.items():
    ax.semilogy(range(1, len(history) + 1), history, label=label,
                linestyle="-" if "kernel" in label else "--")
ax.set_xlabel("CG iteration")
ax.set_ylabel("relative residual")
ax.set_title(f"CG on the {CPU_GRID} x {CPU_GRID} Poisson problem")
ax.legend()
fig.tight_layout()
buffer = io.BytesIO()
fig.savefig(buffer, format="png", dpi=90)
plt.close(fig)
display(Image(buffer.getvalue()))
'''

CPU_PAGERANK = '''\
from teaal_loops.matrix import read_matrix_market, synthetic

corpus = Path(os.environ.get("TEAAL_LOOPS_CORPUS", REPO.parent / "shared" / "corpus"))
path = corpus / "matrices" / GRAPH
if path.is_file():
    graph_name, G = GRAPH, read_matrix_market(path)
else:
    print(f"({path} not found: the shared corpus lives beside the checkout; using R-MAT)")
    graph_name = "rmat:rows=65536,nnz=800000,seed=7"
    G = synthetic("rmat", rows=65536, nnz=800_000, seed=7)
M, dangling = pagerank_matrix(G)
print(f"{graph_name}: {M.shape[0]} nodes, {M.nnz} edges, {int(dangling.sum())} dangling")

mask = dangling.astype(np.float64)
ranks_ref = pagerank(M.__matmul__, mask, PAGERANK_ITERATIONS, np)
ranks_sim = pagerank(simulated_operator("merge_path", M).matvec, mask, PAGERANK_ITERATIONS, np)
first_step = pagerank(M.__matmul__, mask, 1, np)  # the uniform start is not the answer...
one_more = 0.85 * (M @ ranks_ref) + (0.85 * ranks_ref @ mask + 0.15) / M.shape[0]  # ...r is
AGREEMENT["cpu: PageRank is a probability vector at a fixed point"] = bool(
    abs(ranks_ref.sum() - 1.0) < 1e-9 and (ranks_ref >= 0).all()
    and np.abs(one_more - ranks_ref).sum() < 1e-6 and np.abs(first_step - ranks_ref).sum() > 1e-3
)
AGREEMENT["cpu: PageRank simulated kernel == SciPy"] = bool(
    np.allclose(ranks_sim, ranks_ref, rtol=1e-12, atol=1e-15)
)
top = np.argsort(ranks_ref)[::-1][:5]
print("top nodes:", top.tolist(), "ranks:", np.round(ranks_ref[top], 6).tolist())
'''

GPU = '''\
try:
    from teaal_loops import pipeline, runtime

    has_gpu = runtime.gpu_available()
except ImportError as exc:  # the runtime is optional for this notebook
    has_gpu = False
    print(f"(teaal_loops.runtime not importable: {exc})")

if not has_gpu:
    print("@SKIP@: the cells above ran the same schedules' CPU simulation")
else:
    import inspect
    import time

    import cupy
    import cupyx.scipy.sparse as csp
    import cupyx.scipy.sparse.linalg as cla

    from teaal_loops.bench.api_costs import AUTO_SPEC
    from teaal_loops.spec import load_spec_string

    def per_iteration(run, iterations: int):
        """run()'s result and its wall-clock microseconds an iteration (synchronised)."""
        cupy.cuda.get_current_stream().synchronize()
        start = time.perf_counter()
        result = run()
        cupy.cuda.get_current_stream().synchronize()
        return result, (time.perf_counter() - start) / iterations * 1e6

    no_tolerance = {"rtol" if "rtol" in inspect.signature(cla.cg).parameters else "tol": 0.0}
    kernel = pipeline.compile(load_spec_string(AUTO_SPEC), dtype="float64")  # schedule: auto
    times = {}

    # CG, a fixed number of iterations: the kernel's operator against cupyx's own product
    A_gpu = csp.csr_matrix(poisson_2d(GPU_GRID))
    b_gpu = A_gpu @ cupy.ones(A_gpu.shape[0])
    op = kernel.linear_operator(A_gpu)
    cg_choice = kernel.last_choice.label
    iterates = {}
    for label, operator in (("kernel", op), ("cupyx", A_gpu)):
        cla.cg(operator, b_gpu, maxiter=5)  # warm-up
        (iterates[label], _), times[("CG", label)] = per_iteration(
            lambda: cla.cg(operator, b_gpu, maxiter=CG_ITERATIONS, atol=0.0, **no_tolerance),
            CG_ITERATIONS,
        )
    diff = float(cupy.linalg.norm(iterates["kernel"] - iterates["cupyx"])
                 / cupy.linalg.norm(iterates["cupyx"]))
    AGREEMENT["gpu: CG iterates kernel == cupyx"] = diff < 1e-8

    # PageRank on the same graph as the CPU cells
    M_gpu = csp.csr_matrix(M)
    mask_gpu = cupy.asarray(mask)
    pr_op = kernel.linear_operator(M_gpu)
    pr_choice = kernel.last_choice.label
    ranks = {}
    for label, matvec in (("kernel", pr_op.matvec), ("cupyx", M_gpu.__matmul__)):
        pagerank(matvec, mask_gpu, 3, cupy)  # warm-up
        ranks[label], times[("PageRank", label)] = per_iteration(
            lambda: pagerank(matvec, mask_gpu, PAGERANK_ITERATIONS, cupy), PAGERANK_ITERATIONS
        )
    ours = cupy.asnumpy(ranks["kernel"])
    AGREEMENT["gpu: PageRank kernel == CPU reference"] = bool(
        np.allclose(ours, ranks_ref, rtol=1e-9, atol=1e-15)
    )
    AGREEMENT["gpu: PageRank kernel == cupyx"] = bool(
        np.allclose(ours, cupy.asnumpy(ranks["cupyx"]), rtol=1e-9, atol=1e-15)
    )

    print(f"CG on {A_gpu.shape[0]:,} rows (kernel: {cg_choice}), iterates differ by {diff:.1e}")
    print(f"PageRank on {graph_name} (kernel: {pr_choice})\\n")
    print(f"{'problem':10s} {'kernel us/it':>13s} {'cupyx us/it':>12s} {'speed-up':>9s}")
    for problem in ("CG", "PageRank"):
        ours_us, theirs_us = times[(problem, "kernel")], times[(problem, "cupyx")]
        print(f"{problem:10s} {ours_us:13.1f} {theirs_us:12.1f} {theirs_us / ours_us:8.2f}x")
'''

VERDICT = '''\
for what, ok in AGREEMENT.items():
    print(f"{'ok  ' if ok else 'FAIL'}  {what}")
REQUIRED = @REQUIRED@
missing = [what for what in REQUIRED if what not in AGREEMENT]
assert not missing, f"comparisons that did not run: {missing}"
failed = [what for what, ok in AGREEMENT.items() if not ok]
assert not failed, f"solvers disagree: {failed}"
print("@MARKER@" + json.dumps(AGREEMENT, sort_keys=True))
'''


def _md(text: str) -> str:
    return dedent(text).strip()


def _list_literal(items: tuple[str, ...]) -> str:
    return "[\n" + "".join(f"    {json.dumps(item)},\n" for item in items) + "]"


CELLS: tuple[tuple[str, str], ...] = (
    ("md", _md("""\
        # Iterative solvers on generated kernels

        Iterative solvers, PageRank and GNN layers call SpMV in a loop. A teaal-loops kernel
        remembers the matrices it has prepared, so `kernel(A, x)` in such a loop costs about a
        launch, and `kernel.linear_operator(A)` hands the kernel to CuPy's solvers (`cg`,
        `gmres`, `minres`, `eigsh`, `lobpcg`) as a `cupyx.scipy.sparse.linalg.LinearOperator`
        (docs/api.md).

        This notebook solves a 2-D Poisson problem with conjugate gradients and runs PageRank
        on a corpus graph. Everywhere, it runs both on the CPU simulation of a generated
        schedule (the same split of the work and the same combine as the kernel) and checks
        them against SciPy. On a machine with CuPy and a CUDA GPU it runs them on the kernel
        itself, chosen by `schedule: auto`, and compares the time an iteration with cupyx's
        own product on the same problem.""")),
    ("code", SETUP),
    ("md", _md("""\
        ## 1. The problems

        The 5-point Laplacian of a square grid (symmetric positive definite: CG's home
        ground), and the PageRank iteration `r <- 0.85 M r + (0.85 * dangling mass + 0.15) / n`
        with `M` the column-stochastic transition matrix of the graph. Both live in
        `teaal_loops.bench.api_costs`, which also measures them on the GPU.""")),
    ("code", PROBLEMS),
    ("md", _md("""\
        ## 2. CG on the CPU, through the simulated kernel

        `simulate` executes a bound schedule with NumPy; wrapped in a SciPy `LinearOperator`
        it becomes the product SciPy's `cg` calls. Both solves start from zero on
        `b = A @ 1`: the solution is all ones, and the residuals must follow SciPy's own
        iteration by iteration.""")),
    ("code", CPU_CG),
    ("code", PLOT),
    ("md", _md("""\
        ## 3. PageRank on the CPU

        On `soc-Slashdot0902` from the shared corpus (82,168 nodes, 948,464 edges; a seeded
        R-MAT graph where the corpus is absent), with the merge-path schedule's simulation as
        the product (skewed rows are its case) and with SciPy's.""")),
    ("code", CPU_PAGERANK),
    ("md", _md("""\
        ## 4. On the GPU: time an iteration against cupyx

        Where CuPy and a CUDA device are present: the `schedule: auto` kernel's linear
        operator under cupyx's `cg` on the 1000 x 1000 Poisson problem (1M rows; 200
        iterations, tolerance 0, so both run the same number), against `cg` on the cupyx
        matrix (its own cuSPARSE product); then PageRank with `kernel.linear_operator(M)`
        against cupyx's `M @ r`. The iterates must agree with cupyx's and the ranks with the
        CPU's. Elsewhere this cell says it skipped.""")),
    ("code", GPU.replace("@SKIP@", GPU_SKIP_LINE)),
    ("md", "## 5. Verdict\n\nEvery comparison above must have run and agreed."),
    ("code", VERDICT.replace("@REQUIRED@", _list_literal(REQUIRED_CHECKS)).replace(
        "@MARKER@", VERDICT_MARKER)),
)


def build_notebook() -> NotebookNode:
    """The notebook (no outputs; deterministic cell ids)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = NotebookNode(
        {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        }
    )
    for i, (kind, source) in enumerate(CELLS):
        cell_id = f"solvers-{i:02d}"
        source = source.rstrip("\n")
        if kind == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(source, id=cell_id))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(source, id=cell_id))
    nbformat.validate(nb)
    return nb


def expected_text() -> str:
    return nbformat.writes(build_notebook())


def main(argv: list[str] | None = None) -> int:
    return write_or_check({NOTEBOOK: expected_text()}, argv,
                          description=__doc__.splitlines()[0],
                          command="python -m scripts.make_solver_notebook")


if __name__ == "__main__":
    sys.exit(main())
