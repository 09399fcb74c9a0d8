"""A rank's shard made where it is used: generated on its own device from a row-wise family.

A matrix larger than one GPU cannot be read by every rank (as ``run --distributed -m FILE``
does) or built on one device and split. With a counter-based family
(:mod:`teaal_loops.matrix.rowwise`) every rank makes exactly its rows, on its GPU, in the
diagonal / off-diagonal form of :mod:`teaal_loops.distributed.shard`, without ever holding
anything else:

1. **partition**: every rank computes every row's length (a hash a row, no nonzero made) and
   cuts the rows by the schedule's cost (:func:`partition_family`); the same numbers on
   every rank, so no message is needed;
2. **count** (:class:`ShardBuilder`): one pass over the rank's nonzeros, in chunks, counts a
   row's nonzeros left of its own columns and inside them, and marks the ghost columns in a
   byte map over the columns (sorted ghosts, with no sort);
3. **choose**: the ranks' receive counts (``parts`` integers each) are gathered on the host
   channel and the cost model chooses the exchange (:mod:`teaal_loops.distributed.model`);
4. **fill** (:meth:`ShardBuilder.build`): a second pass makes the same nonzeros again and
   writes each into its place: a row's columns are sorted, and its own columns a contiguous
   range, so its diagonal entries are one run (``k - before[row]``) and its off-diagonal ones
   the entries before and after it. Off-diagonal columns are written in the chosen exchange's
   numbering (ghost order for the halo, the padded gathered vector for the allgather).

Making the nonzeros twice costs a few hash evaluations each; it keeps the peak memory at the
shard plus one chunk's temporaries. Everything is array operations of ``xp`` (NumPy in CI,
CuPy on the GPU). :func:`check_rows` validates a rank's rows of ``y`` against float64 the
same way: the family and the operand are regenerated, so nothing is gathered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from teaal_loops.distributed.errors import DistributedError
from teaal_loops.distributed.partition import RowPartition, partition_lengths, to_host
from teaal_loops.distributed.shard import ALLGATHER, EXCHANGES, HALO, ShardExtent
from teaal_loops.matrix import rowwise
from teaal_loops.matrix.csr_arrays import CsrArrays
from teaal_loops.matrix.limits import check_memory
from teaal_loops.runtime import validation
from teaal_loops.runtime.device_matrix import ensure_fits

DEFAULT_CHUNK = 1 << 25  # nonzeros made at once: about 1 GiB of temporaries on a GPU


def _ensure_room(xp: Any, need: int, what: str) -> None:
    """One line (not an out-of-memory crash) when ``need`` bytes do not fit ``xp``'s device."""
    if xp is np:
        check_memory(need, what)
    else:
        ensure_fits(need, what)


def family_lengths(xp: Any, family: rowwise.Family, lo: int, hi: int,
                   chunk: int = DEFAULT_CHUNK) -> Any:
    """Row lengths of rows ``lo .. hi-1`` (int64), made a chunk of rows at a time."""
    _ensure_room(xp, 3 * 8 * (hi - lo + 1), f"the row lengths of {hi - lo} rows")
    out = xp.empty(hi - lo, dtype=xp.int64)
    for start in range(lo, hi, chunk):
        stop = min(hi, start + chunk)
        out[start - lo : stop - lo] = family.lengths(xp, start, stop)
    return out


def partition_family(xp: Any, family: rowwise.Family, parts: int, *, group_size: int = 1,
                     chunk: int = DEFAULT_CHUNK) -> RowPartition:
    """The row partition by schedule cost, from every row's length (the same on every rank)."""
    lengths = family_lengths(xp, family, 0, family.rows, chunk)
    return partition_lengths(lengths, family.cols, parts, group_size=group_size, xp=xp)


@dataclass(frozen=True)
class GeneratedShard(ShardExtent):
    """A :class:`~teaal_loops.distributed.shard.Shard` made on ``xp``'s device: the blocks are
    :class:`~teaal_loops.matrix.csr_arrays.CsrArrays`, the off-diagonal one already in
    ``exchange``'s numbering."""

    rank: int
    rows: tuple[int, int]
    cols: tuple[int, int]
    diag: CsrArrays
    offd: CsrArrays
    offd_rows: Any  # local row of each off-diagonal row
    ghost_cols: Any  # global column of each ghost, ascending
    exchange: str
    indptr: Any  # offsets of the local rows (both blocks together)

    def offd_for(self, exchange: str, partition: RowPartition) -> CsrArrays:
        if exchange != self.exchange:
            raise ValueError(f"this shard's off-diagonal block was made for the {self.exchange}")
        return self.offd


class ShardBuilder:
    """Rank ``rank``'s rows of ``family`` under ``partition``: counts now, blocks on
    :meth:`build` (module docstring)."""

    def __init__(self, xp: Any, family: rowwise.Family, partition: RowPartition, rank: int,
                 *, chunk: int = DEFAULT_CHUNK) -> None:
        if chunk < 1:
            raise DistributedError(f"chunk {chunk}: must be at least 1")
        self.xp, self.family, self.partition, self.rank = xp, family, partition, rank
        self.chunk = chunk
        self.lo, self.hi = partition.rows_of(rank)
        self.clo, self.chi = partition.cols_of(rank)
        local = self.hi - self.lo
        _ensure_room(xp, 8 * 4 * (local + 1) + family.cols,
                     f"rank {rank}'s row counts and ghost map")
        self.lengths = family_lengths(xp, family, self.lo, self.hi, chunk)
        self.indptr = rowwise.offsets(xp, self.lengths)
        self.nnz = int(self.indptr[-1])
        self.before = xp.zeros(local, dtype=xp.int64)  # nonzeros left of the own columns
        self.inside = xp.zeros(local, dtype=xp.int64)  # nonzeros in them
        self.mark = xp.zeros(family.cols, dtype=xp.uint8)  # the ghost columns
        for row, _, cols in self._nonzeros():
            left = cols < self.clo
            right = cols >= self.chi
            self.before += xp.bincount(row[left], minlength=local)
            self.inside += xp.bincount(row[~(left | right)], minlength=local)
            self.mark[cols[left | right]] = 1
        self.ghost_cols = xp.flatnonzero(self.mark).astype(xp.int64)

    def _nonzeros(self) -> Any:
        """(local row, position in the row, column) of every nonzero, a chunk at a time."""
        xp = self.xp
        for start in range(0, self.nnz, self.chunk):
            row, k = rowwise.entries(xp, self.indptr, start, min(self.nnz, start + self.chunk))
            cols = self.family.columns(xp, row + self.lo, k, self.lengths[row])
            yield row, k, cols

    def build(self, exchange: str, dtype: Any) -> GeneratedShard:
        """The blocks, the off-diagonal one numbered for ``exchange``."""
        if exchange not in EXCHANGES:
            raise ValueError(f"exchange {exchange!r}: expected one of {EXCHANGES}")
        xp, part = self.xp, self.partition
        local = self.hi - self.lo
        outside = self.lengths - self.inside
        offd_rows = xp.flatnonzero(outside).astype(xp.int64)
        diag_ptr = rowwise.offsets(xp, self.inside)
        offd_ptr = rowwise.offsets(xp, outside[offd_rows])
        n_diag, n_offd = int(diag_ptr[-1]), int(offd_ptr[-1])
        value_bytes = np.dtype(dtype).itemsize
        _ensure_room(xp, (n_diag + n_offd) * (4 + value_bytes) + 8 * len(offd_rows)
                     + (4 * self.family.cols if exchange == HALO else 0),
                     f"rank {self.rank}'s shard ({n_diag + n_offd} nonzeros)")
        slot = xp.zeros(local, dtype=xp.int64)
        slot[offd_rows] = xp.arange(len(offd_rows), dtype=xp.int64)
        if exchange == HALO:
            width = len(self.ghost_cols)
            number = xp.cumsum(self.mark, dtype=xp.int32) - 1  # column -> ghost position
        else:
            width = part.gathered_entries
        diag_idx = xp.empty(n_diag, dtype=xp.int32)
        diag_val = xp.empty(n_diag, dtype=dtype)
        offd_idx = xp.empty(n_offd, dtype=xp.int32)
        offd_val = xp.empty(n_offd, dtype=dtype)
        for row, k, cols in self._nonzeros():
            values = self.family.values(xp, row + self.lo, k, dtype)
            own = (cols >= self.clo) & (cols < self.chi)
            r = row[own]
            at = diag_ptr[r] + k[own] - self.before[r]
            diag_idx[at] = (cols[own] - self.clo).astype(xp.int32)
            diag_val[at] = values[own]
            other = ~own
            r, c, ko = row[other], cols[other], k[other]
            at = offd_ptr[slot[r]] + xp.where(c < self.clo, ko, ko - self.inside[r])
            offd_idx[at] = number[c] if exchange == HALO else part.padded_index(c, xp)
            offd_val[at] = values[other]
        return GeneratedShard(
            rank=self.rank,
            rows=(self.lo, self.hi),
            cols=(self.clo, self.chi),
            diag=CsrArrays(diag_ptr, diag_idx, diag_val, (local, self.chi - self.clo)),
            offd=CsrArrays(offd_ptr, offd_idx, offd_val, (len(offd_rows), width)),
            offd_rows=offd_rows,
            ghost_cols=self.ghost_cols,
            exchange=exchange,
            indptr=self.indptr,
        )


@dataclass(frozen=True)
class RowCheck:
    """One rank's rows of the output against the float64 product (``validation``'s
    criteria; the counts are of output elements: a row holds ``width`` of them in SpMM)."""

    rows: int
    naive_mismatches: int  # --validate: |y - ref| > atol + rtol |ref|
    overruns: int  # --rigorous: beyond the Wilkinson bound of the row
    max_abs_error: float
    max_rel_error: float

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "naive_mismatches": self.naive_mismatches,
                "overruns": self.overruns, "max_abs_error": self.max_abs_error,
                "max_rel_error": self.max_rel_error}


def check_rows(xp: Any, family: rowwise.Family, shard: GeneratedShard, x_seed: int,
               y_own: Any, dtype: Any, *, width: int | None = None,
               chunk: int = DEFAULT_CHUNK) -> RowCheck:
    """This rank's rows of ``y = A @ x`` (SpMV; ``width`` None) or ``Z = A @ B`` (SpMM, ``B``
    of ``width`` columns) against the product accumulated in float64, with the operand (the
    counter-based one of ``x_seed``, rounded to ``dtype`` as the kernel read it) and the rows
    regenerated here: ``Errors`` and the Wilkinson bound of
    :mod:`teaal_loops.runtime.validation`, per output element."""
    local = shard.local_rows
    w = 1 if width is None else width
    _ensure_room(xp, 12 * family.cols * w + 3 * 8 * local * w, f"rank {shard.rank}'s float64 check")
    x64 = rowwise.operand(xp, x_seed, 0, family.cols, dtype, width).astype(xp.float64)
    x64 = x64.reshape(family.cols, w)
    ref = xp.zeros(local * w, dtype=xp.float64)
    magnitude = xp.zeros(local * w, dtype=xp.float64)
    nnz = int(shard.indptr[-1])
    lo = shard.rows[0]
    lengths = xp.diff(shard.indptr)
    step = max(1, chunk // w)  # products of a chunk: step x w values
    columns = xp.arange(w, dtype=xp.int64)
    for start in range(0, nnz, step):
        row, k = rowwise.entries(xp, shard.indptr, start, min(nnz, start + step))
        c = family.columns(xp, row + lo, k, lengths[row])
        values = family.values(xp, row + lo, k, dtype).astype(xp.float64)
        products = (values[:, None] * x64[c]).ravel()
        slot = (row[:, None] * w + columns).ravel()
        ref += xp.bincount(slot, weights=products, minlength=local * w)
        magnitude += xp.bincount(slot, weights=xp.abs(products), minlength=local * w)
    u = validation.UNIT_ROUNDOFF[np.dtype(dtype).name]
    terms = xp.repeat(lengths.astype(xp.float64), w)
    bound = xp.maximum(validation.BOUND_FLOOR, validation.WILKINSON_K * terms * u * magnitude)
    # The verdicts are runtime.validation's, on this rank's rows only (nothing is gathered).
    y64 = to_host(y_own.astype(xp.float64).ravel())
    ref64, bound64 = to_host(ref), to_host(bound)
    max_abs, max_rel = validation.max_errors(y64, ref64)
    return RowCheck(
        rows=local,
        naive_mismatches=validation.count_errors(y64, ref64),
        overruns=validation.overruns(y64, ref64, bound64),
        max_abs_error=max_abs,
        max_rel_error=max_rel,
    )

__all__ = [
    "ALLGATHER",
    "DEFAULT_CHUNK",
    "HALO",
    "GeneratedShard",
    "RowCheck",
    "ShardBuilder",
    "check_rows",
    "family_lengths",
    "partition_family",
]
