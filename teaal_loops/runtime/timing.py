"""Timing kernel launches with CUDA events.

Warm-up launches first (module load and compilation stay out); then each repetition is
bracketed by its own pair of events, with the output re-zeroed before it where the schedule
accumulates (the zeroing lies outside the events). A short spin kernel is queued first so the
host can enqueue every repetition before the GPU reaches them: the events then time the
kernels back to back, not the Python launch overhead. One synchronisation at the end.
"""

from __future__ import annotations

import statistics
from typing import Any

from teaal_loops.runtime import backend

_SPIN_SOURCE = r"""
extern "C" __global__ void teaal_spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) { }
}
"""
_SPIN_CYCLES_PER_LAUNCH = 40_000  # about 20 us of host launch overhead per repetition at 2 GHz
_SPIN_MAX_CYCLES = 200_000_000  # 0.1 s


def _hold_stream(repetitions: int) -> None:
    """Keep the GPU busy while the host enqueues ``repetitions`` timed launches."""
    import numpy as np

    spin = backend.get_function(_SPIN_SOURCE, "teaal_spin")
    cycles = min(_SPIN_MAX_CYCLES, _SPIN_CYCLES_PER_LAUNCH * max(repetitions, 1))
    spin((1, 1, 1), (1, 1, 1), (np.int64(cycles),))


def time_launches(
    kernel: Any, prepared: Any, x: Any, y: Any, *, repeat: int = 20, warmup: int = 3
) -> list[float]:
    """Milliseconds of each of ``repeat`` launches of ``kernel`` on ``prepared`` (CUDA events)."""
    cupy = backend.cupy_module()
    for _ in range(max(warmup, 1)):
        kernel.zero_output(prepared, y)
        kernel.launch(prepared, x, y)
    cupy.cuda.get_current_stream().synchronize()
    starts = [cupy.cuda.Event() for _ in range(repeat)]
    ends = [cupy.cuda.Event() for _ in range(repeat)]
    _hold_stream(repeat)
    for start, end in zip(starts, ends, strict=True):
        kernel.zero_output(prepared, y)
        start.record()
        kernel.launch(prepared, x, y)
        end.record()
    ends[-1].synchronize()
    return [float(cupy.cuda.get_elapsed_time(s, e)) for s, e in zip(starts, ends, strict=True)]


def time_callable(fn: Any, *, repeat: int = 20, warmup: int = 3) -> list[float]:
    """Milliseconds of each of ``repeat`` calls of ``fn()`` (e.g. cuSPARSE through CuPy)."""
    cupy = backend.cupy_module()
    for _ in range(max(warmup, 1)):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    starts = [cupy.cuda.Event() for _ in range(repeat)]
    ends = [cupy.cuda.Event() for _ in range(repeat)]
    _hold_stream(repeat)
    for start, end in zip(starts, ends, strict=True):
        start.record()
        fn()
        end.record()
    ends[-1].synchronize()
    return [float(cupy.cuda.get_elapsed_time(s, e)) for s, e in zip(starts, ends, strict=True)]


def median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")
