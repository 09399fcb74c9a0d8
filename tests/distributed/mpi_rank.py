"""One rank of the exchange-protocol test, run under ``mpiexec -n P`` by test_mpi_protocol.py.

Every rank builds the same matrix, plans the partition, checks that the plan it negotiates
with its peers over MPI (knowing only its own rows) equals the plan computed from the whole
matrix, then runs the distributed product with SciPy standing in for the generated kernel,
over MPI host buffers, for SpMV and SpMM and both exchanges, and compares its rows with the
single-process product. Exits non-zero with one line on the first disagreement.

Usage: python mpi_rank.py KIND ROWS NNZ SEED
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

from teaal_loops import matrix
from teaal_loops.distributed.exchange import Exchange, MpiTransport, gather_rows
from teaal_loops.distributed.halo import ghost_columns, plan_all, plan_by_asking
from teaal_loops.distributed.operator import host_product
from teaal_loops.distributed.partition import partition_rows
from teaal_loops.distributed.shard import EXCHANGES, shard_matrix


def fail(message: str) -> None:
    print(f"rank {MPI.COMM_WORLD.Get_rank()}: FAIL {message}", flush=True)
    MPI.COMM_WORLD.Abort(1)


def main() -> None:
    kind, rows, nnz, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    A = matrix.synthetic(kind, rows=rows, nnz=nnz, seed=seed)
    part = partition_rows(A, size, group_size=1 + seed % 3)
    plans = plan_all(A, part)
    asked = plan_by_asking(rank, ghost_columns(A, part, rank), part, comm.alltoall)
    if not asked.same_as(plans[rank]):
        fail("the plan negotiated over MPI differs from the plan of the whole matrix")
    shard = shard_matrix(A, part, rank)
    transport = MpiTransport(comm)
    rng = np.random.default_rng(seed)
    for width in (None, 3):
        x = rng.uniform(-1, 1, A.shape[1] if width is None else (A.shape[1], width))
        want = A @ x
        lo, hi = part.cols_of(rank)
        x_own = np.ascontiguousarray(x[lo:hi])
        for kind_x in EXCHANGES:
            exchange = Exchange(plans[rank], part, kind_x, transport, np.float64, width=width)
            product = host_product(shard, exchange, shard.offd_for(kind_x, part))
            y_own = product.new_output()
            y_own.fill(np.nan)
            for _ in range(2):  # the buffers are reused: a second call must agree too
                product(x_own, y_own)
            r0, r1 = part.rows_of(rank)
            if not np.allclose(y_own, want[r0:r1], rtol=1e-12, atol=1e-12):
                fail(f"{kind_x} width={width}: rows differ from the single-process product")
            y = gather_rows(transport, part, y_own, width=width)
            if not np.allclose(y, want, rtol=1e-12, atol=1e-12):
                fail(f"{kind_x} width={width}: gathered y differs")
    total = comm.allreduce(shard.nnz)
    if total != A.nnz:
        fail(f"the shards hold {total} nonzeros, the matrix {A.nnz}")
    print(f"rank {rank}/{size}: OK ghosts={shard.ghosts}", flush=True)


if __name__ == "__main__":
    main()
