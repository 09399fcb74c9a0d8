"""Distributed SpMV and SpMM: rows partitioned across processes, one GPU each.

    from teaal_loops.distributed import plan_product, shard_matrix
    plan = plan_product(schedule, A, ranks=4)      # partition by schedule cost, halo lists,
                                                   # the exchange chosen by the cost model
    shard = shard_matrix(A, plan.partition, rank)  # diagonal and off-diagonal blocks

The pieces, one module each: :mod:`~teaal_loops.distributed.partition` (rows balanced by the
schedule's cost), :mod:`~teaal_loops.distributed.shard` (PETSc's diagonal / off-diagonal
split, ghost columns), :mod:`~teaal_loops.distributed.halo` (who sends what to whom),
:mod:`~teaal_loops.distributed.model` (allgather against halo, the product's time),
:mod:`~teaal_loops.distributed.exchange` (the protocol; MPI transport over host buffers),
:mod:`~teaal_loops.distributed.device` (NCCL transport, the generated kernel's blocks),
:mod:`~teaal_loops.distributed.operator` (one rank's product, the exchange overlapped with the
diagonal block), :mod:`~teaal_loops.distributed.world` (MPI, the launcher's file store, or one
process), :mod:`~teaal_loops.distributed.launch` (one process per GPU without MPI),
:mod:`~teaal_loops.distributed.run` (a rank's run and its timings). docs/distributed.md
describes the design and the cost model. Nothing here imports CuPy, NCCL or MPI until a run
uses them.
"""

from __future__ import annotations

from teaal_loops.distributed.errors import DistributedError
from teaal_loops.distributed.halo import HaloPlan, HaloVolume, plan_all, plans_from_ghosts
from teaal_loops.distributed.model import ExchangeChoice, Fabric, choose_exchange
from teaal_loops.distributed.partition import RowPartition, partition_rows, row_costs
from teaal_loops.distributed.plan import ProductPlan, check_form, explain, plan_product
from teaal_loops.distributed.shard import ALLGATHER, HALO, Shard, shard_matrix

__all__ = [
    "ALLGATHER",
    "HALO",
    "DistributedError",
    "ExchangeChoice",
    "Fabric",
    "HaloPlan",
    "HaloVolume",
    "ProductPlan",
    "RowPartition",
    "Shard",
    "check_form",
    "choose_exchange",
    "explain",
    "partition_rows",
    "plan_all",
    "plan_product",
    "plans_from_ghosts",
    "row_costs",
    "shard_matrix",
]
