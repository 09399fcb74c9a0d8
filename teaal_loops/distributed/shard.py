"""One rank's rows of the matrix, split into a diagonal and an off-diagonal block.

PETSc's MPIAIJ split: rank ``r`` holds its rows ``lo .. hi-1``. Nonzeros in the columns it owns
(its ``x`` entries, ``clo .. chi-1``) form the **diagonal block**, ``rows x owned`` with
columns renumbered ``c - clo``: it needs nothing from another rank, so it runs while ``x`` is
exchanged. The others form the **off-diagonal block**, over the *ghost* columns: the distinct
columns outside ``clo .. chi-1`` that the rows touch, sorted, numbered ``0 .. ghosts-1`` in that
order. Because every rank owns a contiguous column range, sorted ghosts come grouped by owner,
in rank order, so the halo exchange receives each peer's entries into one contiguous run of
the ghost buffer (no unpacking).

The off-diagonal block keeps only the rows that have a ghost entry (``offd_rows``, local row
numbers): its product is added into ``y`` at those rows, ``y[offd_rows] += offd @ ghosts``, so
a banded matrix, whose ghosts sit in a few rows at each end of the range, adds a few rows, not
all of them. For an allgather the same block is re-indexed into the gathered vector
(:meth:`Shard.offd_for`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from teaal_loops.distributed.partition import RowPartition
from teaal_loops.matrix import as_csr

IntArray = npt.NDArray[np.int64]
HALO, ALLGATHER = "halo", "allgather"
EXCHANGES = (ALLGATHER, HALO)


class ShardExtent:
    """What every shard answers from its row and column ranges and its two blocks (a
    :class:`Shard` here, or one made on the device: ``distributed.generated``)."""

    rows: tuple[int, int]
    cols: tuple[int, int]
    diag: Any
    offd: Any
    offd_rows: Any
    ghost_cols: Any

    @property
    def local_rows(self) -> int:
        return self.rows[1] - self.rows[0]

    @property
    def owned_cols(self) -> int:
        return self.cols[1] - self.cols[0]

    @property
    def nnz(self) -> int:
        return int(self.diag.nnz + self.offd.nnz)

    @property
    def ghosts(self) -> int:
        return len(self.ghost_cols)


@dataclass(frozen=True)
class Shard(ShardExtent):
    """Rank ``rank``'s rows ``rows[0] .. rows[1]-1`` and owned columns ``cols[0] ..
    cols[1]-1`` (module docstring)."""

    rank: int
    rows: tuple[int, int]
    cols: tuple[int, int]
    diag: sp.csr_matrix  # local rows x owned columns
    offd: sp.csr_matrix  # len(offd_rows) x len(ghost_cols)
    offd_rows: IntArray  # local row of each offd row
    ghost_cols: IntArray  # global column of each ghost, ascending

    def offd_for(self, exchange: str, partition: RowPartition) -> sp.csr_matrix:
        """The off-diagonal block whose columns index the exchanged buffer: the ghost buffer
        (``halo``: itself) or the padded allgather of every rank's ``x`` (``allgather``)."""
        if exchange == HALO:
            return self.offd
        if exchange != ALLGATHER:
            raise ValueError(f"exchange {exchange!r}: expected one of {EXCHANGES}")
        width = partition.gathered_entries
        position = partition.padded_index(self.ghost_cols)
        indices = position[self.offd.indices] if self.offd.nnz else self.offd.indices
        return sp.csr_matrix(
            (self.offd.data, _narrow(indices, width), self.offd.indptr),
            shape=(self.offd.shape[0], width),
        )


def _narrow(index: npt.NDArray[Any], bound: int) -> npt.NDArray[Any]:
    """Indices as int32 where ``bound`` fits (what SciPy and the layouts keep), else int64."""
    return index.astype(np.int32 if bound < 2**31 else np.int64, copy=False)


def shard_matrix(A: Any, partition: RowPartition, rank: int) -> Shard:
    """Rank ``rank``'s :class:`Shard` of ``A`` (anything :func:`teaal_loops.matrix.as_csr`
    takes) under ``partition``."""
    csr = as_csr(A)
    lo, hi = partition.rows_of(rank)
    clo, chi = partition.cols_of(rank)
    start, stop = int(csr.indptr[lo]), int(csr.indptr[hi])
    indptr = csr.indptr[lo : hi + 1].astype(np.int64) - start
    cols = csr.indices[start:stop].astype(np.int64)
    vals = csr.data[start:stop]
    row_of = np.repeat(np.arange(hi - lo, dtype=np.int64), np.diff(indptr))
    own = (cols >= clo) & (cols < chi)
    diag = _csr(row_of[own], cols[own] - clo, vals[own], (hi - lo, chi - clo))
    ghost_cols = np.unique(cols[~own])
    ghost_rows = row_of[~own]
    offd_rows = np.unique(ghost_rows)
    offd = _csr(
        np.searchsorted(offd_rows, ghost_rows),
        np.searchsorted(ghost_cols, cols[~own]),
        vals[~own],
        (len(offd_rows), len(ghost_cols)),
    )
    return Shard(rank, (lo, hi), (clo, chi), diag, offd, offd_rows, ghost_cols)


def _csr(
    rows: IntArray, cols: IntArray, values: npt.NDArray[Any], shape: tuple[int, int]
) -> sp.csr_matrix:
    """A canonical CSR matrix from entries already in row-major order (rows non-decreasing,
    columns ascending within a row), built without sorting."""
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    bound = max(shape[1], len(values))
    out = sp.csr_matrix(
        (values, _narrow(cols, bound), _narrow(indptr, bound)), shape=shape
    )
    out.has_sorted_indices = True
    return out
