"""The cost model: allgather against halo exchange, and the time of a distributed product.

A **model**, stated so that measurements can replace its numbers (docs/distributed.md compares
it with what was measured). Bandwidths are per GPU and per direction; latencies are per
operation. A link is ``alpha + bytes / beta``:

* **allgather** of ``x`` (NCCL ring, equal blocks of ``m`` entries a rank, the largest rank's
  columns): every rank receives ``(P - 1) m`` entries, in ``P - 1`` ring steps,
  ``T_ag = a_op + (P - 1) a_step + (P - 1) m s / beta``. Across nodes the ring crosses the
  network, whose per-GPU bandwidth (one NIC a GPU) then bounds it: ``beta`` is the network's.
* **halo** (grouped point-to-point sends and receives): rank ``r`` receives its ghosts and sends
  what its peers need, over NVLink to peers on its node and over the network to the others,
  both at once: ``T_r = a_op + peers_r a_step + max(intra_r s / beta_nvl, inter_r s / beta_net)
  + pack_r``, where ``peers_r`` counts the ranks it sends to or receives from (one connection
  each), ``intra_r``/``inter_r`` are the larger of the entries sent and received
  over each link and ``pack_r`` gathers the sent entries into a contiguous buffer (read and
  write, at the device's memory bandwidth). The exchange ends when the slowest rank's does:
  ``T_halo = max_r T_r``.

``s`` is the bytes of one entry of ``x`` (the value size times the dense rank's size for
SpMM). The halo wins when it moves few entries to few peers; the allgather, whose volume is
``(P - 1)/P`` of ``x`` whatever the matrix, wins when the shards' column footprints cover most
of ``x`` (R-MAT, random columns), where the halo would move as much in more, smaller messages.

The **product** on rank ``r`` overlaps the exchange with the diagonal block and then runs the
off-diagonal block and its add into ``y``: ``T_r = max(T_diag, T_exchange) + T_offd + T_add``,
each block's time its compulsory bytes (CSR: values and column indices, row offsets, ``y``,
the distinct ``x`` entries read) over the device's bandwidth plus a launch. The product's time
is the slowest rank's; one GPU's is the whole matrix's bytes over the same bandwidth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from teaal_loops.distributed.errors import DistributedError
from teaal_loops.distributed.halo import HaloShape, HaloVolume
from teaal_loops.distributed.partition import RowPartition
from teaal_loops.distributed.shard import ALLGATHER, HALO
from teaal_loops.types import INT32_MAX

KERNEL_LAUNCH_S = 4e-6  # one kernel's fixed cost on the device (about one launch)


@dataclass(frozen=True)
class Link:
    """One kind of link as the model sees it (module docstring)."""

    name: str
    peak_bytes_s: float  # per GPU, per direction
    efficiency: float  # the fraction of the peak a large allgather reaches
    op_latency_s: float  # a collective or a group of point-to-point calls
    step_latency_s: float  # a ring step, or one more peer of a group
    source: str
    p2p_efficiency: float | None = None  # grouped sends and receives (None: as efficiency)

    @property
    def bytes_s(self) -> float:
        """A large allgather's bytes a second, per GPU and direction."""
        return self.peak_bytes_s * self.efficiency

    @property
    def p2p_bytes_s(self) -> float:
        """Grouped point-to-point transfers' bytes a second, per GPU and direction."""
        return self.peak_bytes_s * (self.efficiency if self.p2p_efficiency is None
                                    else self.p2p_efficiency)


# NVLink: the peak is NVIDIA's figure; efficiencies and the operation latency were measured on
# nvidia-h200-x2 (python -m teaal_loops.distributed.calibrate, CUDA events around NCCL calls
# of 4 KiB to 256 MiB a rank: 26-29 us below 1 MiB; 256 MiB: allgather 255 GB/s, grouped
# send/receive 303 GB/s). The step latency (one more ring step or peer) needs more than two
# GPUs to measure: assumed. InfiniBand: NVIDIA's per-port figure; its efficiency and latencies
# are assumptions (docs/distributed.md).
NVLINK4 = Link(
    name="NVLink 4 (H100/H200 SXM, NVSwitch)",
    peak_bytes_s=450e9,
    efficiency=0.57,
    op_latency_s=27e-6,
    step_latency_s=1e-6,
    source="NVIDIA H100/H200 datasheets: 900 GB/s NVLink per GPU, both directions together; "
    "efficiencies and latency measured on two H200s",
    p2p_efficiency=0.67,
)
IB_NDR = Link(
    name="InfiniBand NDR (one 400 Gb/s ConnectX-7 port a GPU)",
    peak_bytes_s=50e9,
    efficiency=0.8,
    op_latency_s=35e-6,
    step_latency_s=3e-6,
    source="NVIDIA ConnectX-7 / Quantum-2 NDR: 400 Gb/s per port; DGX H100: one port a GPU",
)


@dataclass(frozen=True)
class Device:
    """The GPU's memory bandwidth (bytes read plus written per second)."""

    name: str
    memory_bytes_s: float
    source: str


H200 = Device("H200", 4.3e12, "a device-to-device copy measured on this workplace's H200")
H100 = Device("H100 SXM", 3.0e12, "a device-to-device copy measured on this workplace's H100")


@dataclass(frozen=True)
class Fabric:
    """``gpus_per_node`` GPUs a node joined by ``intra``, nodes joined by ``inter``."""

    gpus_per_node: int = 8
    intra: Link = NVLINK4
    inter: Link = IB_NDR
    device: Device = H200

    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node

    def nodes(self, parts: int) -> int:
        return -(-parts // self.gpus_per_node)


def allgather_seconds(volume: HaloVolume, entry_bytes: int, fabric: Fabric) -> float:
    parts = volume.parts
    if parts <= 1:
        return 0.0
    link = fabric.inter if fabric.nodes(parts) > 1 else fabric.intra
    moved = volume.allgather_recv * entry_bytes
    return link.op_latency_s + (parts - 1) * link.step_latency_s + moved / link.bytes_s


def halo_seconds_per_rank(
    plans: Sequence[HaloShape], entry_bytes: int, fabric: Fabric
) -> list[float]:
    """Each rank's modelled halo time (module docstring)."""
    out = []
    for plan in plans:
        node = fabric.node_of(plan.rank)
        traffic = {True: [0, 0], False: [0, 0]}  # same node? -> [sent, received] entries
        partners: set[int] = set()  # a peer sent to and received from is one connection
        for direction, runs in enumerate((plan.send_runs(), plan.recv_runs())):
            for peer, start, stop in runs:
                traffic[fabric.node_of(peer) == node][direction] += stop - start
                partners.add(peer)
        peers = {True: 0, False: 0}
        for peer in partners:
            peers[fabric.node_of(peer) == node] += 1
        if not plan.ghosts and not plan.sends:
            out.append(0.0)
            continue
        intra = max(traffic[True]) * entry_bytes / fabric.intra.p2p_bytes_s
        inter = max(traffic[False]) * entry_bytes / fabric.inter.p2p_bytes_s
        alpha = fabric.inter.op_latency_s if peers[False] else fabric.intra.op_latency_s
        steps = peers[True] * fabric.intra.step_latency_s + peers[False] * (
            fabric.inter.step_latency_s
        )
        pack = 2 * plan.sends * entry_bytes / fabric.device.memory_bytes_s
        out.append(alpha + steps + max(intra, inter) + pack)
    return out


@dataclass(frozen=True)
class ExchangeChoice:
    """The exchange chosen for one matrix, and both modelled times."""

    kind: str  # "halo" | "allgather"
    allgather_s: float
    halo_s: float
    forced: bool = False

    @property
    def reason(self) -> str:
        if self.forced:
            return f"{self.kind} (asked for)"
        other = ALLGATHER if self.kind == HALO else HALO
        return (
            f"{self.kind}: modelled {_us(self.chosen_s)} against {_us(self.other_s)} for the "
            f"{other}"
        )

    @property
    def chosen_s(self) -> float:
        return self.halo_s if self.kind == HALO else self.allgather_s

    @property
    def other_s(self) -> float:
        return self.allgather_s if self.kind == HALO else self.halo_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "exchange": self.kind,
            "forced": self.forced,
            "model_allgather_us": round(self.allgather_s * 1e6, 3),
            "model_halo_us": round(self.halo_s * 1e6, 3),
        }


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us"


def choose_exchange(
    plans: Sequence[HaloShape],
    volume: HaloVolume,
    entry_bytes: int,
    fabric: Fabric,
    *,
    force: str | None = None,
) -> ExchangeChoice:
    """The halo when its modelled time is below the allgather's (ties: the allgather, one
    collective with no index lists); ``force`` (``halo`` or ``allgather``) overrides. The
    allgather is never taken where its padded vector passes what 32-bit column indices
    address (every layout's kernel reads int32 columns): the halo then, or one line if the
    allgather was asked for."""
    ag = allgather_seconds(volume, entry_bytes, fabric)
    halo = max(halo_seconds_per_rank(plans, entry_bytes, fabric), default=0.0)
    gathered = volume.parts * volume.allgather_block
    if gathered > INT32_MAX:
        if force == ALLGATHER:
            raise DistributedError(
                f"the allgather's padded x would hold {gathered} entries, more than 32-bit "
                "column indices address: use --exchange halo"
            )
        return ExchangeChoice(HALO, ag, halo, forced=force == HALO)
    if force in (HALO, ALLGATHER):
        return ExchangeChoice(force, ag, halo, forced=True)
    return ExchangeChoice(HALO if halo < ag else ALLGATHER, ag, halo)


@dataclass(frozen=True)
class BlockBytes:
    """Compulsory bytes of one CSR block's product (one column of x and y for SpMV; times the
    dense rank for the dense parts of SpMM)."""

    nnz: int
    rows: int
    x_entries: int
    value_bytes: int
    width: int = 1  # the dense rank's size (SpMM), 1 for SpMV

    @property
    def total(self) -> int:
        if self.nnz == 0:
            return 0
        s = self.value_bytes
        matrix = self.nnz * (s + 4) + (self.rows + 1) * 4
        return matrix + (self.x_entries + self.rows) * s * self.width


@dataclass(frozen=True)
class ProductModel:
    """Modelled seconds of the distributed product and of one GPU (module docstring)."""

    per_rank_s: list[float]
    single_s: float
    exchange: ExchangeChoice
    details: list[dict[str, float]] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return max(self.per_rank_s, default=0.0)

    @property
    def speedup(self) -> float:
        return self.single_s / self.seconds if self.seconds else float("inf")


def block_seconds(block: BlockBytes, device: Device) -> float:
    if block.nnz == 0:
        return 0.0
    return KERNEL_LAUNCH_S + block.total / device.memory_bytes_s


def product_model(
    shards: list[Any],
    partition: RowPartition,
    exchange: ExchangeChoice,
    plans: Sequence[HaloShape],
    value_bytes: int,
    fabric: Fabric,
    *,
    width: int = 1,
) -> ProductModel:
    """The modelled product time of every rank given its :class:`~teaal_loops.distributed.
    shard.Shard` (module docstring)."""
    entry = value_bytes * width
    halo_ranks = halo_seconds_per_rank(plans, entry, fabric)
    per_rank, details = [], []
    for shard, halo_s in zip(shards, halo_ranks, strict=True):
        comm = halo_s if exchange.kind == HALO else exchange.allgather_s
        diag = block_seconds(
            BlockBytes(shard.diag.nnz, shard.local_rows, shard.owned_cols, value_bytes, width),
            fabric.device,
        )
        offd_rows = len(shard.offd_rows)
        offd = block_seconds(
            BlockBytes(shard.offd.nnz, offd_rows, shard.ghosts, value_bytes, width),
            fabric.device,
        )
        add = (KERNEL_LAUNCH_S + 3 * offd_rows * entry / fabric.device.memory_bytes_s
               if offd_rows else 0.0)
        per_rank.append(max(diag, comm) + offd + add)
        details.append({"diag_s": diag, "exchange_s": comm, "offd_s": offd, "add_s": add})
    nnz = int(np.sum(partition.nnz))
    whole = BlockBytes(nnz, partition.rows, partition.cols, value_bytes, width)
    single = block_seconds(whole, fabric.device)
    return ProductModel(per_rank, single, exchange, details)
