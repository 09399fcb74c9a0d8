"""The scalar epilogue ``Z = a * T1 + b * C`` on the GPU: every in-repo epilogue spec and
TeAAL's gemv.yaml and gemm.yaml, f32 and f64, against SciPy in float64 within the epilogue's
rigorous bound (runtime/validation.py); where the product stores (no atomics, so T1 is
deterministic) Z is exactly ``fl(fl(a * T1) + fl(b * C))`` of the product kernel's own T1; the
trace build's owners are the simulation's; ``launch_into``, ``capture``, ``out=`` and the
errors; ``run --validate --rigorous`` on gemv and gemm."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops import pipeline
from teaal_loops.cli import main
from teaal_loops.errors import MatrixError
from teaal_loops.layouts import tile_view
from teaal_loops.lowering import lower, owners
from teaal_loops.matrix import synthetic
from teaal_loops.runtime import Kernel, validation
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec_string
from teaal_loops.types import DeviceInfo
from tests.conftest import corpus_dir
from tests.lowering.epilogue_specs import PARAMS, SPECS

pytestmark = pytest.mark.gpu

COMPILER = corpus_dir() / "teaal-specs" / "teaal-compiler"
CASES = [*SPECS, "gemv", "gemm"]


def _matrices() -> dict[str, sp.csr_matrix]:
    out = {
        "uniform": synthetic("uniform", rows=300, cols=257, nnz=3000, seed=1),
        "rmat": synthetic("rmat", rows=512, nnz=6000, seed=2),
        "empty_rows": sp.random(200, 150, density=0.01, format="csr", random_state=3),
    }
    west = corpus_dir() / "matrices" / "west0067.mtx.gz"
    if west.exists():
        import scipy.io

        out["west0067"] = sp.csr_matrix(scipy.io.mmread(str(west)))
    return out


MATRICES = _matrices()


def _schedule(case: str) -> Any:
    if case in SPECS:
        return lower(load_spec_string(SPECS[case], source=f"{case}.yaml"), params=PARAMS[case])
    path = COMPILER / f"{case}.yaml"
    if not path.exists():
        pytest.skip(f"{path} absent: set TEAAL_LOOPS_CORPUS to the shared corpus")
    return lower(pipeline.read_spec(path))


def _inputs(schedule: Any, A: sp.csr_matrix, dtype: str, width: int, seed: int) -> Any:
    """(op: the matrix the kernel multiplies, rounded; operand; C or None; scalars), every
    value exactly representable in ``dtype`` (the kernel's inputs are the reference's)."""
    e = schedule.form.epilogue
    op = (A.T.tocsr() if schedule.form.transposed else A).astype(dtype).astype(np.float64)
    rng = np.random.default_rng(seed)
    spmm = schedule.form.kind == "spmm"
    operand = rng.uniform(-1, 1, (op.shape[1], width) if spmm else op.shape[1])
    C = rng.uniform(-1, 1, (op.shape[0], width) if spmm else op.shape[0]) if e.addend else None
    scalars = {n: float(np.dtype(dtype).type(v)) for n, v in (("a", 1 / 3), ("b", -1.7))
               if n in e.scalars}

    def cast(v: Any) -> Any:
        return v.astype(dtype).astype(np.float64)

    return op, cast(operand), None if C is None else cast(C), scalars


def _alpha_beta(schedule: Any, scalars: dict[str, float]) -> tuple[float, float]:
    e = schedule.form.epilogue
    return (scalars[e.alpha] if e.alpha else 1.0, scalars[e.beta] if e.beta else 1.0)


def _device(cupy: Any, value: Any, dtype: str, order: Any = "C") -> Any:
    return cupy.asarray(np.asarray(value, dtype=dtype, order=order))


def _compile(schedule: Any, dtype: str, params: dict[str, int]) -> Kernel:
    kernel = pipeline.compile(schedule, dtype=dtype, params=params)
    assert isinstance(kernel, Kernel)
    return kernel


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("matrix", sorted(MATRICES))
@pytest.mark.parametrize("case", CASES)
def test_values_within_the_bound_and_owners(case: str, matrix: str, dtype: str) -> None:
    import cupy

    schedule = _schedule(case)
    kernel = _compile(schedule, dtype, PARAMS.get(case, {}))
    A = MATRICES[matrix]
    width = 7
    op, operand, C, scalars = _inputs(schedule, A, dtype, width, seed=len(case))
    addend = () if C is None else (_device(cupy, C, dtype, "F" if case == "spmm_group" else "C"),)
    Z = kernel(A, _device(cupy, operand, dtype), *addend, **scalars).get()
    alpha, beta = _alpha_beta(schedule, scalars)
    report = validation.epilogue_check(op, operand, C, alpha, beta, Z, dtype)
    assert report.gpu_overruns == 0, report.lines()
    assert report.baseline_overruns == 0, report.lines()
    if not kernel.accumulates:  # T1 is deterministic: the epilogue is exact to the bit
        plain_schedule = dataclasses.replace(
            schedule, form=dataclasses.replace(schedule.form, epilogue=None))
        plain = _compile(plain_schedule, dtype, PARAMS.get(case, {}))
        t1 = plain(A, _device(cupy, operand, dtype)).get()
        dt = np.dtype(dtype).type
        want = dt(alpha) * t1 if schedule.form.epilogue.alpha else t1
        if C is not None:
            c = C.astype(dtype)
            want = want + (dt(beta) * c if schedule.form.epilogue.beta else c)
        np.testing.assert_array_equal(Z, want)
    # owners are the product's, as the simulation gives them
    view = tile_view(str(kernel.layout), op)
    spmm = schedule.form.kind == "spmm"
    bound = bind(kernel.schedule, view.shape, DeviceInfo.h100(), kernel.params,
                 dense_size=width if spmm else 1)
    atom = owners(bound, view.tile_ptr)
    if spmm:
        got = kernel.trace_dense(A, (_device(cupy, operand, dtype),)).get()
    else:
        got = kernel.trace(A, _device(cupy, operand, dtype)).get()
    np.testing.assert_array_equal(got, atom)


@pytest.mark.parametrize("case", ["spmv_thread", "spmv_work", "spmv_scale"])
def test_launch_into_and_a_captured_graph(case: str) -> None:
    import cupy

    schedule = _schedule(case)
    kernel = _compile(schedule, "float32", PARAMS[case])
    A = MATRICES["rmat"]
    op, operand, C, scalars = _inputs(schedule, A, "float32", 1, seed=4)
    x = _device(cupy, operand, "float32")
    addend = () if C is None else (_device(cupy, C, "float32"),)
    alpha, beta = _alpha_beta(schedule, scalars)

    def check(y: Any, scale: float) -> None:
        report = validation.epilogue_check(op, scale * operand, C, alpha, beta, y.get(),
                                           "float32")
        assert report.gpu_overruns == 0, report.lines()

    check(kernel(A, x, *addend, **scalars), 1.0)
    y = cupy.full(A.shape[0], float("nan"), dtype=cupy.float32)
    kernel.launch_into(A, x, y, *addend, **scalars)
    check(y, 1.0)
    y.fill(float("nan"))
    graph = kernel.capture(A, x, y, *addend, **scalars)
    graph.launch()
    cupy.cuda.get_current_stream().synchronize()
    check(y, 1.0)
    x *= 2  # replays read x's contents: Z = a * T1 + b * C with T1 doubled
    graph.launch()
    cupy.cuda.get_current_stream().synchronize()
    check(y, 2.0)


def test_out_in_column_major_order_and_the_errors() -> None:
    import cupy

    schedule = _schedule("spmm_thread")
    kernel = _compile(schedule, "float64", PARAMS["spmm_thread"])
    A = MATRICES["uniform"]
    op, B, C, scalars = _inputs(schedule, A, "float64", 9, seed=1)
    out = cupy.full((A.shape[0], 9), float("nan"), order="F")
    Z = kernel(A, cupy.asarray(B), cupy.asarray(C), out=out, **scalars)
    assert Z is out
    report = validation.epilogue_check(op, B, C, *_alpha_beta(schedule, scalars), Z.get(),
                                       "float64")
    assert report.gpu_overruns == 0
    with pytest.raises(MatrixError, match="operand C is missing"):
        kernel(A, cupy.asarray(B), **scalars)
    with pytest.raises(MatrixError, match=r"operand C has shape \(300, 8\)"):
        kernel(A, cupy.asarray(B), cupy.zeros((300, 8)), **scalars)
    with pytest.raises(MatrixError, match="scalar b = nan"):
        kernel(A, cupy.asarray(B), cupy.asarray(C), a=1.0, b=float("nan"))
    with pytest.raises(MatrixError, match="shares memory with the output"):
        kernel(A, cupy.asarray(B), out, out=out, **scalars)


@pytest.mark.parametrize("case", ["gemv", "gemm"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_run_validates_and_applies_the_rigorous_bound(
    case: str, dtype: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = COMPILER / f"{case}.yaml"
    if not path.exists():
        pytest.skip(f"{path} absent: set TEAAL_LOOPS_CORPUS to the shared corpus")
    rc = main(["run", str(path), "--synthetic", "rmat:rows=20000,nnz=200000,seed=3",
               "--dtype", dtype, "--validate", "--rigorous", "--repeat", "3"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "Epilogue: a = " in out and "C dense" in out
    assert "Errors: 0" in out and "Verdict: NOT_A_BUG" in out


@pytest.mark.parametrize("case", ["gemv", "spmv_merge"])
def test_check_against_the_gpu_agrees(case: str, tmp_path: Any,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The reference's Z and owners against the kernel's (SpMV: check runs the GPU side)."""
    if case in SPECS:
        path = tmp_path / f"{case}.yaml"
        path.write_text(SPECS[case])
        params = [a for p, v in PARAMS[case].items() for a in ("--param", f"{p}={v}")]
    else:
        path = COMPILER / f"{case}.yaml"
        if not path.exists():
            pytest.skip(f"{path} absent: set TEAAL_LOOPS_CORPUS to the shared corpus")
        params = []
    rc = main(["check", str(path), "--synthetic", "emptyrows:rows=60,cols=40,nnz=300,seed=2",
               "--against", "gpu", "--reference", "builtin", *params])
    captured = capsys.readouterr()
    out = captured.out
    assert rc == 0, out + captured.err
    assert "values (GPU float32 vs reference): agree" in out and "result: AGREE" in out
