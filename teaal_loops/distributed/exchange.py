"""The exchange of ``x``: pack, post, (compute the diagonal block), wait; two transports.

:class:`Exchange` is the protocol, written once for any array module and any transport:

1. **pack**: the halo copies the entries its peers need into one send buffer
   (``send[i] = x_own[send_index[i]]``, peer by peer); the allgather copies the rank's block of
   ``x`` into its padded slot (NCCL's allgather sends equal counts, so every block is padded
   to the largest rank's columns);
2. **post**: one allgather, or the grouped point-to-point sends and receives of the halo, each
   peer's entries received straight into its run of the ghost buffer (nothing to unpack);
3. the caller computes the diagonal block while the transfer is in flight;
4. **wait**: afterwards the ghost buffer (halo) or the gathered vector (allgather) is the
   operand of the off-diagonal block.

A **transport** moves the buffers. :class:`MpiTransport` (mpi4py, host NumPy buffers:
``Iallgather``, ``Isend``/``Irecv``) is what the CI's ``mpiexec`` tests run;
:class:`teaal_loops.distributed.device.NcclTransport` (CuPy buffers, NCCL on a stream of its
own) is what runs on GPUs. Both post non-blocking and return a :class:`Pending` whose ``wait``
orders the rest after the transfer. For SpMM, ``x`` has one row of ``D`` values a column of
the matrix and every buffer holds rows of ``D`` (the same lists, ``D`` times the bytes).

Buffers are allocated once and reused by every call; a transport orders a call's packing after
everything the caller issued before it (the previous call's off-diagonal product included), so
a buffer is never overwritten while it is read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from teaal_loops.distributed.halo import HaloPlan, HaloShape
from teaal_loops.distributed.partition import RowPartition
from teaal_loops.distributed.shard import ALLGATHER, EXCHANGES, HALO

HALO_TAG = 7103  # MPI tag of the halo's messages


class Pending(Protocol):
    def wait(self) -> None: ...


class Transport(Protocol):
    """Moves buffers between ranks; ``xp`` is the array module its buffers belong to."""

    rank: int
    size: int
    xp: Any

    def ordered(self) -> contextlib.AbstractContextManager[None]:
        """A context in which packing and posting are ordered after the caller's earlier
        work (a CUDA stream of the transport's own; nothing on the host)."""
        ...

    def allgather(self, send: Any, recv: Any) -> Pending: ...

    def exchange(
        self, sends: Sequence[tuple[int, Any]], recvs: Sequence[tuple[int, Any]]
    ) -> Pending: ...


class Done:
    """A transfer that completed when it was posted."""

    def wait(self) -> None:
        return None


class Requests:
    """MPI requests waited on together."""

    def __init__(self, requests: Sequence[Any], waitall: Callable[[Any], Any]) -> None:
        self.requests = list(requests)
        self._waitall = waitall

    def wait(self) -> None:
        if self.requests:
            self._waitall(self.requests)
            self.requests = []


class MpiTransport:
    """Host NumPy buffers over an mpi4py communicator (non-blocking)."""

    def __init__(self, comm: Any) -> None:
        self.xp: Any = np
        self.comm = comm
        self.rank = int(comm.Get_rank())
        self.size = int(comm.Get_size())
        from mpi4py import MPI  # the caller holds an mpi4py communicator: importable

        self._waitall = MPI.Request.Waitall

    @contextlib.contextmanager
    def ordered(self) -> Iterator[None]:
        yield

    def allgather(self, send: Any, recv: Any) -> Pending:
        return Requests([self.comm.Iallgather(send, recv)], self._waitall)

    def exchange(
        self, sends: Sequence[tuple[int, Any]], recvs: Sequence[tuple[int, Any]]
    ) -> Pending:
        reqs = [self.comm.Irecv(buf, source=peer, tag=HALO_TAG) for peer, buf in recvs]
        reqs += [self.comm.Isend(buf, dest=peer, tag=HALO_TAG) for peer, buf in sends]
        return Requests(reqs, self._waitall)


class Exchange:
    """The exchange of one rank's ``x`` block under ``plan`` (module docstring).

    ``width``: None for SpMV (``x`` a vector), ``D`` for SpMM (``x`` a ``cols x D`` matrix in
    row-major order)."""

    def __init__(
        self,
        plan: HaloShape,
        partition: RowPartition,
        kind: str,
        transport: Transport,
        dtype: Any,
        *,
        width: int | None = None,
    ) -> None:
        if kind not in EXCHANGES:
            raise ValueError(f"exchange {kind!r}: expected one of {EXCHANGES}")
        self.plan, self.partition, self.kind = plan, partition, kind
        self.transport = transport
        self.width = width
        xp = transport.xp
        self.owned = partition.col_counts[plan.rank]
        tail = () if width is None else (int(width),)
        if kind == HALO:
            if not isinstance(plan, HaloPlan):
                raise ValueError("a halo exchange needs the index lists of a HaloPlan")
            self.send = xp.empty((plan.sends, *tail), dtype=dtype)
            self.operand = xp.empty((plan.ghosts, *tail), dtype=dtype)
            self._index = xp.asarray(plan.send_index)
            self._sends = [(p, self.send[a:b]) for p, a, b in plan.send_runs()]
            self._recvs = [(p, self.operand[a:b]) for p, a, b in plan.recv_runs()]
        else:
            block = partition.max_owned_cols
            self.send = xp.zeros((block, *tail), dtype=dtype)  # padding stays zero
            self.operand = xp.empty((partition.parts * block, *tail), dtype=dtype)

    def start(self, x_own: Any) -> Pending:
        """Pack ``x_own`` (this rank's block of ``x``) and post the transfer."""
        if self.partition.parts == 1:  # one rank owns all of x: nothing to move
            return Done()
        with self.transport.ordered():
            if self.kind == HALO:
                if not self._sends and not self._recvs:
                    return Done()
                if self.plan.sends:
                    self.transport.xp.take(x_own, self._index, axis=0, out=self.send)
                return self.transport.exchange(self._sends, self._recvs)
            self.send[: self.owned] = x_own
            return self.transport.allgather(self.send, self.operand)


def gather_rows(
    transport: Transport, partition: RowPartition, y_own: Any, *, width: int | None = None
) -> Any:
    """Every rank's rows of ``y`` in row order, on every rank (an allgather of padded blocks:
    for validation, not for the product)."""
    xp = transport.xp
    block = int(partition.row_counts.max()) if partition.parts else 0
    tail = () if width is None else (int(width),)
    send = xp.zeros((block, *tail), dtype=y_own.dtype)
    recv = xp.empty((partition.parts * block, *tail), dtype=y_own.dtype)
    with transport.ordered():
        send[: len(y_own)] = y_own
        pending = transport.allgather(send, recv)
    pending.wait()
    pieces = [recv[r * block : r * block + int(n)] for r, n in enumerate(partition.row_counts)]
    return xp.concatenate(pieces, axis=0)


__all__ = [
    "ALLGATHER",
    "HALO",
    "Done",
    "Exchange",
    "MpiTransport",
    "Pending",
    "Transport",
    "gather_rows",
]
