"""notebooks/solvers.ipynb: generated deterministically by scripts/make_solver_notebook.py,
committed without outputs, executes on the CPU with every comparison agreeing and its GPU cell
either comparing or saying that it skipped; a disagreement fails it."""

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
NOTEBOOK = REPO / "notebooks" / "solvers.ipynb"
CELL_TIMEOUT_S = 300


def _generator() -> ModuleType:
    return importlib.import_module("scripts.make_solver_notebook")


GENERATOR = _generator()


def _execute(nb: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run ``nb`` in a fresh kernel from notebooks/ (as a user would), matplotlib on Agg."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    return client.execute()


def _stdout(nb: Any) -> str:
    return "".join(
        o.text for c in nb.cells if c.cell_type == "code" for o in c.outputs
        if o.output_type == "stream" and o.name == "stdout"
    )


def _verdicts(nb: Any) -> dict[str, bool]:
    marker = GENERATOR.VERDICT_MARKER
    lines = [ln for ln in _stdout(nb).splitlines() if ln.startswith(marker)]
    assert len(lines) == 1, "the verdict cell did not print its JSON line"
    verdicts: dict[str, bool] = json.loads(lines[0][len(marker):])
    return verdicts


def test_the_generator_is_deterministic_and_the_notebook_committed() -> None:
    text = GENERATOR.expected_text()
    assert text == GENERATOR.expected_text()
    assert NOTEBOOK.read_text() == text, "stale: run python -m scripts.make_solver_notebook"
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert [c.id for c in nb.cells] == [f"solvers-{i:02d}" for i in range(len(nb.cells))]
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    assert GENERATOR.main(["--check"]) == 0


def test_the_notebook_executes_and_every_comparison_agrees(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nb = _execute(nbformat.read(NOTEBOOK, as_version=4), monkeypatch)
    verdicts = _verdicts(nb)
    for check in GENERATOR.REQUIRED_CHECKS:
        assert verdicts.get(check) is True, check
    assert all(v is True for v in verdicts.values()), verdicts
    ran_on_gpu = any(k.startswith("gpu:") for k in verdicts)
    assert ran_on_gpu != (GENERATOR.GPU_SKIP_LINE in _stdout(nb))
    if ran_on_gpu:
        assert set(GENERATOR.GPU_CHECKS) <= set(verdicts)
    pngs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if o.output_type == "display_data" and "image/png" in o.data]
    assert pngs, "the convergence plot was not drawn"


# Stands in for CuPy, cupyx and the kernel on a machine without a GPU: NumPy, SciPy, and the
# merge-path schedule's CPU simulation (the notebook's own simulated_operator) as the kernel.
FAKE_GPU = """\
import sys as _sys
import types as _types

import numpy as _np
import scipy.sparse as _sp
import scipy.sparse.linalg as _spla

import teaal_loops.pipeline as _pipeline
import teaal_loops.runtime as _runtime

_cupy = _types.ModuleType("cupy")
_cupy.__getattr__ = lambda name: getattr(_np, name)
_cupy.asnumpy = _np.asarray
_stream = _types.SimpleNamespace(synchronize=lambda: None)
_cupy.cuda = _types.SimpleNamespace(get_current_stream=lambda: _stream)
_sys.modules.update({
    "cupy": _cupy, "cupyx": _types.ModuleType("cupyx"),
    "cupyx.scipy": _types.ModuleType("cupyx.scipy"),
    "cupyx.scipy.sparse": _sp, "cupyx.scipy.sparse.linalg": _spla,
})


class _SimulatedKernel:
    last_choice = _types.SimpleNamespace(label="merge_path (CPU simulation)")

    def linear_operator(self, A):
        return simulated_operator("merge_path", A)


_runtime.gpu_available = lambda: True
_pipeline.compile = lambda spec, **options: _SimulatedKernel()
GPU_GRID = 48
"""


def test_the_gpu_cell_compares_and_reaches_the_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "gpu_available()" in c.source)
    nb.cells.insert(at, nbformat.v4.new_code_cell(FAKE_GPU, id="fake-gpu"))
    nb = _execute(nb, monkeypatch)
    out = _stdout(nb)
    assert GENERATOR.GPU_SKIP_LINE not in out
    verdicts = _verdicts(nb)
    for check in GENERATOR.GPU_CHECKS:
        assert verdicts.get(check) is True, check
    assert "speed-up" in out and "CG on 2,304 rows" in out


def test_a_disagreement_fails_the_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scale the simulated product by 1.001: CG then converges to 1/1.001, not to the exact
    solution, and the verdict cell must fail the run."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "def simulated_operator" in c.source)
    sabotage = (
        "import types as _types\n"
        "import teaal_loops.lowering as _lowering\n"
        "_real = _lowering.simulate\n"
        "_lowering.simulate = lambda *a: _types.SimpleNamespace(y=_real(*a).y * 1.001)\n"
    )
    nb.cells.insert(at, nbformat.v4.new_code_cell(sabotage, id="sabotage"))
    with pytest.raises(nbclient.exceptions.CellExecutionError, match="solvers disagree"):
        _execute(nb, monkeypatch)
