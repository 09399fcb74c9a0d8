"""Who the processes are and how they talk on the host: MPI, the launcher's file store, or one
process alone.

A distributed run needs a little host communication besides NCCL: the NCCL unique id goes from
rank 0 to everyone before NCCL exists, and small reports (timings) come back to rank 0. Three
:class:`HostChannel` implementations serve it:

* :class:`MpiChannel` under ``mpiexec`` (mpi4py; any MPI, e.g. the ``mpich`` wheel): MPI's own
  broadcast and gather. Multi-node runs start this way.
* :class:`FileChannel` under ``teaal-loops launch`` (one host, no MPI): JSON files in a private
  directory the launcher creates (mode 0700) and removes; a message is written to a temporary
  name and renamed, so a reader never sees half of it; readers poll with a deadline.
* :class:`SoloChannel`: one process (a run with no launcher), every call trivial.

:func:`detect_world` reads the environment: the launcher's ``TEAAL_LOOPS_*`` variables, else an
MPI launcher's (``PMI_RANK``/``PMI_SIZE`` of MPICH and Intel MPI, ``OMPI_COMM_WORLD_*`` of Open
MPI, ``PMIX_RANK``), else one process. It always sets ``NCCL_NVLS_ENABLE=0`` in this process's
environment before NCCL can read it: NVLink multicast (NVLS) stays off on every machine this
project uses, whatever the caller's environment said.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from teaal_loops.distributed.errors import DistributedError

ENV_RANK = "TEAAL_LOOPS_RANK"
ENV_SIZE = "TEAAL_LOOPS_WORLD_SIZE"
ENV_LOCAL_RANK = "TEAAL_LOOPS_LOCAL_RANK"
ENV_LOCAL_SIZE = "TEAAL_LOOPS_LOCAL_SIZE"
ENV_DEVICE = "TEAAL_LOOPS_DEVICE"
ENV_STORE = "TEAAL_LOOPS_STORE"
ENV_TIMEOUT = "TEAAL_LOOPS_STORE_TIMEOUT"
NVLS = "NCCL_NVLS_ENABLE"
MPI_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK")
MPI_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
MAX_MESSAGE_BYTES = 1 << 24  # a host message (ids, timings, reports) is small
DEFAULT_TIMEOUT_S = 600.0
INSTALL_HINT = "pip install '.[distributed]' (mpi4py and the mpich wheel)"


def disable_nvls(environ: Any = None) -> None:
    """``NCCL_NVLS_ENABLE=0`` in ``environ`` (default: this process's environment)."""
    (os.environ if environ is None else environ)[NVLS] = "0"


class HostChannel(Protocol):
    """Small JSON-able messages among the ranks of one run."""

    rank: int
    size: int

    def bcast(self, value: Any) -> Any: ...

    def allgather(self, value: Any) -> list[Any]: ...

    def barrier(self) -> None: ...


class SoloChannel:
    rank, size = 0, 1

    def bcast(self, value: Any) -> Any:
        return value

    def allgather(self, value: Any) -> list[Any]:
        return [value]

    def barrier(self) -> None:
        return None


class MpiChannel:
    """Host messages over an mpi4py communicator (lower-case, pickled: small objects)."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.rank = int(comm.Get_rank())
        self.size = int(comm.Get_size())

    def bcast(self, value: Any) -> Any:
        return self.comm.bcast(value, root=0)

    def allgather(self, value: Any) -> list[Any]:
        return list(self.comm.allgather(value))

    def barrier(self) -> None:
        self.comm.Barrier()


class FileChannel:
    """Host messages as JSON files in ``directory`` (module docstring)."""

    def __init__(
        self, directory: str | Path, rank: int, size: int, *, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.directory = Path(directory)
        self.rank, self.size = rank, size
        self.timeout_s = timeout_s
        self._sequence = 0

    def _tag(self) -> str:
        self._sequence += 1
        return f"m{self._sequence}"

    def _path(self, tag: str, rank: int) -> Path:
        return self.directory / f"{tag}-{rank}.json"

    def _put(self, tag: str, value: Any) -> None:
        final = self._path(tag, self.rank)
        partial = final.with_suffix(f".tmp{os.getpid()}")
        partial.write_text(json.dumps(value))
        os.replace(partial, final)

    def _get(self, tag: str, rank: int) -> Any:
        path = self._path(tag, rank)
        deadline = time.monotonic() + self.timeout_s
        pause = 0.001
        while not path.exists():
            if time.monotonic() > deadline:
                raise DistributedError(
                    f"rank {rank} did not answer within {self.timeout_s:.0f} s (message "
                    f"{tag}); did it fail? its output says why"
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        if path.stat().st_size > MAX_MESSAGE_BYTES:
            raise DistributedError(f"host message {path.name} is larger than expected")
        try:
            return json.loads(path.read_text())
        except ValueError:
            raise DistributedError(f"host message {path.name} is not valid JSON") from None

    def bcast(self, value: Any) -> Any:
        tag = self._tag()
        if self.rank == 0:
            self._put(tag, value)
            return value
        return self._get(tag, 0)

    def allgather(self, value: Any) -> list[Any]:
        tag = self._tag()
        self._put(tag, value)
        return [value if r == self.rank else self._get(tag, r) for r in range(self.size)]

    def barrier(self) -> None:
        self.allgather(None)


@dataclass
class World:
    """This process's place in the run: its rank, the ranks on its host, its GPU, its host
    channel, and which launcher started it (``launch``, ``mpi`` or ``solo``)."""

    rank: int
    size: int
    local_rank: int
    local_size: int
    device: int
    channel: Any
    launcher: str


def _int_var(environ: Mapping[str, str], name: str, low: int, high: int) -> int:
    text = environ.get(name, "")
    if not text.strip().isdigit() or not low <= int(text) <= high:
        raise DistributedError(f"environment variable {name}={text[:20]!r}: expected an "
                               f"integer in {low}..{high}")
    return int(text)


def launcher_world(environ: Mapping[str, str]) -> World:
    """The world that ``teaal-loops launch`` set up for this process."""
    size = _int_var(environ, ENV_SIZE, 1, 4096)
    rank = _int_var(environ, ENV_RANK, 0, size - 1)
    local_size = _int_var(environ, ENV_LOCAL_SIZE, 1, size) if ENV_LOCAL_SIZE in environ else size
    local_rank = _int_var(environ, ENV_LOCAL_RANK, 0, local_size - 1) if (
        ENV_LOCAL_RANK in environ) else rank
    device = _int_var(environ, ENV_DEVICE, 0, 1023) if ENV_DEVICE in environ else local_rank
    store = environ.get(ENV_STORE, "")
    if not store or not Path(store).is_dir():
        raise DistributedError(f"{ENV_STORE}={store[:80]!r} is not a directory: start ranks with "
                               "teaal-loops launch")
    timeout = DEFAULT_TIMEOUT_S
    if environ.get(ENV_TIMEOUT):
        timeout = float(_int_var(environ, ENV_TIMEOUT, 1, 86400))
    channel = FileChannel(store, rank, size, timeout_s=timeout)
    return World(rank, size, local_rank, local_size, device, channel, "launch")


def under_mpi(environ: Mapping[str, str]) -> bool:
    """Whether an MPI launcher started this process as one of several."""
    for name in MPI_SIZE_VARS:
        value = environ.get(name, "")
        if value.isdigit() and int(value) > 1:
            return True
    return False


def mpi_world() -> World:
    """The world of an ``mpiexec`` run (mpi4py): the host's ranks by a shared-memory split."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise DistributedError(
            f"started by an MPI launcher but mpi4py is not importable ({exc}): {INSTALL_HINT}"
        ) from None
    comm = MPI.COMM_WORLD
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    channel = MpiChannel(comm)
    local_rank, local_size = int(local.Get_rank()), int(local.Get_size())
    return World(channel.rank, channel.size, local_rank, local_size, local_rank, channel, "mpi")


def detect_world(environ: Mapping[str, str] | None = None) -> World:
    """This process's :class:`World` (module docstring); sets ``NCCL_NVLS_ENABLE=0``."""
    disable_nvls()
    env = os.environ if environ is None else environ
    if ENV_RANK in env:
        return launcher_world(env)
    if under_mpi(env):
        return mpi_world()
    return World(0, 1, 0, 1, 0, SoloChannel(), "solo")
