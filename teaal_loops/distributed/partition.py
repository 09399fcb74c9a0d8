"""Row partition of a sparse matrix across P processes, balanced by the schedule's cost.

Every row costs what the chosen schedule spends on it, not one unit a row: a row of ``n``
nonzeros costs ``G * ceil(n / G) + 1``, with ``G`` the schedule's lanes a row (its bound
``group_size``: 1 for thread-mapped, work-oriented and merge-path). For ``G = 1`` that is
merge-path's own measure (one merge item a nonzero and one a row end), and it is what the
bandwidth of a CSR SpMV pays (the nonzeros' values, indices and x gathers, and the row's offset
and y store). For a group of ``G`` lanes a row occupies ``ceil(n / G)`` steps of all ``G``
lanes, so a short row costs the group as much as ``G`` nonzeros: balancing rows alone (or
nonzeros alone) would leave one rank with the empty rows or the long ones.

Cuts are placed on the prefix sums of the costs: part ``k`` ends at the row boundary nearest to
``k/P`` of the total cost, so every part is within half a row of its share; a row is never
split (its output element has one owner). ``x`` is distributed like ``y``: for a square matrix
the column cuts equal the row cuts (rank ``r`` owns ``x[c]`` for the columns ``c`` of its rows'
range, PETSc's MPIAIJ convention); a rectangular matrix's column cuts are the row cuts scaled
to its columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from teaal_loops.distributed.errors import DistributedError

IntArray = npt.NDArray[np.int64]
MAX_PARTS = 4096  # ranks a partition may have (bounds every per-rank table)


def row_costs(indptr: npt.ArrayLike, group_size: int = 1) -> IntArray:
    """The schedule's cost of every row: ``G * ceil(n / G) + 1`` for a row of ``n`` nonzeros
    (module docstring)."""
    ptr = np.asarray(indptr, dtype=np.int64)
    lengths = np.diff(ptr)
    if group_size < 1:
        raise DistributedError(f"group size {group_size}: must be at least 1")
    if group_size > 1:
        lengths = -(-lengths // group_size) * group_size
    return lengths + 1


def balanced_cuts(costs: npt.ArrayLike, parts: int) -> IntArray:
    """``parts + 1`` row boundaries (0 first, the row count last, non-decreasing) that cut
    ``costs`` into ``parts`` contiguous runs of nearly equal sums: boundary ``k`` is the row
    boundary whose prefix sum is nearest to ``k / parts`` of the total."""
    check_parts(parts)
    c = np.asarray(costs, dtype=np.int64)
    prefix = np.concatenate(([0], np.cumsum(c)))
    rows = len(c)
    total = int(prefix[-1])
    targets = np.arange(1, parts, dtype=np.float64) * (total / parts)
    hi = np.searchsorted(prefix, targets, side="left").clip(0, rows)
    lo = (hi - 1).clip(0, rows)
    nearer_lo = np.abs(prefix[lo] - targets) <= np.abs(prefix[hi] - targets)
    inner = np.where(nearer_lo, lo, hi)
    cuts = np.concatenate(([0], np.maximum.accumulate(inner) if len(inner) else inner, [rows]))
    return cuts.astype(np.int64)


def check_parts(parts: int) -> None:
    if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)):
        raise DistributedError(f"ranks {parts!r}: expected an integer")
    if not 1 <= parts <= MAX_PARTS:
        raise DistributedError(f"ranks {parts}: must be in 1..{MAX_PARTS}")


def column_cuts(row_cuts: IntArray, rows: int, cols: int) -> IntArray:
    """The column cuts that distribute ``x`` like ``y`` (module docstring)."""
    if rows == cols:
        return row_cuts.copy()
    if rows == 0:
        parts = len(row_cuts) - 1
        return (np.arange(parts + 1, dtype=np.int64) * cols) // max(parts, 1)
    return (row_cuts * cols) // rows


@dataclass(frozen=True)
class RowPartition:
    """Rows ``row_cuts[r] .. row_cuts[r+1]-1`` and the ``x`` entries of columns
    ``col_cuts[r] .. col_cuts[r+1]-1`` belong to rank ``r``; ``cost`` and ``nnz`` are each
    rank's schedule cost and nonzeros."""

    row_cuts: IntArray
    col_cuts: IntArray
    cost: IntArray
    nnz: IntArray
    group_size: int = 1

    @property
    def parts(self) -> int:
        return len(self.row_cuts) - 1

    @property
    def rows(self) -> int:
        return int(self.row_cuts[-1])

    @property
    def cols(self) -> int:
        return int(self.col_cuts[-1])

    def rows_of(self, rank: int) -> tuple[int, int]:
        return int(self.row_cuts[rank]), int(self.row_cuts[rank + 1])

    def cols_of(self, rank: int) -> tuple[int, int]:
        return int(self.col_cuts[rank]), int(self.col_cuts[rank + 1])

    @property
    def row_counts(self) -> IntArray:
        return np.diff(self.row_cuts)

    @property
    def col_counts(self) -> IntArray:
        return np.diff(self.col_cuts)

    @property
    def max_owned_cols(self) -> int:
        """The most ``x`` entries one rank owns (an allgather's padded block)."""
        return int(self.col_counts.max()) if self.parts else 0

    def owner_of_cols(self, cols: npt.ArrayLike) -> IntArray:
        """The rank owning each column (an empty rank owns none: the search finds the last
        rank whose range starts at or before the column)."""
        c = np.asarray(cols, dtype=np.int64)
        return (np.searchsorted(self.col_cuts, c, side="right") - 1).astype(np.int64)

    def padded_index(self, cols: npt.ArrayLike) -> IntArray:
        """Each column's position in an allgather of equal blocks of :attr:`max_owned_cols`
        entries a rank (NCCL's allgather sends the same count from every rank)."""
        c = np.asarray(cols, dtype=np.int64)
        owner = self.owner_of_cols(c)
        return owner * self.max_owned_cols + (c - self.col_cuts[owner])

    @property
    def imbalance(self) -> float:
        """Largest rank cost over the mean (1.0 is perfect balance)."""
        mean = float(self.cost.mean()) if self.parts else 0.0
        return float(self.cost.max()) / mean if mean else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "ranks": self.parts,
            "group_size": self.group_size,
            "row_cuts": [int(v) for v in self.row_cuts],
            "col_cuts": [int(v) for v in self.col_cuts],
            "cost": [int(v) for v in self.cost],
            "nnz": [int(v) for v in self.nnz],
            "imbalance": round(self.imbalance, 6),
        }


def partition_rows(A: Any, parts: int, *, group_size: int = 1) -> RowPartition:
    """Partition the rows of ``A`` (anything with ``indptr`` and ``shape``: SciPy CSR) into
    ``parts`` ranks balanced by :func:`row_costs`."""
    check_parts(parts)
    indptr = np.asarray(A.indptr, dtype=np.int64)
    rows, cols = (int(n) for n in A.shape)
    costs = row_costs(indptr, group_size)
    cuts = balanced_cuts(costs, parts)
    prefix = np.concatenate(([0], np.cumsum(costs)))
    return RowPartition(
        row_cuts=cuts,
        col_cuts=column_cuts(cuts, rows, cols),
        cost=np.diff(prefix[cuts]),
        nnz=np.diff(indptr[cuts]),
        group_size=int(group_size),
    )


def uniform_partition(rows: int, cols: int, parts: int) -> RowPartition:
    """Equal row counts, no costs (a reference for tests and the rows-only comparison)."""
    check_parts(parts)
    cuts = (np.arange(parts + 1, dtype=np.int64) * rows) // parts
    zero = np.zeros(parts, dtype=np.int64)
    return RowPartition(cuts, column_cuts(cuts, rows, cols), np.diff(cuts), zero)
