"""Planning a distributed product: partition, shards, halo lists, the exchange, the report.

:func:`plan_product` does what every rank of a run does for itself before any transfer (each
rank holds the whole matrix as it was read, so no planning message is needed) and what
``teaal-loops explain --ranks P`` prints: the row partition by the schedule's cost, each
shard's rows, nonzeros, cost and ghosts, both exchanges' volumes and modelled times, the
choice, and the modelled product time against one GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from teaal_loops.distributed.errors import DistributedError
from teaal_loops.distributed.halo import HaloPlan, HaloVolume, plan_all, volumes
from teaal_loops.distributed.model import (
    ExchangeChoice,
    Fabric,
    ProductModel,
    choose_exchange,
    product_model,
)
from teaal_loops.distributed.partition import RowPartition, partition_rows
from teaal_loops.distributed.shard import Shard, shard_matrix
from teaal_loops.ir.model import Schedule
from teaal_loops.lowering.simulate import operand_shape
from teaal_loops.matrix import as_csr
from teaal_loops.schedules import bind


def check_form(schedule: Schedule) -> None:
    """Refuse what is not distributed: SDDMM (its output is the sampler's pattern, not rows
    of y) and transposed forms (rows of ``A^T`` are columns of the stored matrix)."""
    form = schedule.form
    if form.kind not in ("spmv", "spmm"):
        raise DistributedError(
            f"{schedule.spec_name} is {form.kind}: distributed runs take SpMV and SpMM specs"
        )
    if form.transposed:
        raise DistributedError(
            f"{schedule.spec_name} multiplies by the transpose of its matrix: distributed runs "
            "partition the rows of a matrix declared [M, K]"
        )


def group_size(schedule: Schedule, A: Any, params: Mapping[str, int] | None = None) -> int:
    """Lanes the schedule gives a row, bound to ``A`` (1 outside group-mapped)."""
    return int(bind(schedule, operand_shape(schedule, A), params=params).group_size)


@dataclass(frozen=True)
class ProductPlan:
    """Everything one distributed product needs, for every rank (module docstring)."""

    partition: RowPartition
    plans: list[HaloPlan]
    volume: HaloVolume
    choice: ExchangeChoice
    entry_bytes: int  # bytes of one exchanged entry of x (value size x dense rank)
    fabric: Fabric

    def plan_of(self, rank: int) -> HaloPlan:
        return self.plans[rank]


def plan_product(
    schedule: Schedule,
    A: Any,
    ranks: int,
    *,
    params: Mapping[str, int] | None = None,
    value_bytes: int = 4,
    width: int = 1,
    fabric: Fabric | None = None,
    exchange: str | None = None,
) -> ProductPlan:
    """Partition ``A`` over ``ranks`` by ``schedule``'s cost and choose the exchange
    (``exchange``: ``halo`` or ``allgather`` to force one; None or ``auto``: the model)."""
    check_form(schedule)
    csr = as_csr(A)
    fabric = fabric or Fabric()
    partition = partition_rows(csr, ranks, group_size=group_size(schedule, csr, params))
    plans = plan_all(csr, partition)
    volume = volumes(plans, partition)
    entry = value_bytes * width
    force = None if exchange in (None, "auto") else exchange
    choice = choose_exchange(plans, volume, entry, fabric, force=force)
    return ProductPlan(partition, plans, volume, choice, entry, fabric)


def all_shards(A: Any, partition: RowPartition) -> list[Shard]:
    csr = as_csr(A)
    return [shard_matrix(csr, partition, r) for r in range(partition.parts)]


def model_of(plan: ProductPlan, shards: list[Shard], value_bytes: int, width: int) -> ProductModel:
    return product_model(
        shards, plan.partition, plan.choice, plan.plans, value_bytes, plan.fabric, width=width
    )


def report(plan: ProductPlan, shards: list[Shard], model: ProductModel) -> dict[str, Any]:
    """The JSON of ``explain --ranks``."""
    part = plan.partition
    fabric = plan.fabric
    return {
        "ranks": part.parts,
        "cost": "G * ceil(nnz_row / G) + 1 a row",
        "group_size": part.group_size,
        "imbalance": round(part.imbalance, 6),
        "shards": [
            {
                "rank": s.rank,
                "rows": list(s.rows),
                "cols": list(s.cols),
                "nnz": s.nnz,
                "diag_nnz": int(s.diag.nnz),
                "offd_nnz": int(s.offd.nnz),
                "offd_rows": len(s.offd_rows),
                "cost": int(part.cost[s.rank]),
                "ghosts": s.ghosts,
                "recv_peers": len(plan.plans[s.rank].recv_peers),
                "sends": plan.plans[s.rank].sends,
            }
            for s in shards
        ],
        "volume": plan.volume.as_dict(),
        "entry_bytes": plan.entry_bytes,
        **plan.choice.as_dict(),
        "fabric": {
            "gpus_per_node": fabric.gpus_per_node,
            "nodes": fabric.nodes(part.parts),
            "intra": fabric.intra.name,
            "inter": fabric.inter.name,
            "device": fabric.device.name,
        },
        "model_product_us": round(model.seconds * 1e6, 3),
        "model_single_gpu_us": round(model.single_s * 1e6, 3),
        "model_speedup": round(model.speedup, 3),
    }


def report_lines(doc: Mapping[str, Any]) -> list[str]:
    """``explain --ranks``'s text from :func:`report`'s JSON."""
    lines = [
        f"Distributed over {doc['ranks']} ranks (rows balanced by schedule cost "
        f"{doc['cost']}, G = {doc['group_size']}); imbalance max/mean {doc['imbalance']:.3f}",
        "  rank        rows          nnz         cost   ghosts  peers  offd rows     sends",
    ]
    for s in doc["shards"]:
        lo, hi = s["rows"]
        lines.append(
            f"  {s['rank']:>4} {hi - lo:>11} {s['nnz']:>12} {s['cost']:>12} {s['ghosts']:>8} "
            f"{s['recv_peers']:>6} {s['offd_rows']:>10} {s['sends']:>9}"
        )
    v, b = doc["volume"], doc["entry_bytes"]
    fabric = doc["fabric"]
    lines += [
        f"Exchange of x ({b} bytes an entry), per product:",
        f"  allgather: {v['allgather_recv_entries_per_rank']} entries received by each rank "
        f"({v['allgather_total_entries'] * b} bytes in all), modelled "
        f"{doc['model_allgather_us']:.1f} us",
        f"  halo:      {max(v['halo_recv_entries'], default=0)} entries at most by one rank "
        f"({v['halo_total_entries'] * b} bytes in all), modelled {doc['model_halo_us']:.1f} us",
        f"  chosen:    {doc['exchange']}{' (asked for)' if doc['forced'] else ''}",
        f"Model ({fabric['nodes']} node(s), up to {fabric['gpus_per_node']} {fabric['device']} a "
        f"node; "
        f"{fabric['intra']}; {fabric['inter']}): product {doc['model_product_us']:.1f} us, "
        f"one GPU {doc['model_single_gpu_us']:.1f} us, speedup {doc['model_speedup']:.2f}x",
    ]
    return lines


def explain(
    schedule: Schedule,
    A: Any,
    ranks: int,
    *,
    params: Mapping[str, int] | None = None,
    value_bytes: int = 4,
    width: int = 1,
    fabric: Fabric | None = None,
    exchange: str | None = None,
) -> dict[str, Any]:
    """:func:`report` for ``A`` over ``ranks`` (``explain --ranks``)."""
    plan = plan_product(schedule, A, ranks, params=params, value_bytes=value_bytes,
                        width=width, fabric=fabric, exchange=exchange)
    shards = all_shards(A, plan.partition)
    return report(plan, shards, model_of(plan, shards, value_bytes, width))
