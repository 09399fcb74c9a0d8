"""Statistics of a sparse matrix's column indices: how its gathers of x spread.

``auto``'s rule T3 (column panels) reads them, and only for large matrices whose x passes its
size test: a column histogram (the share of the nonzeros outside x's hottest
``RESIDENT_BYTES``) and each nonzero's distance from its row's place on the diagonal. Both
run with the array module the caller passes (CuPy on the device, NumPy on the host): the
histogram in one pass (a counter a column), the distances in chunks; this package never
imports CuPy itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from teaal_loops.matrix.limit_model import RESIDENT_BYTES
from teaal_loops.matrix.rowwise import entry_rows


@dataclass(frozen=True)
class ColumnStats:
    """What rule T3 of ``auto`` reads of a matrix's columns (:func:`column_stats_of`)."""

    cols: int
    cold_share: float  # share of the nonzeros outside x's hottest RESIDENT_BYTES of columns
    # share of the nonzeros farther than RESIDENT_BYTES / 2 of x from their row's place on the
    # diagonal (row * cols / rows): a band gathers from a window that stays in L2 anyway
    far_share: float


# Nonzeros a pass of the column statistics reads at once (bounds its transient memory).
COLUMN_CHUNK = 1 << 24


def column_stats_of(
    xp: Any, indptr: Any, indices: Any, shape: tuple[int, int], value_bytes: int
) -> ColumnStats:
    """:class:`ColumnStats` from CSR arrays held by array module ``xp`` (CuPy on the device,
    NumPy on the host): a column histogram, and each nonzero's distance from its row's place
    on the diagonal in chunks of :data:`COLUMN_CHUNK` nonzeros (the transient memory of
    their row ids)."""
    rows, cols = (int(n) for n in shape)
    nnz = int(indices.size)
    hottest = RESIDENT_BYTES // int(value_bytes)
    if nnz == 0 or rows == 0:
        return ColumnStats(cols, 0.0, 0.0)
    if hottest >= cols:
        cold = 0.0
    else:
        degree = xp.bincount(indices, minlength=cols)
        cold = 1.0 - int(xp.partition(degree, cols - hottest)[cols - hottest:].sum()) / nnz
    offsets = xp.asarray(indptr, dtype=xp.int64)
    far = 0
    for start in range(0, nnz, COLUMN_CHUNK):
        stop = min(nnz, start + COLUMN_CHUNK)
        diagonal = entry_rows(xp, offsets, start, stop) * (cols / rows)
        far += int(xp.count_nonzero(xp.abs(indices[start:stop] - diagonal) > hottest / 2))
    return ColumnStats(cols, cold, far / nnz)
