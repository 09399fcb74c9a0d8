"""The cells of notebooks/spmm.ipynb and notebooks/sddmm.ipynb (see make_dense_notebooks.py).

Both notebooks run the same stages on a dict of specs keyed by a short label, the library spec
first (corpus specs join it when the shared corpus is present): parse, lower, bind and simulate,
run the HiFiber reference, render the CUDA, compare, draw, run on the GPU. The cells that do not
depend on the form are shared; the rest come from each form's module below.
"""

from __future__ import annotations

from dataclasses import dataclass
from textwrap import dedent

from scripts import dense_notebook_sddmm as sddmm
from scripts import dense_notebook_spmm as spmm


@dataclass(frozen=True)
class Notebook:
    name: str  # notebooks/<name>.ipynb
    library: str  # the label of the library spec (required to agree everywhere)
    corpus_spec: str  # the corpus spec it is contrasted with, relative to the corpus
    corpus_labels: tuple[str, ...]  # the labels of the specs made from it
    checks: tuple[str, ...]  # comparisons every run makes for each spec
    gpu_checks: tuple[str, ...]  # comparisons the GPU cell makes for each spec
    cells: tuple[tuple[str, str], ...]  # ("md" | "code", source), the verdict cell excluded


def md(text: str) -> str:
    return dedent(text).strip()


SETUP = '''\
# Setup: find the checkout (this notebook runs from notebooks/ or from the repository root)
# for its specs, and the shared corpus beside it (or $TEAAL_LOOPS_CORPUS); teaal_loops is the
# installed package (pip install ".[test]").
import json
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import teaal_loops
from teaal_loops.lowering import explain_text, lower, simulate
from teaal_loops.lowering.simulate import operand_shape
from teaal_loops.reference import run_reference
from teaal_loops.reference.ownership import compare_owners
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec, load_spec_string


def find_repo(start: Path) -> Path:
    for folder in (start, *start.parents):
        if (folder / "specs" / "@FORM@").is_dir():
            return folder
    raise FileNotFoundError("run this notebook inside the teaal-loops checkout")


REPO = find_repo(Path.cwd().resolve())
CORPUS = Path(os.environ.get("TEAAL_LOOPS_CORPUS", REPO.parent / "shared" / "corpus"))
# the size of the dense rank (@DENSE@), small
D = 4
SEED = 7
AGREEMENT: dict[str, bool] = {}  # every comparison records its verdict; the last cell asserts
specs = {}  # label -> parsed spec, the library spec first
PARAMS: dict[str, dict[str, int]] = {}  # label -> its small parameters


def add_spec(label: str, path: Path, params: dict[str, int], text: str | None = None) -> None:
    """Parse the spec file at ``path`` (or ``text``, a spec made from it, named ``label``)
    and print it."""
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else f"corpus: {path.name}"
    if text is None:
        specs[label], text = load_spec(path), path.read_text()
    else:
        specs[label] = load_spec_string(text, source=f"{label}.yaml")
        shown = f"{shown}, with what this notebook adds"
    PARAMS[label] = params
    print(f"# ==== {label} ({shown}) ====")
    print(text.rstrip() + "\\n")


def stamp_text(stamp) -> str:
    """A reference stamp on one line: the multiply's indices, then its space and time ranks,
    each as RANK(position, coordinate)."""
    def ranks(part) -> str:
        return " ".join(f"{r.rank}({r.pos}, {r.coord})" for r in part) or "-"
    indices = ", ".join(f"{i}={v}" for i, v in stamp.indices.items())
    return f"{stamp.einsum}[{indices}]  space: {ranks(stamp.space)}  time: {ranks(stamp.time)}"
'''

IR = '''\
schedules = {label: lower(spec, params=PARAMS[label]) for label, spec in specs.items()}
for label, schedule in schedules.items():
    print(f"# ==== {label} ====")
    print(explain_text(schedule) + "\\n")
'''

# 12 x 16 with an empty row and a long one, as in the SpMV notebooks; NAME is the sparse one
MATRIX = '''\
rng = np.random.default_rng(SEED)
ROWS, COLS = 12, 16
row_lengths = rng.integers(1, 5, size=ROWS)
row_lengths[3] = 0  # an empty row
row_lengths[7] = 14  # a long row
columns = [np.sort(rng.choice(COLS, size=n, replace=False)) for n in row_lengths]
indptr = np.concatenate([[0], np.cumsum(row_lengths)])
values = rng.uniform(-1.0, 1.0, size=int(indptr[-1]))
@NAME@ = sp.csr_matrix((values, np.concatenate(columns), indptr), shape=(ROWS, COLS))
'''

BIND = '''\
def bound_for(label: str, matrix):
    """Every size of the label's schedule for this matrix, the dense rank of size D."""
    schedule = schedules[label]
    return bind(schedule, operand_shape(schedule, matrix), params=PARAMS[label], dense_size=D)


bounds = {label: bound_for(label, @NAME@) for label in specs}
sims = {label: simulate(bounds[label], @NAME@, *OPERANDS) for label in specs}
for label, bound in bounds.items():
    print(f"# ==== {label} ====")
    print(explain_text(schedules[label], bound, sims[label]))
    print(f"=> {schedules[label].form.dense.name} = {bound.dense_size}: "
          f"DS = {bound.dense_space} thread(s) per worker x DT = {bound.dense_time} step(s) "
          f"each; {bound.workers} worker(s), {bound.threads} threads\\n")
'''

HIFIBER = '''\
def reference(label: str):
    """Run the label's HiFiber program on the small operands, its parameters bound."""
    spec, bound = specs[label], bounds[label]
    params = {p: v for p, v in bound.params.items() if p in spec.parameters}
    return run_reference(spec, TENSORS, params=params)


refs = {label: reference(label) for label in specs}
for label, ref in refs.items():
    print(f"# ==== {label}: the program run_reference executed (on {ref.engine}) ====")
    print(ref.source)
    print(f"# its result ({len(ref.stamps)} multiplies stamped): ", end="")
    print(result_text(ref.outputs["Z"]) + "\\n")
'''

CUDA = '''\
import difflib

# float64, so that the GPU cell compares to 1e-12 (teaal-loops generate --dtype f32 for float)
kernels = {
    label: teaal_loops.compile(spec, dtype="float64", params=PARAMS[label])
    for label, spec in specs.items()
}
labels = list(kernels)
print(kernels[labels[0]].source)
for before, label in zip(labels, labels[1:], strict=False):
    print(f"// ==== {label}: what differs from {before} (unified diff) ====")
    diff = difflib.unified_diff(
        kernels[before].source.splitlines(), kernels[label].source.splitlines(),
        before, label, n=1, lineterm="",
    )
    print("\\n".join(diff) + "\\n")
'''

SHOW = '''\
import io

import matplotlib.pyplot as plt
from IPython.display import Image, display
from matplotlib.patches import Rectangle

CMAP = plt.get_cmap("tab20")


def show(fig) -> None:
    """Display a figure as PNG whatever the matplotlib backend (inline, or Agg under CI)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    plt.close(fig)
    display(Image(buffer.getvalue()))


def cell(ax, x: float, y: float, thread: int, text: str) -> None:
    """A unit square at (x, y) in the thread's colour (grey when several own it), labelled."""
    colour = CMAP(thread % 20) if thread >= 0 else (0.85, 0.85, 0.85, 1.0)
    ax.add_patch(Rectangle((x - 0.45, y - 0.45), 0.9, 0.9, color=colour))
    ax.text(x, y, text, ha="center", va="center", fontsize=7)


def bars(ax, owner: np.ndarray, threads: int, unit: str) -> None:
    """Work per thread: how many (atom, dense index) pairs each owns."""
    counts = np.bincount(owner.ravel(), minlength=threads)
    ax.bar(range(threads), counts, color=[CMAP(t % 20) for t in range(threads)])
    ax.axhline(counts.mean(), color="k", linestyle="--", label=f"mean {counts.mean():.1f}")
    ax.set_xticks(range(0, threads, max(1, threads // 12)))
    ax.set_xlabel("thread (global id)")
    ax.set_ylabel(unit)
    ax.set_title(f"max {counts.max()}, {int((counts == 0).sum())} idle of {threads}")
    ax.set_ylim(0, counts.max() * 1.3 + 0.5)
    ax.legend(loc="upper right")
'''

GPU_HEAD = '''\
from teaal_loops import runtime

if not runtime.gpu_available():
    print("@GPU_SKIP@: the reference and the simulation above are the checks here")
else:
    for label, kernel in kernels.items():
'''

GPU_TAIL = '''\
        traced = compare_owners(
            specs[label], bounds[label], @NAME@, refs[label].stamps, owner_gpu
        )
        AGREEMENT[f"gpu: {label}: values kernel == NumPy"] = bool(
            np.allclose(values_gpu, expected, rtol=1e-12, atol=1e-12)
        )
        AGREEMENT[f"gpu: {label}: owners trace == simulation"] = bool(
            np.array_equal(owner_gpu, sims[label].owner)
        )
        AGREEMENT[f"gpu: {label}: owners trace == reference"] = traced.ok
        differing = int((owner_gpu != sims[label].owner).sum())
        print(f"{kernel}: max |kernel - NumPy| = {np.abs(values_gpu - expected).max():.3g}; "
              f"owners differing from the simulation: {differing}")
        print(f"  owners (trace vs reference): {traced.text}")
'''

GPU_MD = md("""\
    ## 8. On the GPU

    Where CuPy and a CUDA device are present, every kernel above runs on the small operands:
    its values must match NumPy, and its trace build's owner of every (nonzero, dense index)
    (`kernel.trace_dense`) must match the simulation's and the reference's exactly. Elsewhere
    this cell says it skipped.""")


def shared(form: str, dense: str, sparse: str) -> dict[str, str]:
    """The shared code cells with this form's names filled in."""
    cells = {"SETUP": SETUP, "IR": IR, "MATRIX": MATRIX, "BIND": BIND, "HIFIBER": HIFIBER,
             "CUDA": CUDA, "SHOW": SHOW, "GPU_HEAD": GPU_HEAD, "GPU_TAIL": GPU_TAIL}
    return {
        key: text.replace("@FORM@", form).replace("@DENSE@", dense).replace("@NAME@", sparse)
        for key, text in cells.items()
    }


def _notebook(module, form: str, dense: str, sparse: str) -> Notebook:
    return Notebook(
        name=form,
        library=module.LIBRARY,
        corpus_spec=module.CORPUS_SPEC,
        corpus_labels=module.CORPUS_LABELS,
        checks=module.CHECKS,
        gpu_checks=module.GPU_CHECKS,
        cells=module.cells(shared(form, dense, sparse), md, GPU_MD),
    )


NOTEBOOKS = (
    _notebook(spmm, "spmm", "SpMM's N: the columns of B and Z", "A"),
    _notebook(sddmm, "sddmm", "SDDMM's K: summed for every nonzero", "C"),
)
