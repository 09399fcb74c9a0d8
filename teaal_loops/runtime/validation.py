"""Checking a GPU result against a float64 reference, on the CPU.

``--validate`` counts entries with ``|y - y_ref| > atol + rtol * |y_ref|`` (atol 1e-2, rtol 1e-3).
``--rigorous`` bounds each row's rounding error by Wilkinson's estimate
``max(1e-3, K * nnz_row * u * sum_j |a_rj x_j|)`` with K = 8 and u the unit roundoff of the
dtype (2^-24 for f32, 2^-53 for f64), against a reference accumulated in float64, and also
checks a sequential CPU baseline in the same dtype against the same bound (so an overrun by the
GPU can be told apart from a bound that is too tight).

**The scalar epilogue** ``Z = alpha * T1 + beta * C`` (:func:`epilogue_check`). The kernel
rounds the product to the dtype (``t``, within the Wilkinson bound ``E = K * n * u * M`` of
``T1``, ``M = sum |products|``, ``n`` their count), then computes ``fl(fl(alpha * t) +
fl(beta * c))``: every term passes through two more roundings, its scaling and the sum (an
absent factor is 1, whose product is exact: the bound then only overestimates). With
``|d_i| <= u``::

    z = (alpha * t * (1 + d1) + beta * c * (1 + d2)) * (1 + d3)
    |z - (alpha * T1 + beta * C)| <= |alpha| * E * (1 + u)^2 + (2u + u^2) * (|alpha| M + |beta c|)

since ``|T1| <= M``. Folding the ``(1 + u)`` factors into the same generous ``K``, each element
is checked against ``max(1e-3, K * u * ((n + 2) * |alpha| * M + 2 * |beta * c|))``: the
product's bound with two more roundings of the scaled product and two of the scaled addend.
``alpha``, ``beta`` and ``C`` are taken as the kernel holds them (in its dtype; ``run`` draws
them that way), so converting them costs nothing here. The sequential baseline rounds the
same way: SciPy's product in the dtype, then the two multiplies and the add in NumPy.

NaN and infinities (a matrix may hold them) are values, compared by class at the same position:
NaN against NaN and an infinity against the same infinity agree; a finite value against a
non-finite one, NaN against an infinity, or opposite infinities are errors (and overruns). The
bound is taken over the finite products only, so it is never NaN, and the error maxima are over
the entries finite on both sides.
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


def _within(
    y: npt.NDArray[np.float64], ref: npt.NDArray[np.float64], bound: npt.ArrayLike
) -> npt.NDArray[np.bool_]:
    """Where ``y`` passes: finite on both sides and within ``bound`` of ``ref``, or NaN on both
    sides, or the same infinity on both sides."""
    finite = np.isfinite(y) & np.isfinite(ref)
    err = np.abs(np.where(finite, y, 0.0) - np.where(finite, ref, 0.0))
    same_class = (np.isnan(y) & np.isnan(ref)) | (np.isinf(ref) & (y == ref))
    return (finite & (err <= bound)) | same_class


def count_errors(
    y: npt.ArrayLike, y_ref: npt.ArrayLike, *, atol: float = ATOL, rtol: float = RTOL
) -> int:
    """Entries with ``|y - y_ref| > atol + rtol * |y_ref|``, or of another class than the
    reference (NaN, +inf, -inf, finite; see the module docstring)."""
    y64 = np.asarray(y, dtype=np.float64)
    ref = np.asarray(y_ref, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        tol = atol + rtol * np.abs(np.where(np.isfinite(ref), ref, 0.0))
    return int(np.count_nonzero(~_within(y64, ref, tol)))


def wilkinson_bound(A: sp.csr_matrix, x: npt.ArrayLike, dtype: str) -> npt.NDArray[np.float64]:
    """Per-row bound ``max(1e-3, K * nnz_row * u * sum_j |a_rj x_j|)``, the sum over the
    finite products (never NaN; infinite only where finite products overflow)."""
    u = UNIT_ROUNDOFF[np.dtype(dtype).name]
    absA = abs(A.astype(np.float64)).tocsr()
    absA.data[~np.isfinite(absA.data)] = 0.0
    absx = np.abs(np.asarray(x, dtype=np.float64))
    absx[~np.isfinite(absx)] = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        magnitude = np.asarray(absA @ absx, dtype=np.float64)
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


def overruns(y: npt.ArrayLike, ref: npt.NDArray[np.float64], bound: npt.ArrayLike) -> int:
    """Entries of ``y`` outside ``bound`` of ``ref`` (or of another class: module docstring)."""
    return int(np.count_nonzero(~_within(np.asarray(y, dtype=np.float64), ref, bound)))


def max_errors(y64: npt.NDArray[np.float64], ref: npt.NDArray[np.float64]) -> tuple[float, float]:
    """(max absolute, max relative) error over the entries finite on both sides."""
    finite = np.isfinite(y64) & np.isfinite(ref)
    if not finite.any():
        return 0.0, 0.0
    err = np.abs(y64[finite] - ref[finite])
    scale = np.abs(ref[finite])
    nonzero = scale > 0
    max_rel = float((err[nonzero] / scale[nonzero]).max()) if nonzero.any() else 0.0
    return float(err.max()), max_rel


def rigorous(A: sp.csr_matrix, x: npt.ArrayLike, y: npt.ArrayLike, dtype: str) -> RigorousReport:
    """Compare a GPU result ``y`` with the float64 reference under the Wilkinson bound."""
    name = np.dtype(dtype).name
    with np.errstate(over="ignore", invalid="ignore"):  # non-finite values are compared as such
        ref = reference(A, x)
        # SciPy's CSR matvec accumulates each row sequentially in the matrix's dtype.
        baseline = A.astype(name) @ np.asarray(x, dtype=name)
    return report(ref, wilkinson_bound(A, x, name), y, baseline)


def rigorous_elements(
    ref: npt.NDArray[np.float64], magnitude: npt.NDArray[np.float64], terms: npt.ArrayLike,
    y: npt.ArrayLike, baseline: npt.ArrayLike, dtype: str,
) -> RigorousReport:
    """The rigorous verdict for any output whose every element is a sum of ``terms`` products:
    ``ref`` its float64 value, ``magnitude`` the sum of the products' absolute values (the
    bound per element is that of :func:`wilkinson_bound`)."""
    u = UNIT_ROUNDOFF[np.dtype(dtype).name]
    with np.errstate(over="ignore", invalid="ignore"):
        bound = np.maximum(
            BOUND_FLOOR, WILKINSON_K * np.asarray(terms, dtype=np.float64) * u * magnitude
        )
    return report(ref, bound, y, baseline)


def report(ref: npt.NDArray[np.float64], bound: npt.ArrayLike, y: npt.ArrayLike,
           baseline: npt.ArrayLike) -> RigorousReport:
    """The verdict of ``y`` (and of the sequential ``baseline``) against ``ref`` within
    ``bound`` per element, with the naive --validate count and the largest errors."""
    y64 = np.asarray(y, dtype=np.float64)
    max_abs, max_rel = max_errors(y64, ref)
    return RigorousReport(
        wilkinson_k=WILKINSON_K,
        naive_mismatches=count_errors(y64, ref),
        baseline_overruns=overruns(np.asarray(baseline), ref, np.asarray(bound)),
        gpu_overruns=overruns(y64, ref, np.asarray(bound)),
        max_abs_error=max_abs,
        max_rel_error=max_rel,
    )


def spmm_check(op: sp.csr_matrix, B: npt.ArrayLike, Z: npt.ArrayLike,
               dtype: str) -> RigorousReport:
    """``Z = op @ B`` under the per-element Wilkinson bound (``op``: the matrix the kernel
    multiplies, ``A^T`` for a transposed spec)."""
    name = np.dtype(dtype).name
    B64 = np.asarray(B, dtype=np.float64)
    absA = abs(op.astype(np.float64)).tocsr()
    with np.errstate(over="ignore", invalid="ignore"):
        ref = np.asarray(op.astype(np.float64) @ B64)
        magnitude = np.asarray(absA @ np.abs(B64))
        baseline = op.astype(name) @ np.asarray(B, dtype=name)
    terms = np.diff(op.indptr)[:, None]
    return rigorous_elements(ref, magnitude, terms, Z, baseline, name)


def sddmm_check(C: sp.csr_matrix, U: npt.ArrayLike, V: npt.ArrayLike, values: npt.ArrayLike,
                dtype: str) -> RigorousReport:
    """``values[a] = C[a] * sum_k U[m_a, k] V[k, n_a]`` for C's nonzeros in CSR order."""
    name = np.dtype(dtype).name
    C = C.tocsr()
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    U64, V64 = np.asarray(U, dtype=np.float64), np.asarray(V, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = C.data.astype(np.float64) * np.einsum("ij,ji->i", U64[rows], V64[:, C.indices])
        magnitude = np.abs(C.data.astype(np.float64)) * np.einsum(
            "ij,ji->i", np.abs(U64[rows]), np.abs(V64[:, C.indices]))
        Ud, Vd = np.asarray(U, dtype=name), np.asarray(V, dtype=name)
        baseline = C.data.astype(name) * np.einsum("ij,ji->i", Ud[rows], Vd[:, C.indices])
    return rigorous_elements(ref, magnitude, U64.shape[1] + 1, values, baseline, name)


def epilogue_check(
    op: sp.csr_matrix, B: npt.ArrayLike, C: npt.ArrayLike | None, alpha: float, beta: float,
    Z: npt.ArrayLike, dtype: str,
) -> RigorousReport:
    """``Z = alpha * (op @ B) + beta * C`` (``op``: the matrix the kernel multiplies, ``A^T``
    for a transposed spec; ``B`` a vector or a ``[K, N]`` matrix; ``C`` shaped like ``Z`` or
    None) under the bound of the module docstring."""
    name = np.dtype(dtype).name
    u = UNIT_ROUNDOFF[name]
    B64 = np.asarray(B, dtype=np.float64)
    absA = abs(op.astype(np.float64)).tocsr()
    terms = np.diff(op.indptr).astype(np.float64)
    if B64.ndim == 2:
        terms = terms[:, None]
    cast = np.dtype(name).type
    with np.errstate(over="ignore", invalid="ignore"):
        product = np.asarray(op.astype(np.float64) @ B64)
        magnitude = np.abs(alpha) * np.asarray(absA @ np.abs(B64))
        baseline = cast(alpha) * np.asarray(op.astype(name) @ np.asarray(B, dtype=name))
        ref = alpha * product
        scaled_c: Any = 0.0
        if C is not None:
            C64 = np.asarray(C, dtype=np.float64)
            ref = ref + beta * C64
            scaled_c = np.abs(beta * C64)
            baseline = baseline + cast(beta) * np.asarray(C, dtype=name)
        bound = np.maximum(
            BOUND_FLOOR, WILKINSON_K * u * ((terms + 2) * magnitude + 2 * scaled_c)
        )
    return report(ref, bound, Z, baseline)


def random_vector(cols: int, dtype: str, seed: int = 0) -> npt.NDArray[Any]:
    """Uniform in [-1, 1): never all zero, so unwritten or wrongly indexed outputs show."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, size=cols).astype(np.dtype(dtype))
