"""Measure the links the cost model assumes: NCCL allgather and paired send/recv by size.

Run it as ranks of a distributed run (``NCCL_NVLS_ENABLE=0`` is set by both launchers):

    python -m teaal_loops.distributed.launch -n 2 -- \
        python -m teaal_loops.distributed.calibrate --out calibrate.json

(or ``mpiexec -n P python -m teaal_loops.distributed.calibrate ...`` across hosts).

For each message size (powers of two from 4 KiB to 256 MiB a rank) it times, with CUDA events
on rank 0's stream, the median of ``--repeat`` allgathers (each rank contributing the size)
and of ``--repeat`` halo-style exchanges (every rank sends the size to, and receives it from,
each other rank, grouped), and fits ``alpha + bytes / beta`` to each by least squares over the
sizes (bytes: what one rank receives). Rank 0 writes the JSON (per size, and the fitted
``alpha_us`` and ``beta_gbs``); docs/distributed.md puts the fits in place of the model's
assumed latencies and efficiencies.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from teaal_loops.distributed.device import NcclTransport, nccl_communicator
from teaal_loops.distributed.world import detect_world
from teaal_loops.runtime import backend

SIZES = [1 << k for k in range(12, 29, 2)]  # 4 KiB .. 256 MiB a rank


def _time_ms(cupy: Any, op: Callable[[], Any], repeat: int) -> float:
    for _ in range(2):
        op()
    starts = [cupy.cuda.Event() for _ in range(repeat)]
    ends = [cupy.cuda.Event() for _ in range(repeat)]
    for s, e in zip(starts, ends, strict=True):
        s.record()
        op()
        e.record()
    ends[-1].synchronize()
    return float(statistics.median(cupy.cuda.get_elapsed_time(s, e)
                                   for s, e in zip(starts, ends, strict=True)))


def fit(received: Sequence[float], ms: Sequence[float]) -> dict[str, float]:
    """Least-squares ``t = alpha + bytes / beta``: alpha in us, beta in GB/s."""
    x = np.asarray(received, dtype=np.float64)
    t = np.asarray(ms, dtype=np.float64) * 1e-3
    slope, alpha = np.polyfit(x, t, 1)
    return {"alpha_us": float(alpha * 1e6), "beta_gbs": float(1.0 / slope / 1e9)
            if slope > 0 else float("inf")}


def measure(repeat: int, sizes: Sequence[int]) -> dict[str, Any] | None:
    world = detect_world()
    comm = nccl_communicator(world)
    cupy = backend.cupy_module()
    transport = NcclTransport(comm, np.float32)
    peers = [p for p in range(world.size) if p != world.rank]
    rows = []
    for size in sizes:
        n = size // 4
        send = cupy.ones(n, dtype=np.float32)
        gathered = cupy.empty(n * world.size, dtype=np.float32)
        inbox = cupy.empty(n * max(len(peers), 1), dtype=np.float32)
        recvs = [(p, inbox[i * n : (i + 1) * n]) for i, p in enumerate(peers)]
        sends = [(p, send) for p in peers]

        def allgather(send: Any = send, gathered: Any = gathered) -> None:
            with transport.ordered():
                pending = transport.allgather(send, gathered)
            pending.wait()

        def halo(sends: Any = sends, recvs: Any = recvs) -> None:
            with transport.ordered():
                pending = transport.exchange(sends, recvs)
            pending.wait()

        ag = _time_ms(cupy, allgather, repeat)
        hx = _time_ms(cupy, halo, repeat)
        rows.append({"bytes_per_rank": size, "received_bytes": size * len(peers),
                     "allgather_ms": ag, "halo_ms": hx})
    every = world.channel.allgather(rows)
    if world.rank != 0:
        return None
    slowest = [  # the exchange ends when the slowest rank's does
        {**r, "allgather_ms": max(e[i]["allgather_ms"] for e in every),
         "halo_ms": max(e[i]["halo_ms"] for e in every)}
        for i, r in enumerate(rows)
    ]
    received = [r["received_bytes"] for r in slowest]
    return {
        "ranks": world.size,
        "device": backend.device_info().name,
        "sizes": slowest,
        "allgather_fit": fit(received, [r["allgather_ms"] for r in slowest]),
        "halo_fit": fit(received, [r["halo_ms"] for r in slowest]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m teaal_loops.distributed.calibrate")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--max-bytes", type=int, default=SIZES[-1])
    parser.add_argument("--out", default=None, help="JSON file (rank 0); default stdout")
    args = parser.parse_args(argv)
    doc = measure(max(args.repeat, 1), [s for s in SIZES if s <= args.max_bytes])
    if doc is not None:
        text = json.dumps(doc, indent=1)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
        print(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
