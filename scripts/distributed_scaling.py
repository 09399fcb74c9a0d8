"""The scaling projection of docs/distributed.md section 4: a measured one-GPU product time,
the shards' shares from the partition, and the exchange from the link model.

    python -m scripts.distributed_scaling [--gpus-per-node 8]

For each measured matrix (the 1e9-nonzero banded and power-law families of BENCHMARKS.md, their
one- and two-GPU times read from the documents in benchmarks/) a
replica of the same family with the same mean degree, ``SCALE`` times fewer rows, is
partitioned over P ranks exactly as a run does (``partition_family``) and each rank's counts
pass (``ShardBuilder``, NumPy) gives its diagonal and off-diagonal nonzeros, its off-diagonal
rows and its halo counts; counts are scaled back to the full matrix (the ghost fractions of
these families hardly depend on the size at a fixed degree: the P = 2 row is checked against
the measurement). Then, per rank,

    T_r = max(T1 * diag_r / nnz, T_exchange) + T1 * offd_r / nnz + T_add,r

(and, in the last column, with nothing of the exchange hidden: ``T1 * diag_r / nnz +
T_exchange + ...``, what the power-law matrix measured on two GPUs)

with ``T1`` the measured one-GPU time (the kernel's time per nonzero is the same on a shard: the
two-GPU runs' per-phase times show it within 10%), ``T_exchange`` the cost model's time of the
exchange it chooses (:mod:`teaal_loops.distributed.model`, NVLink measured, InfiniBand from
NVIDIA's figures) and ``T_add`` the off-diagonal rows' add. The product is the slowest rank's.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from teaal_loops.distributed.generated import ShardBuilder, partition_family
from teaal_loops.distributed.halo import counts_of_all, receive_counts, volumes
from teaal_loops.distributed.model import KERNEL_LAUNCH_S, Fabric, choose_exchange
from teaal_loops.matrix import rowwise

SCALE = 16
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Measured:
    name: str
    replica: str  # the measured family, SCALE times fewer rows at the same mean degree
    one_gpu: str  # the documents (benchmarks/) of the measured runs on one and two H200s
    two_gpu: str
    halo_grows: bool  # ghosts grow with the matrix (power-law) or stay a band's width (banded)

    def mean_ms(self, which: str) -> float:
        return float(_document(which)["mean_ms"])

    @property
    def nnz(self) -> int:
        return int(_document(self.one_gpu)["nnz"])


def _document(name: str) -> dict[str, Any]:
    with gzip.open(REPO / "benchmarks" / f"{name}.json.gz", "rt") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


MEASURED = [
    Measured("banded", "banded:rows=3125000,nnz=65625000,seed=7", "distributed_x2_banded_p1",
             "distributed_x2_banded_p2", halo_grows=False),
    Measured("power-law", "powerlaw:rows=3906250,nnz=63750000,seed=7",
             "distributed_x2_powerlaw_p1", "distributed_x2_powerlaw_p2", halo_grows=True),
]
PARTS = (2, 4, 8, 16, 32)


def project(m: Measured, parts: int, fabric: Fabric, value_bytes: int = 4) -> dict[str, float]:
    family = rowwise.parse_family(m.replica)
    part = partition_family(np, family, parts)
    builders = [ShardBuilder(np, family, part, r) for r in range(parts)]
    replica_nnz = sum(b.nnz for b in builders)
    scale = m.nnz / replica_nnz
    grow = scale if m.halo_grows else 1.0  # a band's halo is its width at any size
    counts = counts_of_all([[round(c * grow) for c in receive_counts(b.ghost_cols, part)]
                            for b in builders])
    full = dataclasses.replace(part, col_cuts=np.round(part.col_cuts * scale).astype(np.int64))
    choice = choose_exchange(counts, volumes(counts, full), value_bytes, fabric)
    t1 = m.mean_ms(m.one_gpu) * 1e-3
    worst = serial = 0.0
    for b in builders:
        inside = float(b.inside.sum())
        diag = t1 * inside / replica_nnz
        offd = t1 * (b.nnz - inside) / replica_nnz
        offd_rows = float(np.count_nonzero(b.lengths - b.inside)) * grow
        add = (KERNEL_LAUNCH_S + 3 * offd_rows * value_bytes / fabric.device.memory_bytes_s
               if offd_rows else 0.0)
        worst = max(worst, max(diag, choice.chosen_s) + offd + add)
        serial = max(serial, diag + choice.chosen_s + offd + add)  # nothing hidden
    return {
        "parts": parts,
        "nodes": fabric.nodes(parts),
        "exchange": choice.kind,
        "exchange_us": choice.chosen_s * 1e6,
        "other_us": choice.other_s * 1e6,
        "largest_ghosts": max(c.ghosts for c in counts),
        "product_ms": worst * 1e3,
        "speedup": t1 / worst,
        "serial_speedup": t1 / serial,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.distributed_scaling")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    args = parser.parse_args()
    fabric = Fabric(gpus_per_node=args.gpus_per_node)
    print("| matrix | P | nodes | exchange | exchange (us) | other (us) | largest halo "
          "(entries) | product (ms) | speedup | speedup, nothing hidden |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m in MEASURED:
        one, two = m.mean_ms(m.one_gpu), m.mean_ms(m.two_gpu)
        print(f"| {m.name} | 1 | 1 | none | 0 | 0 | 0 | {one:.3f} (measured) | 1.00x | 1.00x |")
        for parts in PARTS:
            p = project(m, parts, fabric)
            measured = f" (measured {two:.3f}, {one / two:.2f}x)" if parts == 2 else ""
            print(f"| {m.name} | {parts} | {p['nodes']} | {p['exchange']} | "
                  f"{p['exchange_us']:.0f} | {p['other_us']:.0f} | {p['largest_ghosts']:,} | "
                  f"{p['product_ms']:.3f}{measured} | {p['speedup']:.2f}x | "
                  f"{p['serial_speedup']:.2f}x |")


if __name__ == "__main__":
    main()
