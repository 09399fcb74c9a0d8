"""The GPU side: NCCL through CuPy (``cupy.cuda.nccl``) and the generated kernel's two blocks.

* :func:`nccl_communicator`: rank 0 asks NCCL for a unique id, the host channel (MPI or the
  launcher's file store) broadcasts it, every rank joins with ``ncclCommInitRank`` on its own
  GPU. ``NCCL_NVLS_ENABLE=0`` is set before NCCL reads its environment.
* :class:`NcclTransport`: the exchange's transfers on a CUDA stream of their own, at the
  highest priority, so the diagonal block (on the caller's stream) runs while they are in
  flight. Entering :meth:`~NcclTransport.ordered` makes that stream wait for everything the
  caller queued before (the ``x`` it will send, the previous call's reads of the buffers); a
  posted transfer records an event that :meth:`Pending.wait` makes the caller's stream wait
  for, without blocking the host.
* :class:`KernelBlocks`: both blocks run the spec's generated kernel
  (:class:`teaal_loops.runtime.Kernel`), the off-diagonal one into a buffer of its rows that one
  add folds into ``y`` (:mod:`teaal_loops.distributed.operator` says why).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from teaal_loops.distributed.errors import DistributedError
from teaal_loops.distributed.shard import ShardExtent
from teaal_loops.distributed.world import World, disable_nvls
from teaal_loops.runtime import Kernel, backend

UNIQUE_ID_BYTES = 128
NCCL_TYPES = {"float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64", "int64": "NCCL_INT64"}
# The transport's stream runs at the highest priority (CUDA clamps -5 to the device's range):
# NCCL's kernels are a few blocks, and at equal priority the diagonal block's kernel, queued
# right after them, takes every SM until its blocks drain, so the exchange did not overlap it.
# Measured on one H200 with a few-block copy standing in for NCCL's kernel beside the SpMV of
# half the 1e9 power-law matrix: 10% of the copy hidden at default priority, 82% at this one.
TRANSPORT_PRIORITY = -5
NCCL_HINT = "CuPy finds NCCL in the nvidia-nccl-cu13 wheel (nvidia-nccl-cu12 for CUDA 12)"


def nccl_module() -> Any:
    """``cupy.cuda.nccl``, or one DistributedError line saying what is missing."""
    backend.cupy_module()  # no GPU or no CuPy: its own one line first
    try:
        from cupy.cuda import nccl
    except (ImportError, OSError) as exc:
        raise DistributedError(f"CuPy's NCCL binding is unavailable ({exc}); {NCCL_HINT}") from None
    if not getattr(nccl, "available", True):
        raise DistributedError(f"CuPy was built without NCCL; {NCCL_HINT}")
    return nccl


def select_device(world: World) -> Any:
    """Make ``world.device`` (modulo the visible GPUs) this process's CuPy device."""
    cupy = backend.cupy_module()
    count = int(cupy.cuda.runtime.getDeviceCount())
    device = cupy.cuda.Device(world.device % count)
    device.use()
    return device


def check_unique_id(value: Any) -> tuple[int, ...]:
    """The broadcast unique id: exactly 128 bytes (CuPy gives C ``char`` values: signed on
    x86-64, unsigned on ARM), else a DistributedError."""
    if (
        not isinstance(value, (list, tuple))
        or len(value) != UNIQUE_ID_BYTES
        or not all(isinstance(v, int) and -128 <= v <= 255 for v in value)
    ):
        raise DistributedError("the NCCL unique id broadcast by rank 0 is malformed")
    return tuple(value)


def nccl_communicator(world: World) -> Any:
    """This rank's ``NcclCommunicator`` (module docstring); call on every rank together."""
    disable_nvls()
    nccl = nccl_module()
    select_device(world)
    mine = list(nccl.get_unique_id()) if world.rank == 0 else None
    uid = check_unique_id(world.channel.bcast(mine))
    try:  # CuPy 14 takes the id as bytes; earlier CuPy as the tuple of C chars it gave
        return nccl.NcclCommunicator(world.size, bytes(v & 0xFF for v in uid), world.rank)
    except TypeError:
        return nccl.NcclCommunicator(world.size, uid, world.rank)


class StreamPending:
    """A transfer posted on the transport's stream: ``wait`` orders the caller's current
    stream after it (no host synchronisation)."""

    def __init__(self, event: Any, cupy: Any) -> None:
        self.event = event
        self._cupy = cupy

    def wait(self) -> None:
        self._cupy.cuda.get_current_stream().wait_event(self.event)


class NcclTransport:
    """CuPy device buffers over NCCL, on a non-blocking stream of its own (module
    docstring)."""

    def __init__(self, comm: Any, dtype: Any) -> None:
        self.cupy = backend.cupy_module()
        self.nccl = nccl_module()
        self.xp = self.cupy
        self.comm = comm
        self.rank = int(comm.rank_id())
        self.size = int(comm.size())
        self.stream = self.cupy.cuda.Stream(non_blocking=True, priority=TRANSPORT_PRIORITY)
        self.datatype = self._datatype(dtype)

    def _datatype(self, dtype: Any) -> Any:
        """NCCL's type of ``dtype``: the values (f32, f64) and the halo's index lists (int64)."""
        name = NCCL_TYPES.get(np.dtype(dtype).name)
        if name is None:
            raise DistributedError(f"NCCL exchange of {np.dtype(dtype).name}: f32 or f64 only")
        return getattr(self.nccl, name)

    @contextlib.contextmanager
    def ordered(self) -> Iterator[None]:
        caller = self.cupy.cuda.get_current_stream()
        ready = caller.record()
        self.stream.wait_event(ready)
        with self.stream:
            yield

    def _posted(self) -> StreamPending:
        return StreamPending(self.stream.record(), self.cupy)

    def allgather(self, send: Any, recv: Any) -> StreamPending:
        self.comm.allGather(send.data.ptr, recv.data.ptr, send.size, self.datatype,
                            self.stream.ptr)
        return self._posted()

    def exchange(
        self, sends: Sequence[tuple[int, Any]], recvs: Sequence[tuple[int, Any]]
    ) -> StreamPending:
        self.nccl.groupStart()
        try:
            for peer, buf in recvs:
                self.comm.recv(buf.data.ptr, buf.size, self._datatype(buf.dtype), peer,
                               self.stream.ptr)
            for peer, buf in sends:
                self.comm.send(buf.data.ptr, buf.size, self._datatype(buf.dtype), peer,
                               self.stream.ptr)
        finally:
            self.nccl.groupEnd()
        return self._posted()


class KernelBlocks:
    """The diagonal and off-diagonal blocks of one shard, each run by ``kernel`` (SpMV or
    SpMM), on the caller's current stream."""

    def __init__(self, kernel: Kernel, shard: ShardExtent, offd: Any,
                 width: int | None) -> None:
        cupy = backend.cupy_module()
        self.kernel = kernel
        self.width = width
        self.dense = kernel.form != "spmv"
        self._diag = kernel.prepare(shard.diag) if shard.diag.nnz else None
        self._offd = kernel.prepare(offd) if offd.nnz else None
        self.has_offd = self._offd is not None
        self.offd_rows = cupy.asarray(shard.offd_rows, dtype=cupy.int64)
        shape = (len(shard.offd_rows),) if width is None else (len(shard.offd_rows), width)
        self.tmp = cupy.empty(shape, dtype=kernel.dtype)

    def _product(self, prepared: Any, x: Any, out: Any) -> None:
        if self.dense:
            self.kernel.call_dense(prepared, (x,), out=out)
        else:
            self.kernel.launch_into(prepared, x, out)

    def diag(self, x_own: Any, y_own: Any) -> None:
        if self._diag is None:
            y_own.fill(0)
        else:
            self._product(self._diag, x_own, y_own)

    def offd_add(self, operand: Any, y_own: Any) -> None:
        if self._offd is None:
            return
        self._product(self._offd, operand, self.tmp)
        width = 1 if self.width is None else self.width
        add_rows()(self.tmp, self.offd_rows, width, y_own, size=self.tmp.size)


@functools.cache
def add_rows() -> Any:
    """``y[rows[i]] += tmp[i]`` (rows of ``width`` values) in one kernel: CuPy's
    ``y[rows] += tmp`` takes a gather, an add and a scatter, three launches that the
    product waits for after the exchange."""
    cupy = backend.cupy_module()
    return cupy.ElementwiseKernel(
        "raw T tmp, raw int64 rows, int64 width", "raw T y",
        "y[rows[i / width] * width + i % width] += tmp[i];",
        "teaal_add_rows",
    )
