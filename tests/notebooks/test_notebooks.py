"""The notebooks in notebooks/: generated from scripts/make_notebooks.py, stored without outputs,
and each executes on the CPU (nbclient + ipykernel, matplotlib on Agg) with every comparison of
the HiFiber reference, the CPU simulation and NumPy agreeing.

A notebook's last cell asserts its comparisons and prints them as one JSON line; the tests parse
that line, so a notebook whose comparison cells silently stopped comparing fails here too.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat", reason="needs the [test] extra (nbformat)")
nbclient = pytest.importorskip("nbclient", reason="needs the [test] extra (nbclient)")
pytest.importorskip("ipykernel", reason="needs the [test] extra (ipykernel)")
pytest.importorskip("matplotlib", reason="needs the [test] extra (matplotlib)")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = REPO / "notebooks"
SCHEDULES = ("thread_mapped", "group_mapped", "work_oriented", "merge_path")
# notebooks/ also holds notebooks from the other generators, tested beside this file:
# scripts/make_solver_notebook.py and scripts/make_dense_notebooks.py
OTHER_NOTEBOOKS = ("solvers", "spmm", "sddmm")
CELL_TIMEOUT_S = 120
GPU_SKIP_LINE = "skipped: no CUDA GPU / CuPy"


def _generator() -> ModuleType:
    return importlib.import_module("scripts.make_notebooks")


GENERATOR = _generator()


def _execute(nb: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run ``nb`` in a fresh kernel from notebooks/ (as a user would), matplotlib on Agg."""
    monkeypatch.setenv("MPLBACKEND", "Agg")  # the kernel inherits the environment
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    return client.execute()


def _outputs(nb: Any, kind: str) -> list[Any]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == kind]


def _stdout(nb: Any) -> str:
    return "".join(o.text for o in _outputs(nb, "stream") if o.name == "stdout")


def test_one_notebook_per_schedule() -> None:
    assert sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb")) == sorted(
        SCHEDULES + OTHER_NOTEBOOKS
    )
    for name in SCHEDULES:
        assert (REPO / "specs" / f"{name}.yaml").is_file()


@pytest.mark.parametrize("name", SCHEDULES)
def test_committed_notebook_is_generated_and_has_no_outputs(name: str) -> None:
    path = NOTEBOOK_DIR / f"{name}.ipynb"
    expected = GENERATOR.expected_files()[path]
    assert path.read_text() == expected, "stale: run python -m scripts.make_notebooks"
    nb = nbformat.reads(expected, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.parametrize("name", SCHEDULES)
def test_notebook_executes_and_all_views_agree(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    nb = _execute(nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4), monkeypatch)
    assert not _outputs(nb, "error")
    lines = [ln for ln in _stdout(nb).splitlines() if ln.startswith(GENERATOR.VERDICT_MARKER)]
    assert len(lines) == 1, "the verdict cell did not print its JSON line"
    verdicts = json.loads(lines[0][len(GENERATOR.VERDICT_MARKER):])
    for check in GENERATOR.REQUIRED_CHECKS:
        assert verdicts.get(check) is True, check
    assert all(v is True for v in verdicts.values()), verdicts
    # the GPU cell either ran its comparisons or said plainly that it skipped
    ran_on_gpu = any(k.startswith("gpu:") for k in verdicts)
    assert ran_on_gpu != (GPU_SKIP_LINE in _stdout(nb))
    # the ownership picture was drawn (a PNG), for the small matrix at least
    pngs = [o for o in _outputs(nb, "display_data") if "image/png" in o.data]
    assert pngs


def test_a_disagreement_fails_the_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage the stamp -> thread mapping of the owner comparison the reference cell uses:
    every nonzero is then 'owned' by thread 0 on the reference side, and the verdict cell must
    fail the run."""
    nb = nbformat.read(NOTEBOOK_DIR / "work_oriented.ipynb", as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "run_reference(" in c.source)
    nb.cells.insert(
        at,
        nbformat.v4.new_code_cell(
            "import teaal_loops.reference.ownership as _own\n"
            "_own.thread_of_space_stamp = lambda bound, space: 0\n",
            id="sabotage",
        ),
    )
    with pytest.raises(nbclient.exceptions.CellExecutionError, match="views disagree"):
        _execute(nb, monkeypatch)


# Stands in for teaal_loops.runtime on a machine without a GPU: a "kernel" that returns the CPU
# simulation's values and owners as host arrays behind CuPy's .get().
FAKE_RUNTIME = """\
import teaal_loops.pipeline as _pipeline
import teaal_loops.runtime as _runtime
from teaal_loops.lowering import lower as _lower, simulate as _simulate
from teaal_loops.schedules import bind as _bind
from teaal_loops.matrix import matrix_shape as _shape
from teaal_loops.spec import load_spec as _load


class _Host:
    def __init__(self, array):
        self.array = array

    def get(self):
        return self.array


class _FakeKernel:
    def __init__(self, spec_path, params):
        self.schedule = _lower(_load(spec_path), params=params)

    def _sim(self, A, x):
        return _simulate(_bind(self.schedule, _shape(A)), A, x)

    def __call__(self, A, x):
        return _Host(self._sim(A, x).y)

    def trace(self, A, x):
        return _Host(self._sim(A, x).owner.astype("int32"))


_runtime.gpu_available = lambda: True
_pipeline.compile = lambda spec, *, dtype, params: _FakeKernel(spec, params)
"""


def test_gpu_cell_compares_values_and_traced_owners(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU cell's comparisons run (here against a CPU stand-in for the runtime) and reach
    the verdict, so on a GPU machine the notebook checks the kernel, not just the reference."""
    nb = nbformat.read(NOTEBOOK_DIR / "merge_path.ipynb", as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "gpu_available()" in c.source)
    nb.cells.insert(at, nbformat.v4.new_code_cell(FAKE_RUNTIME, id="fake-runtime"))
    nb = _execute(nb, monkeypatch)
    out = _stdout(nb)
    assert GPU_SKIP_LINE not in out
    assert "ok    gpu: values kernel == NumPy" in out
    assert "ok    gpu: owners trace == simulation" in out
