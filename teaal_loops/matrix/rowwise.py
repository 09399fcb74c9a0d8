"""Synthetic matrices defined row by row: any range of rows generated alone, on any device.

``--synthetic`` builds a whole matrix on the host. A matrix larger than one GPU has to be made
where it is used: each rank of a distributed run generates only its own rows, on its own GPU
(``run --device-synthetic``). The families here are **counter-based**: a row's length, its
column indices and its values are pure functions of (seed, row, position in the row), computed
with a 64-bit hash (SplitMix64's finaliser) by array operations of any NumPy-compatible module
``xp`` (NumPy on the host and in CI, CuPy on a GPU; nothing here imports CuPy). So the matrix
depends neither on how its rows are split nor on where they are made: the CI checks each rank's
shard against the whole matrix built by NumPy, and a 1-GPU and a 2-GPU run multiply the same
matrix (see the end for NumPy against CuPy).

Columns are sorted and distinct within every row by construction. A row of ``L`` nonzeros
cuts its column distribution, over ``m = cols - L + 1`` slots, into ``L`` strata at the
quantiles ``B(k) = floor(F^-1(k / L))`` (non-decreasing in ``k``), draws ``g_k`` in stratum
``k`` (``B(k) <= g_k <= max(B(k), B(k+1) - 1)``, so ``g`` is non-decreasing) and takes
``c_k = g_k + k``: strictly increasing, at most ``cols - 1``. No sort, no duplicate removal,
every nonzero computed on its own.

* ``banded``: row ``i`` holds the columns ``i-h .. i+h`` that exist, ``h`` from ``nnz/rows``.
* ``powerlaw``: row lengths are Pareto distributed (``P(L > t) ~ t^-alpha``; ``alpha = 1.5``
  by default: a heavy tail, rows of 10^5 nonzeros among rows of 5), scattered over the rows
  by the hash; column popularity falls as ``(j + 1)^-skew``, so low-numbered columns are hot
  (a graph numbered by degree). Together a Chung-Lu-like power-law graph.

The operand ``x`` is counter-based too (:func:`operand`), so every rank can make any part of
it, and a float64 reference of any row (``check_rows`` in the distributed layer) needs
no communication.

On one kind of device the matrix is exactly the same however its rows are split (the CI checks
every rank's shard against the whole matrix; the GPU tests do the same with CuPy). Between
NumPy and CuPy the hashes agree bit for bit, but ``pow`` is not correctly rounded on either,
so a length or a quantile that falls within rounding of an integer may differ by one: a run
and its check generate on the same device, so they always agree with each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from teaal_loops.errors import MatrixError
from teaal_loops.matrix.limits import check_memory, shown
from teaal_loops.matrix.synthetic_args import check_int, parse_number

ROWWISE_KINDS = ("banded", "powerlaw")
MAX_ROWS = 2**31 - 1  # rows and columns index int32 column arrays
MAX_ALPHA = 16.0
MAX_SKEW = 0.95  # F^-1 divides by 1 - skew
_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
# One hash stream per quantity, so that lengths, columns, values and x never correlate.
LENGTH, COLUMN, VALUE, OPERAND = 1, 2, 3, 4


def _mix_int(z: int) -> int:
    """SplitMix64 on a Python int (the stream keys)."""
    z = (z + _GOLDEN) & _MASK
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def stream_key(seed: int, stream: int) -> int:
    return _mix_int(_mix_int(seed) ^ stream)


def mix(xp: Any, z: Any) -> Any:
    """SplitMix64's finaliser on a uint64 array (wrapping arithmetic)."""
    z = z + xp.uint64(_GOLDEN)
    z = (z ^ (z >> xp.uint64(30))) * xp.uint64(_M1)
    z = (z ^ (z >> xp.uint64(27))) * xp.uint64(_M2)
    return z ^ (z >> xp.uint64(31))


def row_hash(xp: Any, key: int, rows: Any) -> Any:
    return mix(xp, rows.astype(xp.uint64) ^ xp.uint64(key))


def entry_hash(xp: Any, key: int, rows: Any, k: Any) -> Any:
    return mix(xp, row_hash(xp, key, rows) + k.astype(xp.uint64))


def unit(xp: Any, h: Any) -> Any:
    """A uint64 hash -> float64 uniform in [0, 1) (its top 53 bits)."""
    return (h >> xp.uint64(11)).astype(xp.float64) * (2.0**-53)


def signed_unit(xp: Any, h: Any, dtype: Any) -> Any:
    """Uniform in [-1, 1), in ``dtype``."""
    return (2.0 * unit(xp, h) - 1.0).astype(dtype)


@dataclass(frozen=True)
class Banded:
    """Row ``i``: columns ``max(0, i-h) .. min(cols-1, i+h)`` (square)."""

    rows: int
    half_width: int
    seed: int = 0
    kind: str = "banded"

    @property
    def cols(self) -> int:
        return self.rows

    def lengths(self, xp: Any, lo: int, hi: int) -> Any:
        r = xp.arange(lo, hi, dtype=xp.int64)
        h = self.half_width
        return xp.minimum(r + h, self.cols - 1) - xp.maximum(r - h, 0) + 1

    def columns(self, xp: Any, rows: Any, k: Any, lengths: Any) -> Any:
        return xp.maximum(rows - self.half_width, 0) + k

    @property
    def expected_nnz(self) -> int:
        """The nonzeros exactly: full rows of 2h+1, less the corners the edges cut off."""
        h = min(self.half_width, self.rows - 1)
        return self.rows * (2 * h + 1) - h * (h + 1)

    def values(self, xp: Any, rows: Any, k: Any, dtype: Any) -> Any:
        return signed_unit(xp, entry_hash(xp, stream_key(self.seed, VALUE), rows, k), dtype)

    def describe(self) -> str:
        return f"banded:rows={self.rows},half_width={self.half_width},seed={self.seed}"


@dataclass(frozen=True)
class PowerLaw:
    """Pareto row lengths of mean about ``mean_degree``, hot low-numbered columns (module
    docstring)."""

    rows: int
    cols: int
    mean_degree: float
    alpha: float = 1.5
    skew: float = 0.5
    seed: int = 0
    kind: str = "powerlaw"

    @property
    def expected_nnz(self) -> int:
        """About the nonzeros (the mean degree asked for, times the rows)."""
        return int(self.mean_degree * self.rows)

    @property
    def min_degree(self) -> float:
        """Pareto's scale: a Pareto(alpha) variable of scale d has mean alpha d / (alpha - 1),
        and its floor half a unit less."""
        return (self.mean_degree + 0.5) * (self.alpha - 1.0) / self.alpha

    def lengths(self, xp: Any, lo: int, hi: int) -> Any:
        r = xp.arange(lo, hi, dtype=xp.int64)
        u = 1.0 - unit(xp, row_hash(xp, stream_key(self.seed, LENGTH), r))  # (0, 1]
        length = xp.floor(self.min_degree * u ** (-1.0 / self.alpha))
        return xp.minimum(length, float(self.cols)).astype(xp.int64)

    def _quantile(self, xp: Any, j: Any, lengths: Any, slots: Any) -> Any:
        """``B(j) = floor(F^-1(j / L))`` over ``slots`` columns weighted ``(c + 1)^-skew``."""
        e = 1.0 - self.skew
        top = (slots + 1.0) ** e - 1.0
        t = (1.0 + (j / xp.maximum(lengths, 1)) * top) ** (1.0 / e) - 1.0
        last = slots.astype(xp.int64)
        b = xp.minimum(xp.maximum(xp.floor(t), 0.0), slots).astype(xp.int64)
        return xp.where(j >= lengths, last, b)  # the last stratum ends exactly at m

    def columns(self, xp: Any, rows: Any, k: Any, lengths: Any) -> Any:
        slots = (self.cols - lengths + 1).astype(xp.float64)
        kf = k.astype(xp.float64)
        lf = lengths.astype(xp.float64)
        lo = self._quantile(xp, kf, lf, slots)
        hi = self._quantile(xp, kf + 1.0, lf, slots)
        v = unit(xp, entry_hash(xp, stream_key(self.seed, COLUMN), rows, k))
        g = lo + xp.floor(v * (hi - lo)).astype(xp.int64)
        g = xp.minimum(g, xp.maximum(lo, hi - 1))
        return g + k

    def values(self, xp: Any, rows: Any, k: Any, dtype: Any) -> Any:
        return signed_unit(xp, entry_hash(xp, stream_key(self.seed, VALUE), rows, k), dtype)

    def describe(self) -> str:
        return (f"powerlaw:rows={self.rows},cols={self.cols},mean_degree={self.mean_degree:g},"
                f"alpha={self.alpha:g},skew={self.skew:g},seed={self.seed}")


Family = Banded | PowerLaw


def operand(xp: Any, seed: int, lo: int, hi: int, dtype: Any, width: int | None = None) -> Any:
    """Rows ``lo .. hi-1`` of the counter-based operand of ``seed``, uniform in [-1, 1): the
    vector ``x[lo:hi]`` (``width`` None, SpMV), or the ``(hi - lo, width)`` row-major block of
    the dense matrix ``B`` (SpMM; its entry ``(j, n)`` is hashed from ``j * width + n``)."""
    if width is None:
        j = xp.arange(lo, hi, dtype=xp.int64)
        return signed_unit(xp, row_hash(xp, stream_key(seed, OPERAND), j), dtype)
    flat = xp.arange(lo * width, hi * width, dtype=xp.int64)
    block = signed_unit(xp, row_hash(xp, stream_key(seed, OPERAND), flat), dtype)
    return block.reshape(hi - lo, width)


def entry_rows(xp: Any, indptr: Any, start: int, stop: int) -> Any:
    """The (local) row of each nonzero ``start .. stop-1`` of a CSR block whose row offsets are
    ``indptr`` (int64, from 0): the last row whose offset is at most the nonzero's."""
    return xp.searchsorted(indptr, xp.arange(start, stop, dtype=xp.int64), side="right") - 1


def entries(xp: Any, indptr: Any, start: int, stop: int) -> tuple[Any, Any]:
    """(local row, position in the row) of the nonzeros ``start .. stop-1`` of a CSR block
    whose row offsets are ``indptr`` (int64, from 0)."""
    row = entry_rows(xp, indptr, start, stop)
    return row, xp.arange(start, stop, dtype=xp.int64) - indptr[row]


def offsets(xp: Any, lengths: Any) -> Any:
    """Row offsets (int64, from 0) of rows of ``lengths``."""
    out = xp.zeros(len(lengths) + 1, dtype=xp.int64)
    xp.cumsum(lengths, out=out[1:])
    return out


def generate_rows(family: Family, lo: int, hi: int, dtype: Any = np.float64,
                  xp: Any = np) -> tuple[Any, Any, Any]:
    """(indptr, indices, data) of rows ``lo .. hi-1``, all at once (for tests and small
    matrices; a distributed rank generates its shard in chunks)."""
    lengths = family.lengths(xp, lo, hi)
    indptr = offsets(xp, lengths)
    local, k = entries(xp, indptr, 0, int(indptr[-1]))
    rows = local + lo
    cols = family.columns(xp, rows, k, lengths[local])
    return indptr, cols.astype(xp.int32), family.values(xp, rows, k, dtype)


HOST_BYTES_PER_NONZERO = 96  # the values and indices kept, and the generator's temporaries


def host_matrix(family: Family, dtype: Any = np.float64) -> Any:
    """:func:`whole_matrix`, refused in one line where the host cannot hold it and its
    making (``explain --device-synthetic``: a plan on the CPU of what the ranks will make)."""
    need = HOST_BYTES_PER_NONZERO * family.expected_nnz + 16 * (family.rows + 1)
    check_memory(need, f"the whole {family.describe()} matrix on the host")
    return whole_matrix(family, dtype)


def whole_matrix(family: Family, dtype: Any = np.float64) -> Any:
    """The whole matrix on the host as a SciPy ``csr_matrix``."""
    indptr, indices, data = generate_rows(family, 0, family.rows, dtype)
    return sp.csr_matrix((data, indices, indptr), shape=(family.rows, family.cols))


# -- the --device-synthetic text -------------------------------------------------------------
KEYS = {
    "banded": ("rows", "nnz", "seed"),
    "powerlaw": ("rows", "cols", "nnz", "alpha", "skew", "seed"),
}


def parse_family(text: str) -> Family:
    """``"powerlaw:rows=62.5M,nnz=1G,seed=3"`` -> a checked family (one-line MatrixError)."""
    where = f"--device-synthetic {shown(text, 80)}"
    kind, _, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    if kind not in ROWWISE_KINDS:
        raise MatrixError(f"{where}: unknown kind {shown(kind)} (valid kinds: "
                          f"{', '.join(ROWWISE_KINDS)}; e.g. powerlaw:rows=62500000,nnz=1e9)")
    values: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, raw = (s.strip() for s in item.partition("="))
        if not sep or not raw:
            raise MatrixError(f"{where}: {shown(item)} is not key=value")
        if key not in KEYS[kind]:
            raise MatrixError(f"{where}: unknown key {shown(key)} for {kind} "
                              f"(valid keys: {', '.join(KEYS[kind])})")
        if key in values:
            raise MatrixError(f"{where}: key {key!r} given twice")
        try:
            values[key] = float(parse_number(raw))
        except ValueError:
            raise MatrixError(f"{where}: {key}={shown(raw)} is not a number") from None
    for needed in ("rows", "nnz"):
        if needed not in values:
            raise MatrixError(f"{where}: {needed}=... is required")
    rows = _count(where, "rows", values["rows"], 1, MAX_ROWS)
    nnz = _count(where, "nnz", values["nnz"], 0, 2**62)
    seed = _count(where, "seed", values.get("seed", 0.0), 0, 2**62)
    if kind == "banded":
        half = max(0, round((nnz / rows - 1.0) / 2.0))
        return Banded(rows, min(half, rows - 1), seed)
    cols = _count(where, "cols", values.get("cols", float(rows)), 1, MAX_ROWS)
    alpha = values.get("alpha", 1.5)
    skew = values.get("skew", 0.5)
    if not 1.0 < alpha <= MAX_ALPHA:
        raise MatrixError(f"{where}: alpha={alpha:g} must lie in (1, {MAX_ALPHA:g}]")
    if not 0.0 <= skew <= MAX_SKEW:
        raise MatrixError(f"{where}: skew={skew:g} must lie in [0, {MAX_SKEW}]")
    mean = nnz / rows
    if mean > cols:
        raise MatrixError(f"{where}: nnz={nnz} is more than rows x cols")
    return PowerLaw(rows, cols, mean, alpha, skew, seed)


def _count(where: str, key: str, value: float, low: int, high: int) -> int:
    if not math.isfinite(value) or not float(value).is_integer():
        raise MatrixError(f"{where}: {key}={value:g} is not an integer")
    try:
        return check_int("device-synthetic", key, int(value), low, high)
    except MatrixError as exc:
        raise MatrixError(f"{where}: {str(exc).split(': ', 1)[1]}") from None


__all__ = [
    "ROWWISE_KINDS",
    "Banded",
    "Family",
    "PowerLaw",
    "entries",
    "generate_rows",
    "offsets",
    "operand",
    "parse_family",
    "whole_matrix",
]
