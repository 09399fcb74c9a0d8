"""The Python API on the GPU: remembered matrices (and what in-place edits do), the current
stream, CUDA graphs, linear operators under cupyx's solvers, auto's per-matrix choice, and a
quick run of the API-cost measurement."""

from __future__ import annotations

import gc
import inspect
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import teaal_loops.pipeline as pipeline
from teaal_loops import auto
from teaal_loops.bench import api_costs
from teaal_loops.spec import load_spec_string
from tests.conftest import REPO

pytestmark = pytest.mark.gpu

SCHEDULES = ["thread_mapped", "group_mapped", "work_oriented", "merge_path"]
ACCUMULATING = ["work_oriented", "merge_path"]


def _kernel(name: str, dtype: str = "float32") -> Any:
    return pipeline.compile(REPO / "specs" / f"{name}.yaml", dtype=dtype)


def _host(rows: int = 3000, cols: int = 2500, dtype: Any = np.float32) -> sp.csr_matrix:
    return sp.random(rows, cols, density=0.004, format="csr", random_state=7, dtype=dtype)


def _device(A: sp.csr_matrix) -> Any:
    import cupyx.scipy.sparse as csp

    return csp.csr_matrix(A)


def _x(n: int, dtype: Any = np.float32, seed: int = 0) -> Any:
    import cupy

    return cupy.asarray(np.random.default_rng(seed).uniform(-1, 1, n).astype(dtype))


def _close(got: Any, want: Any, dtype: Any = np.float32) -> None:
    tol = 1e-5 if np.dtype(dtype) == np.float32 else 1e-12
    np.testing.assert_allclose(got.get(), want.get(), rtol=tol, atol=tol)



@pytest.mark.parametrize("name", SCHEDULES)
def test_a_cupyx_matrix_is_remembered_and_aliased(name: str, conversions: list[Any]) -> None:
    kernel = _kernel(name)
    A = _device(_host())
    x = _x(A.shape[1])
    for _ in range(3):
        _close(kernel(A, x), A @ x)
    assert len(conversions) == 1
    prepared = kernel.prepared_for(A)
    assert prepared.aliases_input  # float32 values, int32 indices and offsets: no copy
    A.data *= 2  # in place: the kernel reads the very same array
    _close(kernel(A, x), A @ x)
    A.data = A.data * 0.5  # a new array: prepared again
    _close(kernel(A, x), A @ x)
    assert len(conversions) == 2


def test_a_converted_matrix_needs_forget_after_an_in_place_edit(conversions: list[Any]) -> None:
    kernel = _kernel("merge_path", "float64")
    A = _device(_host())  # float32 values: the float64 kernel works on a converted copy
    x = _x(A.shape[1], np.float64)
    before = kernel(A, x)
    assert not kernel.prepared_for(A).aliases_input
    A.data *= 3
    _close(kernel(A, x), before, np.float64)  # not detected, as documented
    assert kernel.forget(A)
    _close(kernel(A, x), A.astype(np.float64) @ x, np.float64)
    assert len(conversions) == 2


def test_a_cupy_arrays_pointer_and_dtype_are_fixed_and_a_reshape_is_seen() -> None:
    """The matrix cache reads only the shape and strides of a CuPy array (runtime.matrix_cache):
    CuPy must refuse to change an array's pointer or dtype in place."""
    import cupy

    kernel = _kernel("thread_mapped")
    A = _device(_host())
    x = _x(A.shape[1])
    kernel(A, x)
    assert kernel._cache.lookup(A) is not None
    with pytest.raises(AttributeError):
        A.data.data = cupy.zeros(1, cupy.float32).data
    with pytest.raises(AttributeError):
        A.data.dtype = cupy.dtype(cupy.int32)
    A.data.shape = (1, A.nnz)  # in place, the same object: the fingerprint must differ
    assert kernel._cache.lookup(A) is None
    A.data.shape = (A.nnz,)
    _close(kernel(A, x), A @ x)


def test_the_prepared_matrix_is_freed_with_its_matrix() -> None:
    kernel = _kernel("thread_mapped")
    A = _device(_host())
    prepared = weakref.ref(kernel.prepared_for(A))
    del A
    gc.collect()
    assert prepared() is None


def test_host_matrices_are_uploaded_once(conversions: list[Any]) -> None:
    kernel = _kernel("group_mapped")
    A = _host()
    x = _x(A.shape[1])
    for _ in range(3):
        np.testing.assert_allclose(kernel(A, x).get(), A @ x.get(), rtol=1e-5, atol=1e-5)
    assert conversions == [A]


@pytest.mark.parametrize("name", SCHEDULES)
def test_calls_and_launches_stay_on_the_current_stream(name: str) -> None:
    """Captured on a non-blocking stream: any work sent to another stream (the legacy default
    stream included) or any synchronisation would make the capture fail."""
    import cupy

    kernel = _kernel(name)
    A = _device(_host())
    prepared = kernel.warm_up(A)
    x = _x(A.shape[1])
    y = cupy.full(A.shape[0], cupy.nan, dtype=cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        kernel(prepared, x, out=y)
        kernel.launch_into(A, x, y)
        graph = stream.end_capture()
        graph.launch()
        fresh = kernel(A, x)  # allocations too, on the stream
    stream.synchronize()
    _close(y, A @ x)
    _close(fresh, A @ x)


@pytest.mark.parametrize("name", SCHEDULES)
def test_a_graph_replays_with_new_inputs(name: str) -> None:
    import cupy

    kernel = _kernel(name)
    A = _device(_host())
    x = cupy.zeros(A.shape[1], dtype=cupy.float32)
    y = cupy.full(A.shape[0], cupy.nan, dtype=cupy.float32)
    graph = kernel.capture(A, x, y)
    other = cupy.cuda.Stream(non_blocking=True)
    for seed in range(4):  # accumulating schedules: the zeroing is inside the graph
        x[...] = _x(A.shape[1], seed=seed)
        cupy.cuda.get_current_stream().synchronize()  # `other` does not wait for this stream
        graph.launch(other if seed % 2 else None)
        (other if seed % 2 else cupy.cuda.get_current_stream()).synchronize()
        _close(y, A @ x)
    expected = A @ x
    kernel.forget(A)
    del A
    gc.collect()  # the graph keeps the prepared matrix (and the arrays it aliases) alive
    y.fill(cupy.nan)
    graph.launch()
    cupy.cuda.get_current_stream().synchronize()
    _close(y, expected)


def _tolerance(solver: Any, value: float) -> dict[str, float]:
    name = "rtol" if "rtol" in inspect.signature(solver).parameters else "tol"
    return {name: value}


@pytest.mark.parametrize("name", ["thread_mapped", "merge_path"])
def test_cupyx_solvers_run_on_the_linear_operator(name: str) -> None:
    import cupy
    import cupyx.scipy.sparse.linalg as cla

    A64 = api_costs.poisson_2d(30)  # 900 rows, SPD
    A = _device(A64)
    op = _kernel(name, "float64").linear_operator(A)
    assert isinstance(op, cla.LinearOperator)
    assert op.shape == (900, 900) and op.dtype == np.float64
    b = A @ cupy.linspace(-1, 1, 900)
    exact = spla.spsolve(A64.tocsc(), b.get())
    for solver, extra in ((cla.cg, {}), (cla.minres, {}), (cla.gmres, {"restart": 100})):
        x, info = solver(op, b, maxiter=3000, **_tolerance(solver, 1e-10), **extra)
        assert info == 0, solver.__name__
        np.testing.assert_allclose(x.get(), exact, rtol=1e-6, atol=1e-8, err_msg=solver.__name__)
    top = np.sort(np.linalg.eigvalsh(A64.toarray()))[-3:]
    w = cla.eigsh(op, k=3, which="LA", return_eigenvectors=False)
    np.testing.assert_allclose(np.sort(w.get()), top, rtol=1e-8)
    X0 = cupy.asarray(np.random.default_rng(1).uniform(-1, 1, (900, 3)))
    w2, _ = cla.lobpcg(op, X0, largest=True, tol=1e-7, maxiter=1000)
    np.testing.assert_allclose(np.sort(w2.get()), top, rtol=1e-6)
    X = cupy.asarray(np.random.default_rng(2).uniform(-1, 1, (900, 4)))
    _close(op.matmat(X), A @ X, np.float64)
    mixed = _kernel(name, "float32").linear_operator(A, dtype="float64")
    y = mixed.matvec(X[:, 0])
    assert y.dtype == np.float64
    np.testing.assert_allclose(y.get(), (A @ X[:, 0]).get(), rtol=1e-5, atol=1e-5)


def test_auto_chooses_once_per_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    import cupy

    calls: list[Any] = []
    real = auto.matrix_stats
    monkeypatch.setattr(auto, "matrix_stats", lambda A: calls.append(A) or real(A))
    spec = load_spec_string(api_costs.AUTO_SPEC)
    kernel: Any = pipeline.compile(spec, dtype="float32")
    A = _device(_host())
    x = _x(A.shape[1])
    for _ in range(3):
        _close(kernel(A, x), A @ x)
    assert calls == [A]
    chosen = kernel.kernel_for(A)
    assert chosen.kind == kernel.last_choice.schedule
    _close(kernel(chosen.prepared_for(A), x), A @ x)
    y = cupy.empty(A.shape[0], dtype=cupy.float32)
    graph = kernel.capture(A, x, y)
    graph.launch()
    cupy.cuda.get_current_stream().synchronize()
    _close(y, A @ x)
    assert calls == [A]


def test_api_costs_quick_run(tmp_path: Path) -> None:
    report = api_costs.measure(tmp_path / "api_costs.json", quick=True)
    assert report["correct"], report
    assert (tmp_path / "api_costs.json").is_file()
    for row in report["host"]["kernels"].values():
        assert row["aliases_input"]
        # a remembered matrix costs a few microseconds more than a prepared one, not a prepare
        assert row["call_cupyx_matrix"]["wall_us"] < 5 * row["call_prepared"]["wall_us"]
