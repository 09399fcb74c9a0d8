"""``run --rigorous`` for a scalar epilogue: the bound ``K * u * ((n + 2) |alpha| M + 2 |beta C|)``
(runtime/validation.py derives it) passes results rounded as the kernel rounds them, for SpMV
and SpMM, and catches an element off by more."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.runtime import validation

A = sp.random(300, 200, density=0.05, format="csr", random_state=1)


def _kernel_like(B: np.ndarray, C: np.ndarray | None, alpha: float, beta: float,
                 dtype: str) -> np.ndarray:
    """What the kernel computes: the product in the dtype, then fl(fl(a t) + fl(b c))."""
    t = A.astype(dtype) @ B.astype(dtype)
    z = np.dtype(dtype).type(alpha) * t
    if C is not None:
        z = z + np.dtype(dtype).type(beta) * C.astype(dtype)
    return z


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dense", [None, 5])
@pytest.mark.parametrize("addend", [True, False])
def test_results_rounded_like_the_kernel_pass(dtype: str, dense: int | None,
                                              addend: bool) -> None:
    rng = np.random.default_rng(0)
    shape = (200,) if dense is None else (200, dense)
    B = rng.uniform(-1, 1, shape).astype(dtype)
    C = rng.uniform(-1, 1, (300,) + shape[1:]).astype(dtype) if addend else None
    alpha, beta = float(np.float32(0.3)), float(np.float32(-1.7))
    Z = _kernel_like(B, C, alpha, beta, dtype)
    report = validation.epilogue_check(A, B, C, alpha, beta, Z, dtype)
    assert report.verdict == "NOT_A_BUG" and report.baseline_overruns == 0
    assert report.naive_mismatches == 0
    bad = Z.copy()
    bad.flat[17] += 0.5
    bad.flat[3] = np.nan
    report = validation.epilogue_check(A, B, C, alpha, beta, bad, dtype)
    assert report.gpu_overruns == 2 and report.verdict == "POTENTIAL_BUG"


def test_the_bound_is_the_documented_one() -> None:
    """A row of n = 3 products of magnitude 1e6: K u ((n + 2) |a| M + 2 |b c|)."""
    M = sp.csr_matrix(np.array([[1e6, 1e6, -1e6]]))
    B = np.array([1.0, 1.0, 1.0])
    C = np.array([2e6])
    u = 2.0**-24
    bound = 8 * u * (5 * 2.0 * 3e6 + 2 * 0.5 * 2e6)
    exact = 2.0 * 1e6 + 0.5 * 2e6
    ok = validation.epilogue_check(M, B, C, 2.0, 0.5, np.array([exact + 0.99 * bound]),
                                   "float32")
    over = validation.epilogue_check(M, B, C, 2.0, 0.5, np.array([exact + 1.01 * bound]),
                                     "float32")
    assert ok.gpu_overruns == 0 and over.gpu_overruns == 1
