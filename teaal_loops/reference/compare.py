"""Comparing a result with the reference: integers exactly, reals within tolerances.

Reals pass where ``|got - expected| <= atol + rtol * |expected|`` (loops' ``--validate`` rule).
Default tolerances follow the dtype under test: float32 uses loops' own (``atol 1e-2``,
``rtol 1e-3``); float64 uses ``atol 1e-12``, ``rtol 1e-9`` (only summation order may differ).
Integer arrays (both sides integral) must be equal element by element, as fibertree's ``==``
compares integer payloads.

NaN and infinities are values like any other, compared by class at the same position: NaN
agrees with NaN, ``+inf`` with ``+inf`` and ``-inf`` with ``-inf``; a finite value against a
non-finite one (or NaN against an infinity, or infinities of opposite sign) disagrees. The
error norms are taken over the entries finite on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FLOAT32_TOL = (1e-3, 1e-2)  # (rtol, atol)
FLOAT64_TOL = (1e-9, 1e-12)

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Comparison:
    ok: bool
    exact: bool  # compared as integers
    total: int
    mismatches: int
    max_abs_error: float  # over the entries finite on both sides
    max_rel_error: float
    rtol: float
    atol: float
    worst: tuple[tuple[tuple[int, ...], float, float], ...] = ()  # (index, expected, got)
    note: str = ""
    nonfinite: int = 0  # entries where either side is NaN or infinite
    class_mismatches: int = 0  # ... of which the two sides are of different classes

    def summary(self) -> str:
        if self.note:
            return self.note
        how = (
            "exactly (integers)" if self.exact else f"within rtol={self.rtol:g}, atol={self.atol:g}"
        )
        verdict = "agree" if self.ok else f"DISAGREE at {self.mismatches} of {self.total} entries"
        text = (
            f"{verdict} {how}; max abs error {self.max_abs_error:.3g}, "
            f"max rel error {self.max_rel_error:.3g}"
        )
        if self.nonfinite:
            text += (
                f" (finite entries); {self.nonfinite} NaN/Inf entries, "
                f"{self.class_mismatches} of a different class on the two sides"
            )
        if self.worst and not self.ok:
            shown = ", ".join(f"{list(i)}: expected {e:.6g}, got {g:.6g}" for i, e, g in self.worst)
            text += f" (e.g. {shown})"
        return text


def default_tolerances(dtype: Any) -> tuple[float, float]:
    return FLOAT32_TOL if np.dtype(dtype) == np.float32 else FLOAT64_TOL


def same_class(expected: FloatArray, got: FloatArray) -> BoolArray:
    """Where both sides are NaN, or the same infinity."""
    both_nan = np.isnan(expected) & np.isnan(got)
    return both_nan | (np.isinf(expected) & (expected == got))


def finite_errors(expected: FloatArray, got: FloatArray) -> tuple[BoolArray, FloatArray]:
    """(where both sides are finite, ``|got - expected|`` there and 0 elsewhere)."""
    finite = np.isfinite(expected) & np.isfinite(got)
    diff = np.zeros(expected.shape, dtype=np.float64)
    diff[finite] = np.abs(got[finite] - expected[finite])
    return finite, diff


def compare_arrays(
    expected: npt.ArrayLike,
    got: npt.ArrayLike,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    show: int = 5,
) -> Comparison:
    """Compare ``got`` with ``expected`` (the reference); see the module docstring."""
    exp = np.asarray(expected)
    res = np.asarray(got)
    if exp.shape != res.shape:
        return Comparison(
            False,
            False,
            int(exp.size),
            int(exp.size),
            float("inf"),
            float("inf"),
            0.0,
            0.0,
            note=f"shapes differ: expected {exp.shape}, got {res.shape}",
        )
    exact = exp.dtype.kind in "biu" and res.dtype.kind in "biu"
    e64 = exp.astype(np.float64)
    g64 = res.astype(np.float64)
    if exact:
        r, a = 0.0, 0.0
        finite, diff = finite_errors(e64, g64)
        bad = exp != res
        class_bad = np.zeros(exp.shape, dtype=bool)
    else:
        dr, da = default_tolerances(res.dtype if res.dtype.kind == "f" else exp.dtype)
        r = dr if rtol is None else rtol
        a = da if atol is None else atol
        finite, diff = finite_errors(e64, g64)
        class_bad = ~finite & ~same_class(e64, g64)
        bad = class_bad | (finite & ~(diff <= a + r * np.abs(e64)))
    scale = np.abs(e64)
    rel = np.zeros(exp.shape, dtype=np.float64)
    nonzero = finite & (scale > 0)
    rel[nonzero] = diff[nonzero] / scale[nonzero]
    rel[finite & (scale == 0) & (diff > 0)] = np.inf
    count = int(np.count_nonzero(bad))
    return Comparison(
        ok=count == 0,
        exact=exact,
        total=int(exp.size),
        mismatches=count,
        max_abs_error=float(diff.max()) if diff.size else 0.0,
        max_rel_error=float(rel.max()) if rel.size else 0.0,
        rtol=r,
        atol=a,
        worst=_worst(e64, g64, bad, np.where(class_bad, np.inf, diff), show),
        nonfinite=int(np.count_nonzero(~finite)),
        class_mismatches=int(np.count_nonzero(class_bad)),
    )


def _worst(
    e64: FloatArray, g64: FloatArray, bad: BoolArray, badness: FloatArray, show: int
) -> tuple[tuple[tuple[int, ...], float, float], ...]:
    """Up to ``show`` mismatches, worst first (a class mismatch before any finite error)."""
    flat = np.flatnonzero(bad.ravel())
    order = flat[np.argsort(-badness.ravel()[flat], kind="stable")]
    return tuple(
        (
            tuple(int(x) for x in np.unravel_index(int(i), e64.shape)),
            float(e64.ravel()[i]),
            float(g64.ravel()[i]),
        )
        for i in order[:show]
    )
