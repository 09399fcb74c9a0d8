"""Timing one side of a comparison the same way whatever it is: a generated kernel, the best
cuSPARSE baseline, or the one-line second column (cupyx, PyTorch).

For a call ``op(i)`` (call ``i``: inputs rotate with ``i`` over the copies of a case), each
side gets three medians (:mod:`teaal_loops.bench.timing`):

``kernel``
    device time alone, every call queued behind a spin kernel (``Timer.queued``): what
    ``best`` and the device speedups compare;
``throughput``
    calls back to back between a pair of events, per call (``timing.back_to_back``): what an
    iterative solver sees;
``latency``
    one call between a pair of events, the GPU idle before it (``timing.one_at_a_time``).

``graph`` replays a CUDA graph of the call (one graph per copy) and times the replays for
throughput and latency, after checking what the replay wrote; where the call cannot be
captured it holds the one-line reason instead.

A side slower than :data:`SLOW_MS` a call (and, for a generated kernel, :data:`SLOW_FACTOR`
times slower than its baseline) is repeated only :data:`CAPPED_REPS` times and marked
``capped``: it would only burn device time, and a capped result never counts as ``best``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from teaal_loops.bench import timing

SLOW_MS = 20.0
SLOW_FACTOR = 10.0
CAPPED_REPS = 3

Check = Callable[[Any], dict[str, Any]]


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (tracebacks never reach a results document)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def repetitions(timer: Any, op: Callable[[int], Any], reps: int,
                baseline_ms: float | None) -> tuple[int, float, bool]:
    """``(reps to use, probe ms, capped)``: one synchronised call decides (module docstring);
    ``baseline_ms`` None caps on :data:`SLOW_MS` alone."""
    probe = float(timer.probe(op))
    slow = probe > SLOW_MS and (baseline_ms is None or not baseline_ms > 0
                                or probe > SLOW_FACTOR * baseline_ms)
    return (CAPPED_REPS, probe, True) if slow else (reps, probe, False)


def time_side(timer: Any, op: Callable[[int], Any], reps: int, warmup: int) -> dict[str, Any]:
    """``kernel``, ``throughput`` and ``latency`` of ``op`` (module docstring) after
    ``warmup`` calls; ``host_ms_per_call`` is the host's issuing time of one call."""
    for i in range(warmup):
        op(i)
    latency = timing.one_at_a_time(timer, op, reps)
    batch = timing.batch_size(latency.median)
    throughput = timing.back_to_back(timer, op, reps, batch)
    host = max(latency.host_ms / reps, throughput.host_ms / (reps * batch))
    kernel = timer.queued(op, reps, host_ms_per_rep=host)
    return {
        "kernel": {**kernel.as_dict(), "queued": bool(kernel.queued)},
        "throughput": {**throughput.as_dict(), "batch": batch},
        "latency": latency.as_dict(),
        "host_ms_per_call": host,
    }


def time_throughput(timer: Any, op: Callable[[int], Any], reps: int) -> dict[str, Any]:
    """Only the ``throughput`` block of ``op`` (for a second way of calling one side)."""
    probe = timing.one_at_a_time(timer, op, 1)
    batch = timing.batch_size(probe.median)
    return {**timing.back_to_back(timer, op, reps, batch).as_dict(), "batch": batch}


def graph_side(
    timer: Any,
    capture: Sequence[Callable[[], Any]],
    output: Any,
    check: Check,
    reps: int,
    warmup: int,
) -> dict[str, Any]:
    """Capture one graph per copy (``capture[j]()`` returns an object with ``launch()``),
    check what the first one's replay writes into ``output`` (poisoned with NaN first), then
    time the replays; ``{"reason": ...}`` where a capture fails or the replay is wrong."""
    try:
        graphs = [make() for make in capture]
    except Exception as exc:  # GraphError or CUDA's own refusal: the reason, in one line
        text = str(exc).strip().splitlines()
        reason = text[0] if text and text[0].startswith("not capturable") else None
        return {"reason": reason or f"not capturable: {first_line(exc)}"}
    output.fill(math.nan)
    graphs[0].launch()
    result = check(output)
    if not result.get("valid"):
        return {"reason": f"the graph's replay wrote a wrong result "
                          f"({result.get('mismatches')} entries outside the bound)",
                "check": result}
    k = len(graphs)

    def replay(i: int) -> None:
        graphs[i % k].launch()

    for i in range(max(warmup, k)):
        replay(i)
    latency = timing.one_at_a_time(timer, replay, reps)
    batch = timing.batch_size(latency.median)
    throughput = timing.back_to_back(timer, replay, reps, batch)
    return {"check": result, "throughput": {**throughput.as_dict(), "batch": batch},
            "latency": latency.as_dict()}
