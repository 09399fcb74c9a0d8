"""One rank of the generated-shard test, run under ``mpiexec -n P`` by test_mpi_protocol.py.

Each rank knows only the family's text: it partitions the rows from their lengths, makes its
own shard in chunks (NumPy standing in for CuPy), sends its receive counts to everyone, builds
its halo index lists by sending each owner the columns it needs over MPI, and runs the
distributed product (SpMV, then SpMM with B of 3 columns) with SciPy standing in for the
kernel, under both exchanges. Every piece
is compared with what one process computes from the whole matrix: the partition, the shard's
blocks, the counts, the index lists, the rows of ``y``, and the float64 check of those rows.
Exits non-zero with one line on the first disagreement.

Usage: python mpi_generated_rank.py FAMILY CHUNK
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from mpi4py import MPI

from teaal_loops.distributed.exchange import Exchange, MpiTransport
from teaal_loops.distributed.generated import ShardBuilder, check_rows, partition_family
from teaal_loops.distributed.halo import (
    counts_of_all,
    plan_all,
    plan_over_transport,
    receive_counts,
)
from teaal_loops.distributed.operator import host_product
from teaal_loops.distributed.partition import partition_rows
from teaal_loops.distributed.shard import EXCHANGES, HALO, shard_matrix
from teaal_loops.matrix import rowwise


def fail(message: str) -> None:
    print(f"rank {MPI.COMM_WORLD.Get_rank()}: FAIL {message}", flush=True)
    MPI.COMM_WORLD.Abort(1)


def same_csr(got: Any, want: Any) -> bool:
    g = got.to_scipy()
    return (g.shape == want.shape and np.array_equal(g.indptr, want.indptr)
            and np.array_equal(g.indices, want.indices) and np.array_equal(g.data, want.data))


def main() -> None:
    family = rowwise.parse_family(sys.argv[1])
    chunk = int(sys.argv[2])
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    group = 1 + family.rows % 3
    part = partition_family(np, family, size, group_size=group, chunk=chunk)
    A = rowwise.whole_matrix(family, np.float32)  # the single-process truth
    whole = partition_rows(A, size, group_size=group)
    if not (np.array_equal(part.row_cuts, whole.row_cuts) and np.array_equal(part.cost, whole.cost)):
        fail("the partition from the row lengths differs from the whole matrix's")
    builder = ShardBuilder(np, family, part, rank, chunk=chunk)
    counts = counts_of_all(comm.allgather(receive_counts(builder.ghost_cols, part)))
    plans = plan_all(A, part)
    transport = MpiTransport(comm)
    plan = plan_over_transport(counts[rank], builder.ghost_cols, part, transport)
    if not plan.same_as(plans[rank]):
        fail("the halo lists sent over MPI differ from the whole matrix's")
    want_shard = shard_matrix(A, part, rank)
    x = rowwise.operand(np, 11, 0, family.cols, np.float32)
    lo, hi = part.cols_of(rank)
    r0, r1 = part.rows_of(rank)
    want = A[r0:r1].astype(np.float64) @ x.astype(np.float64)
    for kind in EXCHANGES:
        shard = builder.build(kind, np.float32)
        if not (same_csr(shard.diag, want_shard.diag)
                and same_csr(shard.offd, want_shard.offd_for(kind, part))
                and np.array_equal(shard.offd_rows, want_shard.offd_rows)):
            fail(f"{kind}: the generated shard differs from the whole matrix's")
        exchange = Exchange(plan if kind == HALO else counts[rank], part, kind, transport,
                            np.float32)
        product = host_product(shard, exchange, shard.offd)
        y_own = product.new_output()
        y_own.fill(np.nan)
        for _ in range(2):  # the buffers are reused: a second call must agree too
            product(x[lo:hi].copy(), y_own)
        if not np.allclose(y_own, want, rtol=1e-5, atol=1e-5):
            fail(f"{kind}: rows differ from the single-process product")
        check = check_rows(np, family, shard, 11, y_own, np.float32, chunk=chunk)
        if check.overruns or check.naive_mismatches or check.rows != r1 - r0:
            fail(f"{kind}: the float64 check of correct rows failed: {check}")
        if r1 > r0:
            y_own[0] += 1.0
            if check_rows(np, family, shard, 11, y_own, np.float32).overruns != 1:
                fail(f"{kind}: the float64 check missed a wrong row")
    # SpMM on the same partition and shard: B of 3 columns, both exchanges' buffers of rows.
    B = rowwise.operand(np, 12, 0, family.cols, np.float32, 3)
    want_z = A[r0:r1].astype(np.float64) @ B.astype(np.float64)
    for kind in EXCHANGES:
        shard = builder.build(kind, np.float32)
        exchange = Exchange(plan if kind == HALO else counts[rank], part, kind, transport,
                            np.float32, width=3)
        product = host_product(shard, exchange, shard.offd)
        z_own = product.new_output()
        z_own.fill(np.nan)
        product(np.ascontiguousarray(B[lo:hi]), z_own)
        if not np.allclose(z_own, want_z, rtol=1e-5, atol=1e-5):
            fail(f"{kind}: SpMM rows differ from the single-process product")
        check = check_rows(np, family, shard, 12, z_own, np.float32, width=3, chunk=chunk)
        if check.overruns or check.naive_mismatches:
            fail(f"{kind}: the float64 check of correct SpMM rows failed: {check}")
    if comm.allreduce(shard.nnz) != A.nnz:
        fail("the shards do not hold the matrix's nonzeros")
    print(f"rank {rank}/{size}: OK ghosts={shard.ghosts}", flush=True)


if __name__ == "__main__":
    main()
