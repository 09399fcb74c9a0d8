"""One rank of a distributed run: build the product on the GPU or the host, time its phases.

:func:`device_product` joins NCCL, shards the matrix and prepares both blocks with the spec's
generated kernel; :func:`host_product_mpi` builds the same protocol over MPI and SciPy (the CI's
rank program). :func:`time_phases` times, with CUDA events on the rank's stream, the whole
product and each phase alone (the exchange, the diagonal block, the off-diagonal block and its
add), so that a run shows how much of the exchange the diagonal block hid.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from teaal_loops.distributed.device import KernelBlocks, NcclTransport, nccl_communicator
from teaal_loops.distributed.exchange import Exchange, MpiTransport
from teaal_loops.distributed.generated import (
    DEFAULT_CHUNK,
    GeneratedShard,
    ShardBuilder,
    family_lengths,
)
from teaal_loops.distributed.halo import (
    HaloCounts,
    counts_of_all,
    plan_over_transport,
    receive_counts,
    volumes,
)
from teaal_loops.distributed.model import ExchangeChoice, Fabric, choose_exchange
from teaal_loops.distributed.operator import DistributedProduct, host_product
from teaal_loops.distributed.partition import RowPartition, partition_lengths
from teaal_loops.distributed.plan import ProductPlan
from teaal_loops.distributed.shard import HALO, shard_matrix
from teaal_loops.distributed.world import World
from teaal_loops.matrix import rowwise
from teaal_loops.runtime import Kernel, backend
from teaal_loops.schedules import bind
from teaal_loops.types import MatrixShape


@dataclass(frozen=True)
class GeneratedProduct:
    """A rank's product on a shard it generated (:func:`generated_product`), with what was
    decided on the way and how long each step took (seconds)."""

    product: DistributedProduct
    shard: GeneratedShard
    partition: RowPartition
    counts: list[HaloCounts]
    choice: ExchangeChoice
    shape: MatrixShape
    setup_s: dict[str, float]


def generated_product(
    world: World, kernel: Kernel, family: rowwise.Family, *, fabric: Fabric,
    exchange: str | None = None, width: int | None = None, chunk: int = DEFAULT_CHUNK,
) -> GeneratedProduct:
    """This rank's product on the rows of ``family`` it generates on its own GPU (every rank
    calls it together): the partition from every row's length, the counts pass, the exchange
    chosen from every rank's counts, the blocks made in its numbering, the halo's index lists
    sent over NCCL (docs/distributed.md)."""
    comm = nccl_communicator(world)
    transport = NcclTransport(comm, kernel.dtype)
    xp = transport.xp
    clock = _Clock(xp)
    lengths = family_lengths(xp, family, 0, family.rows, chunk)
    shape = MatrixShape(family.rows, family.cols, int(lengths.sum()),
                        int(lengths.max()) if family.rows else 0)
    group = int(bind(kernel.schedule, shape, params=kernel.params).group_size)
    partition = partition_lengths(lengths, family.cols, world.size, group_size=group, xp=xp)
    del lengths
    clock.lap("partition")
    builder = ShardBuilder(xp, family, partition, world.rank, chunk=chunk)
    clock.lap("count")
    counts = counts_of_all(world.channel.allgather(
        receive_counts(builder.ghost_cols, partition, xp)))
    entry = kernel.dtype.itemsize * (width or 1)
    force = None if exchange in (None, "auto") else exchange
    choice = choose_exchange(counts, volumes(counts, partition), entry, fabric, force=force)
    shard = builder.build(choice.kind, kernel.dtype)
    del builder
    clock.lap("build")
    mine = counts[world.rank]
    plan = (plan_over_transport(mine, shard.ghost_cols, partition, transport)
            if choice.kind == HALO else mine)
    moved = Exchange(plan, partition, choice.kind, transport, kernel.dtype, width=width)
    blocks = KernelBlocks(kernel, shard, shard.offd, width)
    clock.lap("prepare")
    product = DistributedProduct(shard, moved, blocks)
    return GeneratedProduct(product, shard, partition, counts, choice, shape, clock.laps)


class _Clock:
    """Wall seconds of each set-up step (the device synchronised at each lap)."""

    def __init__(self, xp: Any) -> None:
        self.xp = xp
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        self.xp.cuda.get_current_stream().synchronize()
        now = time.perf_counter()
        self.laps[name] = round(now - self._last, 6)
        self._last = now


def device_product(
    world: World, kernel: Kernel, A: Any, plan: ProductPlan, *, width: int | None = None
) -> DistributedProduct:
    """This rank's product on its GPU (every rank calls it together: it joins NCCL)."""
    comm = nccl_communicator(world)
    transport = NcclTransport(comm, kernel.dtype)
    part = plan.partition
    shard = shard_matrix(A, part, world.rank)
    kind = plan.choice.kind
    exchange = Exchange(plan.plan_of(world.rank), part, kind, transport, kernel.dtype,
                        width=width)
    blocks = KernelBlocks(kernel, shard, shard.offd_for(kind, part), width)
    return DistributedProduct(shard, exchange, blocks)


def host_product_mpi(
    comm: Any, A: Any, plan: ProductPlan, dtype: Any, *, width: int | None = None
) -> DistributedProduct:
    """This rank's product on the host: MPI moves ``x``, SciPy multiplies."""
    transport = MpiTransport(comm)
    part = plan.partition
    shard = shard_matrix(A, part, transport.rank)
    kind = plan.choice.kind
    exchange = Exchange(plan.plan_of(transport.rank), part, kind, transport, dtype, width=width)
    return host_product(shard, exchange, shard.offd_for(kind, part))


@dataclass(frozen=True)
class PhaseTimes:
    """Median milliseconds on one rank: the product, and each phase run alone."""

    product_ms: float
    exchange_ms: float
    diag_ms: float
    offd_ms: float
    product_mean_ms: float  # one event pair around ``repeat`` products back to back, / repeat

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def _median_ms(cupy: Any, op: Callable[[], Any], repeat: int) -> float:
    starts = [cupy.cuda.Event() for _ in range(repeat)]
    ends = [cupy.cuda.Event() for _ in range(repeat)]
    for start, end in zip(starts, ends, strict=True):
        start.record()
        op()
        end.record()
    ends[-1].synchronize()
    return float(statistics.median(
        cupy.cuda.get_elapsed_time(s, e) for s, e in zip(starts, ends, strict=True)
    ))


def time_phases(
    product: DistributedProduct, x_own: Any, y_own: Any, *, repeat: int, warmup: int
) -> PhaseTimes:
    """CUDA-event medians of the product and of its phases alone (every rank together)."""
    cupy = backend.cupy_module()
    exchange, blocks = product.exchange, product.blocks

    def exchange_only() -> None:
        exchange.start(x_own).wait()

    def offd_only() -> None:
        blocks.offd_add(exchange.operand, y_own)

    for _ in range(max(warmup, 1)):
        product(x_own, y_own)
    total = _median_ms(cupy, lambda: product(x_own, y_own), repeat)
    moved = _median_ms(cupy, exchange_only, repeat)
    diag = _median_ms(cupy, lambda: blocks.diag(x_own, y_own), repeat)
    offd = _median_ms(cupy, offd_only, repeat) if blocks.has_offd else 0.0
    mean = _mean_ms(cupy, lambda: product(x_own, y_own), repeat)
    return PhaseTimes(total, moved, diag, offd, mean)


def _mean_ms(cupy: Any, op: Callable[[], Any], repeat: int) -> float:
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(repeat):
        op()
    end.record()
    end.synchronize()
    return float(cupy.cuda.get_elapsed_time(start, end)) / repeat


def owned_block(x: Any, plan: ProductPlan, rank: int) -> Any:
    """Rank ``rank``'s block of ``x`` (rows of ``x`` for SpMM), contiguous."""
    lo, hi = plan.partition.cols_of(rank)
    return np.ascontiguousarray(x[lo:hi])
