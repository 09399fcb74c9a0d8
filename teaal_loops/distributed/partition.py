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
from teaal_loops.matrix.rowwise import offsets
from teaal_loops.types import INT32_MAX

IntArray = npt.NDArray[np.int64]
MAX_PARTS = 4096  # ranks a partition may have (bounds every per-rank table)


def row_costs(indptr: npt.ArrayLike, group_size: int = 1) -> IntArray:
    """The schedule's cost of every row: ``G * ceil(n / G) + 1`` for a row of ``n`` nonzeros
    (module docstring)."""
    ptr = np.asarray(indptr, dtype=np.int64)
    return costs_of_lengths(np.diff(ptr), group_size)


def costs_of_lengths(lengths: Any, group_size: int = 1, xp: Any = np) -> Any:
    """:func:`row_costs` from the rows' nonzero counts (on ``xp``'s device)."""
    if group_size < 1:
        raise DistributedError(f"group size {group_size}: must be at least 1")
    n = xp.asarray(lengths, dtype=xp.int64)
    if group_size > 1:
        n = -(-n // group_size) * group_size
    return n + 1


def balanced_cuts(costs: npt.ArrayLike, parts: int, xp: Any = np) -> IntArray:
    """``parts + 1`` row boundaries (0 first, the row count last, non-decreasing) that cut
    ``costs`` into ``parts`` contiguous runs of nearly equal sums: boundary ``k`` is the row
    boundary whose prefix sum is nearest to ``k / parts`` of the total. ``costs`` may live on
    a GPU (``xp`` CuPy): only the ``parts`` searched boundaries come back to the host."""
    check_parts(parts)
    prefix = offsets(xp, xp.asarray(costs, dtype=xp.int64))
    return cuts_on_prefix(prefix, parts, xp)


def cuts_on_prefix(prefix: Any, parts: int, xp: Any = np) -> IntArray:
    """:func:`balanced_cuts` from 0 and the costs' running sums (``rowwise.offsets``)."""
    rows = len(prefix) - 1
    total = int(prefix[-1])
    targets = np.arange(1, parts, dtype=np.float64) * (total / parts)
    # The first prefix at or past a target is the first at or past its ceiling (the prefix
    # sums are integers): searched as int64, as the prefix is (CuPy does not mix the types).
    above = xp.asarray(np.ceil(targets).astype(np.int64))
    hi = xp.searchsorted(prefix, above, side="left").clip(0, rows)
    lo = (hi - 1).clip(0, rows)
    at_hi, at_lo = to_host(prefix[hi]), to_host(prefix[lo])
    hi, lo = to_host(hi), to_host(lo)
    nearer_lo = np.abs(at_lo - targets) <= np.abs(at_hi - targets)
    inner = np.where(nearer_lo, lo, hi)
    cuts = np.concatenate(([0], np.maximum.accumulate(inner) if len(inner) else inner, [rows]))
    return cuts.astype(np.int64)


def to_host(a: Any) -> Any:
    """A NumPy array of ``a`` (a CuPy array is copied from its device)."""
    return a.get() if hasattr(a, "get") else np.asarray(a)


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

    def owner_of_cols(self, cols: npt.ArrayLike, xp: Any = np) -> IntArray:
        """The rank owning each column (an empty rank owns none: the search finds the last
        rank whose range starts at or before the column); ``cols`` on ``xp``'s device."""
        c = xp.asarray(cols, dtype=xp.int64)
        cuts = xp.asarray(self.col_cuts)
        return (xp.searchsorted(cuts, c, side="right") - 1).astype(xp.int64)

    @property
    def gathered_entries(self) -> int:
        """The allgather's padded ``x``: every rank's block padded to :attr:`max_owned_cols`
        (NCCL's allgather sends the same count from every rank)."""
        return self.parts * self.max_owned_cols

    def padded_index(self, cols: npt.ArrayLike, xp: Any = np) -> IntArray:
        """Each column's position in the allgather's padded ``x`` (on ``xp``'s device); one
        line where that vector passes what the kernels' 32-bit column indices address."""
        if self.gathered_entries > INT32_MAX:  # the model never chooses it (choose_exchange)
            raise DistributedError(f"the allgather's padded x of {self.gathered_entries} "
                                   "entries passes 32-bit column indices: use the halo")
        c = xp.asarray(cols, dtype=xp.int64)
        owner = self.owner_of_cols(c, xp)
        return owner * self.max_owned_cols + (c - xp.asarray(self.col_cuts)[owner])

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
    indptr = np.asarray(A.indptr, dtype=np.int64)
    return partition_lengths(np.diff(indptr), int(A.shape[1]), parts, group_size=group_size)


def partition_lengths(
    lengths: Any, cols: int, parts: int, *, group_size: int = 1, xp: Any = np
) -> RowPartition:
    """:func:`partition_rows` from the rows' nonzero counts alone (which may live on a GPU:
    a distributed run that generates its matrix knows every row's length before any row
    exists)."""
    check_parts(parts)
    n = xp.asarray(lengths, dtype=xp.int64)
    prefix = offsets(xp, costs_of_lengths(n, group_size, xp))
    cuts = cuts_on_prefix(prefix, parts, xp)
    nnz_prefix = offsets(xp, n)
    rows = len(n)
    cuts_dev = xp.asarray(cuts)
    return RowPartition(
        row_cuts=cuts,
        col_cuts=column_cuts(cuts, rows, cols),
        cost=np.diff(to_host(prefix[cuts_dev])),
        nnz=np.diff(to_host(nnz_prefix[cuts_dev])),
        group_size=int(group_size),
    )


def uniform_partition(rows: int, cols: int, parts: int) -> RowPartition:
    """Equal row counts, no costs (a reference for tests and the rows-only comparison)."""
    check_parts(parts)
    cuts = (np.arange(parts + 1, dtype=np.int64) * rows) // parts
    zero = np.zeros(parts, dtype=np.int64)
    return RowPartition(cuts, column_cuts(cuts, rows, cols), np.diff(cuts), zero)
