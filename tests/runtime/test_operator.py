"""kernel.linear_operator(A) on the fake GPU: shape, dtype, products, fresh outputs, and the
solvers running on it (SciPy's cg, gmres, minres, eigsh, lobpcg: the same calls as cupyx's)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import teaal_loops.pipeline as pipeline
from teaal_loops.errors import MatrixError, ParameterError
from teaal_loops.runtime import Kernel

from .conftest import SPECS, FakeGpu, poisson_2d

SCHEDULES = ["thread_mapped", "group_mapped", "work_oriented", "merge_path"]


def _kernel(name: str, dtype: str = "float64") -> Kernel:
    kernel = pipeline.compile(SPECS / f"{name}.yaml", dtype=dtype)
    assert isinstance(kernel, Kernel)
    return kernel


@pytest.mark.parametrize("name", SCHEDULES)
def test_shape_dtype_and_products(fake_gpu: FakeGpu, name: str) -> None:
    A = sp.random(70, 40, density=0.15, format="csr", random_state=3)
    op = _kernel(name).linear_operator(A)
    assert isinstance(op, spla.LinearOperator)  # cupyx's class, here SciPy's stand-in
    assert op.shape == (70, 40) and op.dtype == np.float64
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 40)
    first = op.matvec(x)
    np.testing.assert_allclose(first, A @ x, rtol=1e-12, atol=1e-12)
    second = op.matvec(x)
    assert second is not first, "a solver may hold the previous result: return a new array"
    np.testing.assert_allclose(op.matvec(x.reshape(40, 1)).ravel(), A @ x, rtol=1e-12)
    strided = np.repeat(x, 2)[::2]
    np.testing.assert_allclose(op.matvec(strided), A @ x, rtol=1e-12)
    X = rng.uniform(-1, 1, (40, 3))
    # accumulating schedules need the block zeroed: `empty` is NaN here, so a miss shows
    np.testing.assert_allclose(op.matmat(X), A @ X, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.matmat(np.asfortranarray(X)), A @ X, rtol=1e-12)
    assert op.matmat(np.zeros((40, 0))).shape == (70, 0)


def test_the_operator_prepares_once(fake_gpu: FakeGpu) -> None:
    A = poisson_2d(6)
    kernel = _kernel("thread_mapped")
    op = kernel.linear_operator(A)
    uploads = len(fake_gpu.kinds("alloc:zeros"))  # one no_owner per preparation
    for _ in range(5):
        op.matvec(np.ones(36))
    assert op.prepared is kernel.prepared_for(A) and op.kernel is kernel
    assert len(fake_gpu.kinds("alloc:zeros")) == uploads


def test_mixed_precision_operator(fake_gpu: FakeGpu) -> None:
    A = poisson_2d(5)
    op = _kernel("merge_path", "float32").linear_operator(A, dtype="float64")
    assert op.dtype == np.float64
    y = op.matvec(np.linspace(0, 1, 25))
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, A @ np.linspace(0, 1, 25), rtol=1e-6, atol=1e-6)
    with pytest.raises(ParameterError, match="int32 is not supported"):
        _kernel("merge_path").linear_operator(A, dtype="int32")
    with pytest.raises(ParameterError, match="is not a dtype"):
        _kernel("merge_path").linear_operator(A, dtype=object())


@pytest.mark.parametrize(
    ("block", "message"),
    [(np.ones(24), r"shape \(24,\)"), (np.ones((24, 2)), r"shape \(24, 2\)"),
     (np.ones((25, 2), complex), "kind 'c'")],
)
def test_bad_blocks_are_refused(fake_gpu: FakeGpu, block: Any, message: str) -> None:
    op = _kernel("thread_mapped").linear_operator(poisson_2d(5))
    with pytest.raises(MatrixError, match=message):
        op._matmat(block)  # the implementation itself, past SciPy's own checks


@pytest.mark.parametrize("name", ["thread_mapped", "merge_path"])
def test_solvers_run_on_the_operator(fake_gpu: FakeGpu, name: str) -> None:
    A = poisson_2d(12)  # 144 rows, SPD
    n = A.shape[0]
    op = _kernel(name).linear_operator(A)
    b = A @ np.linspace(-1, 1, n)
    exact = spla.spsolve(A.tocsc(), b)
    for solve in (spla.cg, spla.minres, spla.gmres):
        x, info = solve(op, b, rtol=1e-10, maxiter=2000)
        assert info == 0, solve.__name__
        np.testing.assert_allclose(x, exact, rtol=1e-6, atol=1e-8, err_msg=solve.__name__)
    top = np.sort(np.linalg.eigvalsh(A.toarray()))[-3:]
    w = spla.eigsh(op, k=3, which="LA", return_eigenvectors=False)
    np.testing.assert_allclose(np.sort(w), top, rtol=1e-8)
    X0 = np.random.default_rng(1).uniform(-1, 1, (n, 3))
    w2, _ = spla.lobpcg(op, X0, largest=True, tol=1e-7, maxiter=500)
    np.testing.assert_allclose(np.sort(w2), top, rtol=1e-6)
    launches = len(fake_gpu.kinds("launch"))
    assert launches > 100, "the solvers did not go through the kernel"
