"""Halo index sets: which ``x`` entries each rank sends to and receives from each other rank.

Rank ``q`` needs its ghost columns (:mod:`teaal_loops.distributed.shard`); each ghost belongs
to the rank that owns its column. For every rank the plan lists

* **receives**: the peers it needs entries from, ascending, and where each peer's entries land
  in its ghost buffer (``recv_offsets``: peer ``i``'s run is ``recv_offsets[i] ..
  recv_offsets[i+1]-1``; the ghosts are sorted, so each peer's run is contiguous and in the
  order the peer sends it);
* **sends**: the peers that need entries from it, ascending, and the positions in its own
  ``x`` block of what each needs (``send_index[send_offsets[i] .. send_offsets[i+1]-1]``,
  ascending: the peer's ghosts owned here, minus this rank's first column).

Every send list of rank ``r`` to ``q`` equals, entry for entry, the receive run of ``q`` from
``r`` (:func:`plans_from_ghosts` builds them from the same sorted arrays; the MPI protocol test
builds the send side by asking the peers instead, and must agree). One transfer a peer pair a
direction, no unpacking: the ghost buffer is the receive buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from teaal_loops.distributed.errors import DistributedError
from teaal_loops.distributed.partition import RowPartition, to_host
from teaal_loops.matrix import as_csr

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class HaloPlan:
    """One rank's send and receive lists (module docstring)."""

    rank: int
    parts: int
    recv_peers: IntArray
    recv_offsets: IntArray  # len(recv_peers) + 1, into the ghost buffer
    send_peers: IntArray
    send_offsets: IntArray  # len(send_peers) + 1, into send_index
    send_index: IntArray  # positions in this rank's own x block

    @property
    def ghosts(self) -> int:
        return int(self.recv_offsets[-1])

    @property
    def sends(self) -> int:
        return int(self.send_offsets[-1])

    def recv_runs(self) -> list[tuple[int, int, int]]:
        """(peer, start, stop) of every receive, in peer order."""
        o = self.recv_offsets
        return [(int(p), int(o[i]), int(o[i + 1])) for i, p in enumerate(self.recv_peers)]

    def send_runs(self) -> list[tuple[int, int, int]]:
        """(peer, start, stop) into :attr:`send_index` of every send, in peer order."""
        o = self.send_offsets
        return [(int(p), int(o[i]), int(o[i + 1])) for i, p in enumerate(self.send_peers)]

    def same_as(self, other: HaloPlan) -> bool:
        """Entry-for-entry equality (dataclass equality would compare arrays elementwise)."""
        return (
            (self.rank, self.parts) == (other.rank, other.parts)
            and all(
                np.array_equal(getattr(self, name), getattr(other, name))
                for name in ("recv_peers", "recv_offsets", "send_peers", "send_offsets",
                             "send_index")
            )
        )


class HaloShape(Protocol):
    """What the cost model and the report read of a rank's halo: counts, peers and runs
    (a :class:`HaloPlan`, or :class:`HaloCounts` before any index list exists)."""

    @property
    def rank(self) -> int: ...

    @property
    def ghosts(self) -> int: ...

    @property
    def sends(self) -> int: ...

    @property
    def recv_peers(self) -> IntArray: ...

    @property
    def send_peers(self) -> IntArray: ...

    def recv_runs(self) -> list[tuple[int, int, int]]: ...

    def send_runs(self) -> list[tuple[int, int, int]]: ...


@dataclass(frozen=True)
class HaloCounts:
    """One rank's halo as counts alone: the entries it receives from and sends to each rank.

    A rank that generated its own rows knows its ghosts and nothing of the others'; one
    host allgather of every rank's receive counts (``parts`` integers a rank) gives every
    rank everyone's counts, which is all the cost model needs to choose the exchange. The
    index lists are sent only if the halo is chosen (:func:`plan_over_transport`)."""

    rank: int
    parts: int
    recv_counts: IntArray  # entries received from each rank
    send_counts: IntArray  # entries sent to each rank

    @property
    def ghosts(self) -> int:
        return int(self.recv_counts.sum())

    @property
    def sends(self) -> int:
        return int(self.send_counts.sum())

    @property
    def recv_peers(self) -> IntArray:
        return np.flatnonzero(self.recv_counts).astype(np.int64)

    @property
    def send_peers(self) -> IntArray:
        return np.flatnonzero(self.send_counts).astype(np.int64)

    @property
    def recv_offsets(self) -> IntArray:
        return _offsets(self.recv_counts[self.recv_peers])

    @property
    def send_offsets(self) -> IntArray:
        return _offsets(self.send_counts[self.send_peers])

    def recv_runs(self) -> list[tuple[int, int, int]]:
        return _runs(self.recv_peers, self.recv_offsets)

    def send_runs(self) -> list[tuple[int, int, int]]:
        return _runs(self.send_peers, self.send_offsets)


def _offsets(counts: IntArray) -> IntArray:
    return np.concatenate(([0], np.cumsum(counts))).astype(np.int64)


def _runs(peers: IntArray, offsets: IntArray) -> list[tuple[int, int, int]]:
    return [(int(p), int(offsets[i]), int(offsets[i + 1])) for i, p in enumerate(peers)]


def counts_of_all(received: Sequence[Sequence[int]]) -> list[HaloCounts]:
    """Every rank's :class:`HaloCounts` from every rank's receive counts (``received[q][p]``:
    entries rank ``q`` receives from rank ``p``, which is what ``p`` sends to ``q``)."""
    try:
        table = np.asarray(received, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):  # ragged, or not integers
        raise DistributedError("the ranks' halo counts are malformed") from None
    parts = len(table)
    if table.shape != (parts, parts) or (table < 0).any() or np.diag(table).any():
        raise DistributedError("the ranks' halo counts are malformed")
    return [HaloCounts(r, parts, table[r].copy(), table[:, r].copy()) for r in range(parts)]


def receive_counts(ghosts: Any, partition: RowPartition, xp: Any = np) -> list[int]:
    """Entries a rank with these sorted ghost columns (on ``xp``'s device) receives from
    each rank."""
    cuts = xp.searchsorted(ghosts, xp.asarray(partition.col_cuts), side="left")
    return [int(v) for v in to_host(cuts[1:] - cuts[:-1])]


def plan_over_transport(counts: HaloCounts, ghosts: Any, partition: RowPartition,
                        transport: Any) -> HaloPlan:
    """This rank's :class:`HaloPlan` when it holds only its own rows: each rank sends every
    owner the columns it needs (its ghost runs, int64) through ``transport`` (MPI or NCCL;
    the counts are known, so each receive has its size), and subtracts its first column
    from what it was asked for. The index lists stay in the transport's memory."""
    xp = transport.xp
    ghosts = xp.asarray(ghosts, dtype=xp.int64)
    asked = xp.empty(counts.sends, dtype=xp.int64)
    sends = [(p, ghosts[a:b]) for p, a, b in counts.recv_runs()]
    recvs = [(q, asked[a:b]) for q, a, b in counts.send_runs()]
    if sends or recvs:
        with transport.ordered():
            pending = transport.exchange(sends, recvs)
        pending.wait()
    first, stop = partition.cols_of(counts.rank)
    index = asked - first
    if counts.sends and bool(((index < 0) | (index >= stop - first)).any()):
        raise DistributedError(f"a rank asked rank {counts.rank} for columns it does not own")
    return HaloPlan(counts.rank, counts.parts, counts.recv_peers, counts.recv_offsets,
                    counts.send_peers, counts.send_offsets, index)


def ghost_columns(A: Any, partition: RowPartition, rank: int) -> IntArray:
    """The sorted distinct columns outside ``rank``'s own that its rows touch."""
    csr = as_csr(A)
    lo, hi = partition.rows_of(rank)
    clo, chi = partition.cols_of(rank)
    cols = csr.indices[int(csr.indptr[lo]) : int(csr.indptr[hi])].astype(np.int64)
    return np.unique(cols[(cols < clo) | (cols >= chi)])


def receive_side(ghosts: npt.ArrayLike, partition: RowPartition) -> tuple[IntArray, IntArray]:
    """(peers, offsets) of a rank's receives from its sorted ghost columns."""
    g = np.asarray(ghosts, dtype=np.int64)
    counts = np.bincount(partition.owner_of_cols(g), minlength=partition.parts)
    peers = np.flatnonzero(counts).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts[peers]))).astype(np.int64)
    return peers, offsets


def plans_from_ghosts(ghosts: Sequence[npt.ArrayLike], partition: RowPartition) -> list[HaloPlan]:
    """Every rank's :class:`HaloPlan` from every rank's sorted ghost columns."""
    parts = partition.parts
    receives = [receive_side(g, partition) for g in ghosts]
    outgoing: list[list[tuple[int, IntArray]]] = [[] for _ in range(parts)]
    for q, g in enumerate(ghosts):  # q receives from p exactly what p sends to q
        g = np.asarray(g, dtype=np.int64)
        peers, offsets = receives[q]
        for i, p in enumerate(peers):
            run = g[offsets[i] : offsets[i + 1]] - partition.col_cuts[p]
            outgoing[int(p)].append((q, run))
    plans = []
    for r in range(parts):
        plans.append(_plan(r, parts, receives[r], outgoing[r]))
    return plans


def _plan(
    rank: int, parts: int, receive: tuple[IntArray, IntArray], sends: list[tuple[int, IntArray]]
) -> HaloPlan:
    sends = sorted(sends, key=lambda item: item[0])
    counts = [len(run) for _, run in sends]
    empty = np.zeros(0, dtype=np.int64)
    return HaloPlan(
        rank=rank,
        parts=parts,
        recv_peers=receive[0],
        recv_offsets=receive[1],
        send_peers=np.array([q for q, _ in sends], dtype=np.int64),
        send_offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
        send_index=np.concatenate([run for _, run in sends]) if sends else empty,
    )


def plan_all(A: Any, partition: RowPartition) -> list[HaloPlan]:
    """Every rank's plan from the whole matrix (one pass over its nonzeros, a rank at a
    time): what ``explain --ranks`` reports and what each process of a run computes for
    itself when it holds the whole matrix."""
    csr = as_csr(A)
    return plans_from_ghosts(
        [ghost_columns(csr, partition, r) for r in range(partition.parts)], partition
    )


@dataclass(frozen=True)
class HaloVolume:
    """Entries moved by one exchange of ``x`` (one column of ``x``: multiply by the dense
    rank's size for SpMM), per rank, for both exchanges."""

    ghosts: IntArray  # halo: entries each rank receives
    sends: IntArray  # halo: entries each rank sends
    recv_peers: IntArray  # halo: peers each rank receives from
    send_peers: IntArray
    allgather_block: int  # allgather: entries each rank contributes (padded to the largest)
    parts: int

    @property
    def allgather_recv(self) -> int:
        """Entries each rank receives in the allgather (every other rank's padded block)."""
        return (self.parts - 1) * self.allgather_block

    @property
    def halo_total(self) -> int:
        return int(self.ghosts.sum())

    @property
    def allgather_total(self) -> int:
        return self.parts * self.allgather_recv

    def as_dict(self) -> dict[str, Any]:
        return {
            "halo_recv_entries": [int(v) for v in self.ghosts],
            "halo_send_entries": [int(v) for v in self.sends],
            "halo_recv_peers": [int(v) for v in self.recv_peers],
            "halo_send_peers": [int(v) for v in self.send_peers],
            "halo_total_entries": self.halo_total,
            "allgather_block_entries": self.allgather_block,
            "allgather_recv_entries_per_rank": self.allgather_recv,
            "allgather_total_entries": self.allgather_total,
        }


def volumes(plans: Sequence[HaloShape], partition: RowPartition) -> HaloVolume:
    def column(fn: Any) -> IntArray:
        return np.array([fn(p) for p in plans], dtype=np.int64)

    return HaloVolume(
        ghosts=column(lambda p: p.ghosts),
        sends=column(lambda p: p.sends),
        recv_peers=column(lambda p: len(p.recv_peers)),
        send_peers=column(lambda p: len(p.send_peers)),
        allgather_block=partition.max_owned_cols,
        parts=partition.parts,
    )


def plan_by_asking(
    rank: int, ghosts: npt.ArrayLike, partition: RowPartition, alltoall: Any
) -> HaloPlan:
    """This rank's plan when it holds only its own rows: it tells every owner which of its
    columns it needs (``alltoall``: a list of one object a rank in, the list each rank sent
    here out, e.g. mpi4py's ``comm.alltoall``), and sends each asker what it asked for."""
    g = np.asarray(ghosts, dtype=np.int64)
    peers, offsets = receive_side(g, partition)
    requests: list[Any] = [[] for _ in range(partition.parts)]
    for i, p in enumerate(peers):
        requests[int(p)] = g[offsets[i] : offsets[i + 1]].tolist()
    asked = alltoall(requests)
    first, owned = partition.cols_of(rank)
    sends = []
    for q, cols in enumerate(asked):
        run = np.asarray(cols, dtype=np.int64)
        if len(run) and (run.min() < first or run.max() >= owned):
            raise DistributedError(f"rank {q} asked rank {rank} for columns it does not own")
        if len(run):
            sends.append((q, run - first))
    return _plan(rank, partition.parts, (peers, offsets), sends)
