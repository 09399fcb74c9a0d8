"""One rank of the MPI start-up test, run under ``mpiexec -n P`` by test_mpi_protocol.py.

What ``run --distributed`` does under ``mpiexec`` before NCCL exists, on the host: detect the
MPI world (rank, size, the host's ranks by a shared-memory split, this rank's GPU number),
find ``NCCL_NVLS_ENABLE=0`` set whatever the environment said, broadcast rank 0's 128-byte id
(the shape of ``ncclGetUniqueId``'s) over MPI and check it as the NCCL join does, and gather a
report from every rank. Exits non-zero with one line on the first disagreement.
"""

from __future__ import annotations

import os
import random

from mpi4py import MPI

from teaal_loops.distributed.device import UNIQUE_ID_BYTES, check_unique_id
from teaal_loops.distributed.world import detect_world


def fail(message: str) -> None:
    print(f"rank {MPI.COMM_WORLD.Get_rank()}: FAIL {message}", flush=True)
    MPI.COMM_WORLD.Abort(1)


def main() -> None:
    os.environ["NCCL_NVLS_ENABLE"] = "1"  # the world must turn it off again
    world = detect_world()
    comm = MPI.COMM_WORLD
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        fail("NCCL_NVLS_ENABLE is not 0 after detect_world")
    if (world.launcher, world.rank, world.size) != ("mpi", comm.Get_rank(), comm.Get_size()):
        fail(f"detected {world.launcher} rank {world.rank} of {world.size}")
    if not (0 <= world.local_rank < world.local_size <= world.size
            and world.device == world.local_rank):
        fail(f"local rank {world.local_rank} of {world.local_size}, device {world.device}")
    mine = [random.randint(-128, 127) for _ in range(UNIQUE_ID_BYTES)] if world.rank == 0 else None
    uid = check_unique_id(world.channel.bcast(mine))
    everyone = world.channel.allgather(list(uid))
    if any(tuple(u) != uid for u in everyone):
        fail("the broadcast id differs between ranks")
    ranks = world.channel.allgather(world.rank)
    if ranks != list(range(world.size)):
        fail(f"gathered ranks {ranks}")
    world.channel.barrier()
    print(f"rank {world.rank}/{world.size}: OK local {world.local_rank}/{world.local_size}",
          flush=True)


if __name__ == "__main__":
    main()
