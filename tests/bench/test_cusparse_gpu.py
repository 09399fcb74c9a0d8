"""The cuSPARSE baselines on a real GPU: every algorithm's result against cupyx (SpMV, SpMM)
and NumPy (SDDMM) within the rounding bound, re-pointed operands, the choice, graphs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from teaal_loops.bench.cusparse import (
    SpMM,
    SpMV,
    TorchSDDMM,
    checks,
    measure_baselines,
    nvmath_available,
    torch_available,
)
from teaal_loops.bench.cusparse.choice import GraphError
from teaal_loops.bench.cusparse.sddmm import SDDMM
from teaal_loops.matrix import synthetic

pytestmark = pytest.mark.gpu
SIZES = {"small": (300, 200, 3000), "medium": (20000, 15000, 200000)}
DTYPES = ("float32", "float64")


@pytest.fixture(scope="module")
def cp() -> Any:
    pytest.importorskip("cupy", reason="CuPy is not installed")
    from teaal_loops.runtime import gpu_available

    if not gpu_available():
        pytest.skip("no CUDA device")
    import cupy

    return cupy


@pytest.fixture(scope="module")
def timer(cp: Any) -> Any:
    from teaal_loops.bench.timing import Timer

    return Timer(cp)


def _host(size: str, dtype: str, seed: int = 3) -> Any:
    rows, cols, nnz = SIZES[size]
    return synthetic("uniform", rows=rows, cols=cols, nnz=nnz, seed=seed).astype(dtype)


def _device(cp: Any, size: str, dtype: str) -> Any:
    import cupyx.scipy.sparse as csp

    return csp.csr_matrix(_host(size, dtype))


def _assert_close(cp: Any, got: Any, ref: Any, bound: Any, what: str) -> None:
    result = checks.compare(cp, got, ref, bound)
    assert result["valid"], (what, result)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_spmv_every_algorithm_equals_cupyx(cp: Any, size: str, dtype: str) -> None:
    A = _device(cp, size, dtype)
    x = checks.random_dense(cp, (A.shape[1],), dtype, 1)
    base = SpMV(A, x=x)
    labels = [a.label for a in base.algorithms]
    assert {"DEFAULT", "CSR_ALG1", "CSR_ALG2"} <= set(labels), base.skipped
    if nvmath_available():
        assert "CSR_ALG1+preprocess" in labels, base.skipped
    ref, bound = A @ x, checks.spmv_bound(cp, A, x)
    y = cp.empty(A.shape[0], dtype=dtype)
    for algorithm in base.algorithms:
        y.fill(math.nan)
        base.launch(x, y, algorithm=algorithm)
        _assert_close(cp, y, ref, bound, algorithm.label)
    x2 = checks.random_dense(cp, (A.shape[1],), dtype, 2)  # other arrays: descriptors re-pointed
    y2 = cp.empty_like(y)
    for algorithm in base.algorithms:
        y2.fill(math.nan)
        base.launch(x2, y2, algorithm=algorithm)
        _assert_close(cp, y2, A @ x2, checks.spmv_bound(cp, A, x2), algorithm.label + " x2")


@pytest.mark.parametrize("dtype", DTYPES)
def test_spmv_choose_keeps_the_fastest_and_its_graph_replays_it(
    cp: Any, timer: Any, dtype: str
) -> None:
    A = _device(cp, "medium", dtype)
    x = checks.random_dense(cp, (A.shape[1],), dtype, 1)
    y = cp.empty(A.shape[0], dtype=dtype)
    base = SpMV(A, x=x, y=y)
    choice = base.choose(timer, reps=5, warmup=1)
    timed = [t for t in choice.times if not t.error]
    assert len(timed) == len(base.algorithms)
    assert choice.by in ("queued", "per_call") and base.algorithm is not None
    assert base.algorithm.label == choice.winner
    key = "queued_ms" if choice.by == "queued" else "per_call_ms"
    candidates = [t for t in timed if t.queued] if choice.by == "queued" else timed
    assert getattr(choice.time_of(choice.winner), key) == min(getattr(t, key)
                                                              for t in candidates)
    assert base.describe().startswith(f"cuSPARSE SpMV {choice.winner} (")
    try:
        graph = base.capture()
    except GraphError as exc:
        assert str(exc).startswith("not capturable: ")
        return
    assert base.captured is not None
    if nvmath_available():  # CuPy's binding refuses capture: the same algorithm via nvmath
        assert base.captured.binding == "nvmath"
        assert base.captured.code == base.algorithm.code
    y.fill(math.nan)
    graph.launch()
    _assert_close(cp, y, A @ x, checks.spmv_bound(cp, A, x), "graph")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", (1, 8, 32, 128))
def test_spmm_every_algorithm_equals_cupyx(cp: Any, size: str, dtype: str, n: int) -> None:
    A = _device(cp, size, dtype)
    B = checks.random_dense(cp, (A.shape[1], n), dtype, 1)
    base = SpMM(A, n, B=B)
    assert {"DEFAULT", "CSR_ALG1"} <= {a.label for a in base.algorithms}, base.skipped
    ref, bound = A @ B, checks.spmm_bound(cp, A, B)
    C = cp.empty((A.shape[0], n), dtype=dtype)
    for algorithm in base.algorithms:
        C.fill(math.nan)
        base.launch(B, C, algorithm=algorithm)
        _assert_close(cp, C, ref, bound, f"{algorithm.label} N={n}")


def _sddmm_host(C: Any, A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NumPy: ``C.data * sum(A[row] * B[:, col])`` in float64 and its rounding bound."""
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    a, bt = A.astype(np.float64)[rows], B.T.astype(np.float64)[C.indices]
    dots = np.einsum("ij,ij->i", a, bt)
    mag = np.einsum("ij,ij->i", np.abs(a), np.abs(bt))
    eps = np.finfo(A.dtype).eps
    values = C.data.astype(np.float64)
    return values * dots, 2 * (A.shape[1] + 2) * eps * np.abs(values) * mag


def _sddmm_backends() -> list[type]:
    found = [cls for cls, ok in ((SDDMM, nvmath_available()), (TorchSDDMM, torch_available()))
             if ok]
    if not found:
        pytest.skip(f"no SDDMM backend: {nvmath_available().reason}; "
                    f"{torch_available().reason}")
    return found


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", (32, 128))
def test_sddmm_equals_numpy(cp: Any, size: str, dtype: str, k: int) -> None:
    import cupyx.scipy.sparse as csp

    host = _host(size, dtype)
    rng = np.random.default_rng(5)
    A = rng.uniform(-1, 1, (host.shape[0], k)).astype(dtype)
    B = rng.uniform(-1, 1, (k, host.shape[1])).astype(dtype)
    ref, bound = _sddmm_host(host, A, B)
    dots = ref / host.data.astype(np.float64)
    C = csp.csr_matrix(host)
    A_d, B_d = cp.asarray(A), cp.asarray(B)
    Z = cp.empty(host.nnz, dtype=dtype)
    for cls in _sddmm_backends():
        base = cls(C, k, A=A_d, B=B_d, out=Z)
        if cls is SDDMM:
            assert {"ROW", "COL_T"} <= {a.label for a in base.algorithms}, base.skipped
        for algorithm in base.algorithms:
            Z.fill(math.nan)
            base.launch(A_d, B_d, Z, algorithm=algorithm)
            _assert_close(cp, Z, cp.asarray(ref), cp.asarray(bound),
                          f"{cls.__name__} {algorithm.label}")
        base.scale = False
        Z.fill(math.nan)
        base.launch(A_d, B_d, Z)
        _assert_close(cp, Z, cp.asarray(dots),
                      cp.asarray(bound / np.maximum(np.abs(host.data), 1e-30)), "unscaled")


def test_measure_baselines_validates_and_times_everything(cp: Any, timer: Any) -> None:
    doc = measure_baselines(_host("small", "float32"), "float32", (8,), timer, reps=3,
                            warmup=1, copies=2)
    assert doc["libraries"]["cupy"] is True
    assert [r["kernel"] for r in doc["records"]] == ["spmv", "spmm", "sddmm"]
    for record in doc["records"]:
        if record["kernel"] == "sddmm" and "error" in record:
            assert not nvmath_available() and not torch_available(), record
            continue
        assert "error" not in record, record
        assert record["valid"] and record["winner"], record
        assert record["queued_ms"] > 0 and record["gbps"] > 0
        assert all(a.get("check", {}).get("valid") for a in record["algorithms"]), record
        graph = record["graph"]
        assert graph.get("check", {}).get("valid") or graph["reason"].startswith(
            "not capturable: "), graph
        if record["kernel"] != "sddmm":
            assert record["cupyx"]["per_call_ms"] > 0
