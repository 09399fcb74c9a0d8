"""Checking a GPU result against a float64 reference (DESIGN.md section 6), on the CPU.

``--validate`` counts entries with ``|y - y_ref| > atol + rtol * |y_ref|`` (atol 1e-2, rtol 1e-3).
``--rigorous`` bounds each row's rounding error by Wilkinson's estimate
``max(1e-3, K * nnz_row * u * sum_j |a_rj x_j|)`` with K = 8 and u the unit roundoff of the
dtype (2^-24 for f32, 2^-53 for f64), against a reference accumulated in float64, and also
checks a sequential CPU baseline in the same dtype against the same bound (so an overrun by the
GPU can be told apart from a bound that is too tight). NaN never passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

ATOL = 1e-2
RTOL = 1e-3
WILKINSON_K = 8
BOUND_FLOOR = 1e-3
UNIT_ROUNDOFF = {"float32": 2.0**-24, "float64": 2.0**-53}


def reference(A: sp.csr_matrix, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``A @ x`` accumulated in float64."""
    return np.asarray(A.astype(np.float64) @ np.asarray(x, dtype=np.float64), dtype=np.float64)


def count_errors(
    y: npt.ArrayLike, y_ref: npt.ArrayLike, *, atol: float = ATOL, rtol: float = RTOL
) -> int:
    """Entries with ``|y - y_ref| > atol + rtol * |y_ref|`` (NaN and inf count as errors)."""
    y64 = np.asarray(y, dtype=np.float64)
    ref = np.asarray(y_ref, dtype=np.float64)
    ok = np.abs(y64 - ref) <= atol + rtol * np.abs(ref)
    return int(np.count_nonzero(~ok))


def wilkinson_bound(A: sp.csr_matrix, x: npt.ArrayLike, dtype: str) -> npt.NDArray[np.float64]:
    """Per-row bound ``max(1e-3, K * nnz_row * u * sum_j |a_rj x_j|)``."""
    u = UNIT_ROUNDOFF[np.dtype(dtype).name]
    absA = abs(A.astype(np.float64))
    magnitude = np.asarray(absA @ np.abs(np.asarray(x, dtype=np.float64)), dtype=np.float64)
    nnz_row = np.diff(A.indptr).astype(np.float64)
    return np.maximum(BOUND_FLOOR, WILKINSON_K * nnz_row * u * magnitude)


@dataclass(frozen=True)
class RigorousReport:
    wilkinson_k: int
    naive_mismatches: int  # the --validate criterion
    baseline_overruns: int  # sequential CPU result in the run's dtype vs the bound
    gpu_overruns: int  # the GPU result vs the bound
    max_abs_error: float
    max_rel_error: float

    @property
    def verdict(self) -> str:
        return "NOT_A_BUG" if self.gpu_overruns == 0 else "POTENTIAL_BUG"

    def lines(self) -> list[str]:
        return [
            f"WilkinsonK: {self.wilkinson_k}",
            f"NaiveMismatches: {self.naive_mismatches}",
            f"F32BaselineOverruns: {self.baseline_overruns}",
            f"GPUOverruns: {self.gpu_overruns}",
            f"MaxAbsError: {self.max_abs_error:.6e}",
            f"MaxRelError: {self.max_rel_error:.6e}",
            f"Verdict: {self.verdict}",
        ]


def _overruns(y: npt.NDArray[Any], ref: npt.NDArray[np.float64], bound: npt.NDArray[Any]) -> int:
    ok = np.abs(np.asarray(y, dtype=np.float64) - ref) <= bound
    return int(np.count_nonzero(~ok))


def rigorous(A: sp.csr_matrix, x: npt.ArrayLike, y: npt.ArrayLike, dtype: str) -> RigorousReport:
    """Compare a GPU result ``y`` with the float64 reference under the Wilkinson bound."""
    name = np.dtype(dtype).name
    ref = reference(A, x)
    bound = wilkinson_bound(A, x, name)
    y64 = np.asarray(y, dtype=np.float64)
    # SciPy's CSR matvec accumulates each row sequentially in the matrix's dtype.
    baseline = A.astype(name) @ np.asarray(x, dtype=name)
    err = np.abs(y64 - ref)
    finite = np.isfinite(err)
    if err.size == 0:
        max_abs = max_rel = 0.0
    elif not finite.all():
        max_abs = max_rel = float("inf")
    else:
        max_abs = float(err.max())
        nonzero = np.abs(ref) > 0
        max_rel = float((err[nonzero] / np.abs(ref[nonzero])).max()) if nonzero.any() else 0.0
    return RigorousReport(
        wilkinson_k=WILKINSON_K,
        naive_mismatches=count_errors(y64, ref),
        baseline_overruns=_overruns(np.asarray(baseline), ref, bound),
        gpu_overruns=_overruns(y64, ref, bound),
        max_abs_error=max_abs,
        max_rel_error=max_rel,
    )


def random_vector(cols: int, dtype: str, seed: int = 0) -> npt.NDArray[Any]:
    """Uniform in [-1, 1): never all zero, so unwritten or wrongly indexed outputs show."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, size=cols).astype(np.dtype(dtype))
