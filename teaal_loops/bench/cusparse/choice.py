"""Timing a baseline's algorithms, keeping the fastest, and capturing a launch in a CUDA graph.

Every algorithm is timed twice with the project's :class:`~teaal_loops.bench.timing.Timer`:
``per_call`` (events around each launch, launches back to back: what a Python loop sees) and
``queued`` (all launches enqueued behind a spin kernel: device time alone). The winner is the
algorithm with the lowest queued median; where no algorithm's queued run could be trusted
(the host did not finish enqueueing before the spin ended) the per-call median decides, and
the choice says so.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from teaal_loops.bench.cusparse.descriptors import Algorithm, first_line


@dataclass(frozen=True)
class AlgorithmTime:
    """One algorithm's medians (ms); ``error`` when it failed to run (then no times)."""

    label: str
    queued_ms: float = math.nan
    queued: bool = False  # the queued run was trusted
    per_call_ms: float = math.nan
    host_ms_per_call: float = math.nan
    error: str = ""
    valid: bool = True  # its result matched the reference (an invalid one never wins)

    def as_dict(self) -> dict[str, Any]:
        if self.error:
            return {"label": self.label, "error": self.error}
        return {
            "label": self.label,
            "queued_ms": self.queued_ms,
            "queued": self.queued,
            "per_call_ms": self.per_call_ms,
            "host_ms_per_call": self.host_ms_per_call,
            "valid": self.valid,
        }


@dataclass(frozen=True)
class Choice:
    """Every algorithm's times and the winner (``None`` when none ran)."""

    times: tuple[AlgorithmTime, ...]
    winner: str | None
    by: str  # "queued" or "per_call": which median decided
    per_call_winner: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def time_of(self, label: str) -> AlgorithmTime:
        for t in self.times:
            if t.label == label:
                return t
        raise KeyError(label)

    def as_dict(self) -> dict[str, Any]:
        return {
            "algorithms": [t.as_dict() for t in self.times],
            "winner": self.winner,
            "decided_by": self.by,
            "per_call_winner": self.per_call_winner,
        }


def pick(times: Sequence[AlgorithmTime]) -> Choice:
    """The fastest of ``times`` by queued median (per-call median where no queued run was
    trusted); failed or invalid algorithms never win."""
    ran = [t for t in times if not t.error and t.valid and not math.isnan(t.per_call_ms)]
    if not ran:
        return Choice(tuple(times), None, "none")
    queued = [t for t in ran if t.queued and not math.isnan(t.queued_ms)]
    per_call = min(ran, key=lambda t: t.per_call_ms).label
    if queued:
        return Choice(tuple(times), min(queued, key=lambda t: t.queued_ms).label, "queued",
                      per_call)
    return Choice(tuple(times), per_call, "per_call", per_call)


def time_algorithms(
    timer: Any,
    algorithms: Sequence[Algorithm],
    op_for: Callable[[Algorithm], Callable[[int], Any]],
    *,
    reps: int = 25,
    warmup: int = 3,
    invalid: Collection[str] = (),
) -> Choice:
    """Time ``op_for(a)`` for every algorithm ``a`` (per-call, then queued) and pick the
    fastest. An algorithm that raises is recorded with its one-line error and skipped; those
    labelled in ``invalid`` (results that disagreed with a reference) are timed but never
    win."""
    if reps < 1 or warmup < 0:
        raise ValueError(f"reps {reps} / warmup {warmup}: out of range")
    times = []
    for algorithm in algorithms:
        op = op_for(algorithm)
        try:
            for i in range(warmup):
                op(i)
            call = timer.per_call(op, reps)
            host = call.host_ms / reps
            queued = timer.queued(op, reps, host_ms_per_rep=host)
        except Exception as exc:  # an algorithm cuSPARSE refuses for this matrix or layout
            times.append(AlgorithmTime(algorithm.label, error=first_line(exc)))
            continue
        times.append(AlgorithmTime(algorithm.label, queued.median, bool(queued.queued),
                                   call.median, host, valid=algorithm.label not in invalid))
    return pick(times)


class GraphError(Exception):
    """A launch could not be captured in a CUDA graph; ``str`` is the one-line reason."""


def capture(cupy: Any, launch: Callable[[], Any]) -> Any:
    """``launch()`` captured on a new non-blocking stream (the legacy default stream cannot
    capture): a ``cupy.cuda.Graph``, or :class:`GraphError` with the reason cuSPARSE (or CUDA)
    gave. ``launch`` must have run once before, so that nothing in it initialises lazily."""
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        try:
            stream.begin_capture()
        except Exception as exc:
            raise GraphError(f"not capturable: {first_line(exc)}") from None
        try:
            launch()
        except Exception as exc:
            with contextlib.suppress(Exception):  # end the capture; the first error matters
                stream.end_capture()
            raise GraphError(f"not capturable: {first_line(exc)}") from None
        try:
            graph = stream.end_capture()
        except Exception as exc:
            raise GraphError(f"not capturable: {first_line(exc)}") from None
    return graph


def time_graphs(
    timer: Any, graphs: Sequence[Any], *, reps: int = 25, warmup: int = 3
) -> dict[str, Any]:
    """Replay ``graphs[i % len(graphs)]`` on the current stream: queued and per-call medians."""
    k = len(graphs)

    def replay(i: int) -> None:
        graphs[i % k].launch()

    for i in range(max(warmup, k)):
        replay(i)
    call = timer.per_call(replay, reps)
    queued = timer.queued(replay, reps, host_ms_per_rep=call.host_ms / reps)
    return {
        "queued_ms": queued.median,
        "queued": bool(queued.queued),
        "per_call_ms": call.median,
        "host_ms_per_call": call.host_ms / reps,
    }
