"""One rank of a distributed run: build the product on the GPU or the host, time its phases.

:func:`device_product` joins NCCL, shards the matrix and prepares both blocks with the spec's
generated kernel; :func:`host_product_mpi` builds the same protocol over MPI and SciPy (the CI's
rank program). :func:`time_phases` times, with CUDA events on the rank's stream, the whole
product and each phase alone (the exchange, the diagonal block, the off-diagonal block and its
add), so that a run shows how much of the exchange the diagonal block hid.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from teaal_loops.distributed.device import KernelBlocks, NcclTransport, nccl_communicator
from teaal_loops.distributed.exchange import Exchange, MpiTransport
from teaal_loops.distributed.operator import DistributedProduct, host_product
from teaal_loops.distributed.plan import ProductPlan
from teaal_loops.distributed.shard import shard_matrix
from teaal_loops.distributed.world import World
from teaal_loops.runtime import Kernel, backend


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
    return PhaseTimes(total, moved, diag, offd)


def owned_block(x: Any, plan: ProductPlan, rank: int) -> Any:
    """Rank ``rank``'s block of ``x`` (rows of ``x`` for SpMM), contiguous."""
    lo, hi = plan.partition.cols_of(rank)
    return np.ascontiguousarray(x[lo:hi])
