"""Comparing a result with the reference: integers exactly, reals within tolerances.

Reals pass where ``|got - expected| <= atol + rtol * |expected|`` (loops' ``--validate`` rule).
Default tolerances follow the dtype under test: float32 uses loops' own (``atol 1e-2``,
``rtol 1e-3``); float64 uses ``atol 1e-12``, ``rtol 1e-9`` (only summation order may differ).
Integer arrays (both sides integral) must be equal element by element, as fibertree's ``==``
compares integer payloads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FLOAT32_TOL = (1e-3, 1e-2)  # (rtol, atol)
FLOAT64_TOL = (1e-9, 1e-12)


@dataclass(frozen=True)
class Comparison:
    ok: bool
    exact: bool  # compared as integers
    total: int
    mismatches: int
    max_abs_error: float
    max_rel_error: float
    rtol: float
    atol: float
    worst: tuple[tuple[tuple[int, ...], float, float], ...] = ()  # (index, expected, got)
    note: str = ""

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
        if self.worst and not self.ok:
            shown = ", ".join(f"{list(i)}: expected {e:.6g}, got {g:.6g}" for i, e, g in self.worst)
            text += f" (e.g. {shown})"
        return text


def default_tolerances(dtype: Any) -> tuple[float, float]:
    return FLOAT32_TOL if np.dtype(dtype) == np.float32 else FLOAT64_TOL


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
    if exact:
        bad = exp != res
        diff = np.abs(exp.astype(np.float64) - res.astype(np.float64))
        r, a = 0.0, 0.0
    else:
        dr, da = default_tolerances(res.dtype if res.dtype.kind == "f" else exp.dtype)
        r = dr if rtol is None else rtol
        a = da if atol is None else atol
        e64 = exp.astype(np.float64)
        g64 = res.astype(np.float64)
        diff = np.abs(g64 - e64)
        with np.errstate(invalid="ignore"):
            bad = ~(diff <= a + r * np.abs(e64))  # NaN counts as a mismatch
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.abs(exp.astype(np.float64))
        rel = np.where(
            scale > 0, diff / np.where(scale > 0, scale, 1.0), np.where(diff > 0, np.inf, 0.0)
        )
    count = int(np.count_nonzero(bad))
    worst: list[tuple[tuple[int, ...], float, float]] = []
    if count:
        flat = np.flatnonzero(bad.ravel())
        order = flat[np.argsort(-np.nan_to_num(diff.ravel()[flat], nan=np.inf), kind="stable")]
        for i in order[:show]:
            idx = tuple(int(x) for x in np.unravel_index(int(i), exp.shape))
            worst.append((idx, float(exp.ravel()[i]), float(res.ravel()[i])))
    return Comparison(
        ok=count == 0,
        exact=exact,
        total=int(exp.size),
        mismatches=count,
        max_abs_error=float(np.nanmax(diff)) if diff.size else 0.0,
        max_rel_error=float(np.nanmax(rel)) if rel.size else 0.0,
        rtol=r,
        atol=a,
        worst=tuple(worst),
    )
