"""Timing on the GPU with CUDA events: what each number measures.

Two ways to time a callable ``op(i)`` (``i`` = repetition, used to rotate inputs):

``per_call``  ("as called")
    Events recorded immediately before and after each call, calls back to back, the GPU idle
    between them whenever the host is slower than the GPU. The interval therefore includes
    the host's cost of issuing the call (Python, argument packing, CuPy's launch path) when
    that exceeds the GPU work: it is what a program calling ``op`` in a loop sees.

``queued``  ("kernel")
    A spin kernel first occupies the GPU for a while; the host enqueues all repetitions with
    their events behind it; then the GPU runs them back to back. Each interval is then the
    device time of that repetition's work alone (kernels plus the gaps between kernels of one
    call), without host overhead. The result is trusted only if the host finished enqueueing
    before the spin ended (``Samples.queued``); otherwise the run is retried with a longer spin
    and, failing that, reported as not queued. A call that synchronises with the host inside
    ``op`` cannot be queued and is reported so.

``loop``  ("loop")
    Wall-clock time of many calls issued back to back with one synchronisation at the end,
    divided by their number: the rate a Python loop calling ``op`` sustains. Where the host is
    slower than the GPU this is the host overhead of one call (what cuSPARSE through CuPy, the
    convenient call and the lean launch each cost the caller); otherwise the device time.

``host``  ("host")
    The host's own time per call, with the GPU never setting the pace: a spin kernel occupies
    the GPU, the host issues a batch of calls (far fewer than the driver's launch queue holds,
    so no call waits for the GPU) and times the issuing, then synchronises; the median over
    several batches, in microseconds a call (``Timer.host_issue``). A batch whose issuing
    outlasted the spin is retried behind a longer spin; a call that synchronises inside
    ``op`` cannot be measured so and is reported as not queued.

``back_to_back``  ("throughput")
    Events around a batch of calls issued back to back, the batch's interval divided by its
    calls; the median over several batches. What an iterative solver sees: the device time
    per call where the GPU is the slower side, the host's issuing rate where the host is
    (:func:`back_to_back`).

``one_at_a_time``  ("latency")
    One call between a pair of events, the GPU idle before it (the host synchronises first):
    the interval holds the host's issuing of the call and the GPU's running of it, the time
    one call takes from its start to its result (:func:`one_at_a_time`).

``before(i)`` runs outside the timed interval (e.g. to poison an output), ``op(i)`` inside.
``per_call`` and ``queued`` return per-repetition milliseconds (callers report the median);
``loop`` returns the mean milliseconds per call.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from teaal_loops.bench.roofline import copy_bytes, gbps

SPIN_SOURCE = r"""
extern "C" __global__ void teaal_bench_spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
"""
MAX_SPIN_MS = 2000.0
# ``host``: calls a batch (well below the launch queue's depth, about a thousand launches,
# also when each call is two operations) and batches a measurement
HOST_BATCH = 200
HOST_BATCHES = 9
HOST_ROUNDS = 15  # Timer.host_rounds: rounds of interleaved batches


@dataclass(frozen=True)
class Samples:
    """Per-repetition times (ms) of one measurement and whether it was queued behind a spin."""

    ms: tuple[float, ...]
    queued: bool = False
    host_ms: float = 0.0  # host time spent issuing all repetitions

    @property
    def median(self) -> float:
        return float(statistics.median(self.ms)) if self.ms else float("nan")

    @property
    def reps(self) -> int:
        return len(self.ms)

    def as_dict(self) -> dict[str, Any]:
        ms = sorted(self.ms)
        return {
            "median_ms": self.median,
            "min_ms": ms[0] if ms else None,
            "max_ms": ms[-1] if ms else None,
            "reps": self.reps,
        }


@dataclass(frozen=True)
class HostCost:
    """Host microseconds a call, one value per batch issued behind a spin (``host``)."""

    us: tuple[float, ...]
    queued: bool  # every batch finished issuing before its spin ended
    calls: int  # calls a batch

    @property
    def median_us(self) -> float:
        return float(statistics.median(self.us)) if self.us else float("nan")

    @property
    def min_us(self) -> float:
        return min(self.us) if self.us else float("nan")


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    """The median, over rounds, of the ratio of two timings taken in the same round (host
    costs from :meth:`Timer.host_rounds`' ``us``, or solves that took turns): a paired
    estimate, in which the machine's drift between rounds cancels."""
    ratios = [a / b for a, b in zip(numerator, denominator, strict=True) if b > 0]
    return float(statistics.median(ratios)) if ratios else float("nan")


class Timer:
    """Event-based timing on CuPy's current stream (see the module docstring)."""

    def __init__(self, cupy: Any) -> None:
        self.cp = cupy
        self._spin = cupy.RawKernel(SPIN_SOURCE, "teaal_bench_spin")

    def _events(self, n: int) -> list[Any]:
        return [self.cp.cuda.Event() for _ in range(n)]

    def spin(self, ms: float) -> None:
        """Occupy the GPU for ``ms`` milliseconds (one thread reading the global timer)."""
        self._spin((1,), (1,), (self.cp.uint64(int(ms * 1e6)),))

    def _issue(
        self,
        op: Callable[[int], Any],
        reps: int,
        before: Callable[[int], Any] | None,
        spin_ms: float,
    ) -> tuple[tuple[float, ...], float]:
        """Issue ``reps`` repetitions between events (behind a spin if ``spin_ms``); return the
        per-repetition device milliseconds and the host milliseconds spent issuing them."""
        starts, ends = self._events(reps), self._events(reps)
        self.cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        if spin_ms:
            self.spin(spin_ms)
        for i in range(reps):
            if before is not None:
                before(i)
            starts[i].record()
            op(i)
            ends[i].record()
        host = (time.perf_counter() - t0) * 1e3
        ends[-1].synchronize()
        get = self.cp.cuda.get_elapsed_time
        return tuple(float(get(s, e)) for s, e in zip(starts, ends, strict=True)), host

    def per_call(
        self,
        op: Callable[[int], Any],
        reps: int,
        *,
        before: Callable[[int], Any] | None = None,
    ) -> Samples:
        ms, host = self._issue(op, reps, before, 0.0)
        return Samples(ms, queued=False, host_ms=host)

    def queued(
        self,
        op: Callable[[int], Any],
        reps: int,
        *,
        before: Callable[[int], Any] | None = None,
        host_ms_per_rep: float = 0.1,
    ) -> Samples:
        """Device time per repetition, issued behind a spin kernel (module docstring)."""
        spin_ms = max(2.0, 4.0 * host_ms_per_rep * reps)
        for _ in range(3):
            spin_ms = min(spin_ms, MAX_SPIN_MS)
            ms, host = self._issue(op, reps, before, spin_ms)
            if host < 0.9 * spin_ms:
                return Samples(ms, queued=True, host_ms=host)
            if spin_ms >= MAX_SPIN_MS:
                break
            spin_ms = 2.0 * host + 1.0
        return Samples(ms, queued=False, host_ms=host)

    def loop(self, op: Callable[[int], Any], calls: int) -> float:
        """Milliseconds per call of ``calls`` back-to-back calls, synchronised once at the end."""
        self.cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for i in range(calls):
            op(i)
        self.cp.cuda.Device().synchronize()
        return (time.perf_counter() - t0) * 1e3 / max(calls, 1)

    def host_issue(
        self,
        op: Callable[[int], Any],
        calls: int = HOST_BATCH,
        batches: int = HOST_BATCHES,
        *,
        warmup: int = 20,
        spin_ms: float = 0.0,
    ) -> HostCost:
        """The host's microseconds a call of ``op``, issued in ``batches`` batches of ``calls``
        behind a spin kernel (module docstring, ``host``); the GPU runs nothing of a batch
        until the host has issued all of it."""
        return self.host_rounds({"op": op}, calls, batches, warmup=warmup,
                                spin_ms=spin_ms)["op"]

    def host_rounds(
        self,
        ops: Mapping[str, Callable[[int], Any]],
        calls: int = HOST_BATCH,
        rounds: int = HOST_ROUNDS,
        *,
        warmup: int = 20,
        spin_ms: float = 0.0,
    ) -> dict[str, HostCost]:
        """:meth:`host_issue` for several calls at once, interleaved: each round issues one
        batch of every op, in an order rotated from round to round. A shared machine's host
        speed drifts by a third over seconds (BENCHMARKS.md); interleaved, the k-th batches of
        all ops were issued within the same fraction of a second, so the drift falls on all of
        them alike and a ratio of two calls is best taken round by round (:func:`paired_ratio`)
        rather than from medians measured seconds apart."""
        names = list(ops)
        for name in names:
            for i in range(warmup):
                ops[name](i)
        spins = dict.fromkeys(names, spin_ms or max(2.0, 0.2 * calls))  # 200 us a call: ample
        us: dict[str, list[float]] = {name: [] for name in names}
        queued = dict.fromkeys(names, True)
        for r in range(rounds):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                per_call, fits, spins[name] = self._host_batch(ops[name], calls, spins[name])
                us[name].append(per_call)
                queued[name] = queued[name] and fits
        return {name: HostCost(tuple(us[name]), queued[name], calls) for name in names}

    def _host_batch(self, op: Callable[[int], Any], calls: int,
                    spin: float) -> tuple[float, bool, float]:
        """One batch of ``calls`` calls behind a spin of ``spin`` ms, retried behind a longer
        spin where the issuing outlasted it: (host us a call, whether it fitted, the spin to
        use next time: a third of the spin is enough)."""
        stream = self.cp.cuda.get_current_stream()
        for _attempt in range(3):
            stream.synchronize()
            self.spin(spin)
            t0 = time.perf_counter()
            for i in range(calls):
                op(i)
            host_ms = (time.perf_counter() - t0) * 1e3
            stream.synchronize()
            if host_ms < 0.9 * spin or spin >= MAX_SPIN_MS:
                break
            spin = min(MAX_SPIN_MS, 2.0 * host_ms + 1.0)
        fits = host_ms < 0.9 * spin
        return host_ms * 1e3 / calls, fits, max(2.0, min(spin, 3.0 * host_ms + 1.0))

    def probe(self, op: Callable[[int], Any]) -> float:
        """Milliseconds of one call, synchronised (to decide how often to repeat a slow one)."""
        start, end = self._events(2)
        self.cp.cuda.Device().synchronize()
        start.record()
        op(0)
        end.record()
        end.synchronize()
        return float(self.cp.cuda.get_elapsed_time(start, end))


def copy_bandwidth(
    cupy: Any, timer: Timer, *, nbytes: int = 2**30, reps: int = 20
) -> dict[str, Any]:
    """A device-to-device ``cudaMemcpyAsync`` of ``nbytes``: GB/s counting read plus write."""

    src = cupy.ones(nbytes // 4, dtype=cupy.float32)  # ones, not zeros: no compressible pages
    dst = cupy.empty_like(src)
    stream = cupy.cuda.get_current_stream()
    kind = getattr(cupy.cuda.runtime, "memcpyDeviceToDevice", 3)  # cudaMemcpyDeviceToDevice

    def copy(_: int) -> None:
        cupy.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, kind, stream.ptr)

    for _ in range(3):
        copy(0)
    samples = timer.queued(copy, reps, host_ms_per_rep=0.05)
    moved = copy_bytes(src.nbytes)
    return {
        "buffer_bytes": nbytes,
        "bytes_moved": moved,
        "method": "cudaMemcpyAsync device-to-device, bytes read + bytes written",
        **samples.as_dict(),
        "gbps": gbps(moved, samples.median),
        "queued": samples.queued,
    }


# ``back_to_back``: a batch lasts at least this long (so that the events' resolution does not
# matter), is at least one call and at most this many (well below the launch queue's depth)
BATCH_MS = 0.5
MAX_BATCH = 40


def batch_size(ms_per_call: float) -> int:
    """Calls a ``back_to_back`` batch holds for a call of ``ms_per_call`` (module constants)."""
    if not ms_per_call or ms_per_call <= 0 or ms_per_call != ms_per_call:  # NaN too
        return MAX_BATCH
    return max(1, min(MAX_BATCH, math.ceil(BATCH_MS / ms_per_call)))


def back_to_back(timer: Timer, op: Callable[[int], Any], reps: int, batch: int) -> Samples:
    """Throughput: ``reps`` batches of ``batch`` calls back to back, each batch between one
    pair of events; milliseconds a call per batch (module docstring). The calls are numbered
    0, 1, 2, ... across batches, so that inputs rotate as in the other timings."""
    if reps < 1 or batch < 1:
        raise ValueError(f"reps {reps} / batch {batch}: must be positive")
    cp = timer.cp
    starts, ends = timer._events(reps), timer._events(reps)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    i = 0
    for r in range(reps):
        starts[r].record()
        for _ in range(batch):
            op(i)
            i += 1
        ends[r].record()
    host = (time.perf_counter() - t0) * 1e3
    ends[-1].synchronize()
    get = cp.cuda.get_elapsed_time
    return Samples(tuple(float(get(s, e)) / batch for s, e in zip(starts, ends, strict=True)),
                   queued=False, host_ms=host)


def one_at_a_time(timer: Timer, op: Callable[[int], Any], reps: int) -> Samples:
    """Latency: each call alone between a pair of events, the GPU idle before it (module
    docstring); ``host_ms`` is the host's time issuing the calls, synchronisation excluded."""
    if reps < 1:
        raise ValueError(f"reps {reps}: must be positive")
    cp = timer.cp
    starts, ends = timer._events(reps), timer._events(reps)
    device = cp.cuda.Device()
    host = 0.0
    for r in range(reps):
        device.synchronize()
        t0 = time.perf_counter()
        starts[r].record()
        op(r)
        ends[r].record()
        host += time.perf_counter() - t0
    ends[-1].synchronize()
    get = cp.cuda.get_elapsed_time
    return Samples(tuple(float(get(s, e)) for s, e in zip(starts, ends, strict=True)),
                   queued=False, host_ms=host * 1e3)
