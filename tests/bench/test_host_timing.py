"""The ``host`` timing (Timer.host_issue) without a GPU: a fake CuPy logs the spin kernels and
synchronisations, a fake clock makes each call cost a known time, so the test sees that every
batch is issued behind a spin long enough to hold it, retried behind a longer one when it was
not, and reported as the median microseconds a call."""

from __future__ import annotations

import types
from typing import Any

import pytest

from teaal_loops.bench import timing


class FakeGpu:
    def __init__(self) -> None:
        self.log: list[tuple[str, float]] = []
        stream = types.SimpleNamespace(synchronize=lambda: self.log.append(("sync", 0.0)))
        self.cuda = types.SimpleNamespace(get_current_stream=lambda: stream)

    def RawKernel(self, source: str, name: str) -> Any:  # noqa: N802 (CuPy's name)
        assert name == "teaal_bench_spin"
        return lambda grid, block, args: self.log.append(("spin", int(args[0]) / 1e6))

    def uint64(self, value: int) -> int:
        return value


def _timer(monkeypatch: pytest.MonkeyPatch, costs_us: list[float]) -> tuple[Any, FakeGpu, Any]:
    """A Timer whose clock advances by the next of ``costs_us`` (cycled) at each call."""
    gpu = FakeGpu()
    clock = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])
    calls = [0]

    def op(_: int) -> None:
        clock[0] += costs_us[calls[0] % len(costs_us)] * 1e-6
        calls[0] += 1
        gpu.log.append(("call", 0.0))

    return timing.Timer(gpu), gpu, op


def test_each_batch_is_issued_behind_one_spin_and_the_median_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timer, gpu, op = _timer(monkeypatch, [5.0])
    cost = timer.host_issue(op, calls=10, batches=3, warmup=2)
    assert cost.queued and cost.calls == 10
    assert cost.us == pytest.approx((5.0, 5.0, 5.0))
    assert cost.median_us == pytest.approx(5.0)
    kinds = [k for k, _ in gpu.log]
    batch = ["sync", "spin"] + ["call"] * 10 + ["sync"]
    assert kinds == ["call"] * 2 + batch * 3
    spins = [ms for k, ms in gpu.log if k == "spin"]
    assert spins[0] == pytest.approx(2.0)  # at least 2 ms, 200 us a call otherwise
    assert all(ms * 0.9 > 10 * 5.0e-3 for ms in spins), "every batch fits inside its spin"


def test_a_batch_that_outlasts_its_spin_is_issued_again_behind_a_longer_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timer, gpu, op = _timer(monkeypatch, [300.0])  # 10 calls: 3 ms, more than the 2 ms spin
    cost = timer.host_issue(op, calls=10, batches=2, warmup=0, spin_ms=2.0)
    spins = [ms for k, ms in gpu.log if k == "spin"]
    assert spins[:2] == pytest.approx([2.0, 7.0])  # retried behind 2 x 3 ms + 1
    assert cost.queued and cost.us == pytest.approx((300.0, 300.0))


def test_a_call_that_waits_for_the_gpu_is_reported_as_not_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timer, gpu, op = _timer(monkeypatch, [3e6])  # a synchronising call: always past the spin
    monkeypatch.setattr(timing, "MAX_SPIN_MS", 50.0)
    cost = timer.host_issue(op, calls=2, batches=1, warmup=0)
    assert not cost.queued
    assert max(ms for k, ms in gpu.log if k == "spin") == pytest.approx(50.0)


def test_the_median_ignores_one_slow_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    # three batches of 4 calls: the second batch's calls cost 40 us, the others 4 us
    timer, _gpu, op = _timer(monkeypatch, [4.0] * 4 + [40.0] * 4 + [4.0] * 4)
    cost = timer.host_issue(op, calls=4, batches=3, warmup=0)
    assert cost.us == pytest.approx((4.0, 40.0, 4.0))
    assert cost.median_us == pytest.approx(4.0)


def test_rounds_interleave_the_calls_and_rotate_their_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpu = FakeGpu()
    clock = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])
    issued: list[str] = []

    def op(name: str, us: float) -> Any:
        def call(_: int) -> None:
            # the machine slows down as time passes: each later call costs more
            clock[0] += us * 1e-6 * (1.0 + len(issued) / 30.0)
            issued.append(name)
        return call

    costs = timing.Timer(gpu).host_rounds({"a": op("a", 4.0), "b": op("b", 5.0)},
                                          calls=3, rounds=4, warmup=0)
    batches = [issued[i] for i in range(0, len(issued), 3)]
    assert batches == ["a", "b", "b", "a", "a", "b", "b", "a"]  # one batch each a round
    assert all(len(set(issued[i:i + 3])) == 1 for i in range(0, len(issued), 3))
    assert len(costs["a"].us) == len(costs["b"].us) == 4
    assert costs["a"].queued and costs["b"].queued
    # the drift makes both medians grow, but round by round b stays about 1.25 a
    assert timing.paired_ratio(costs["b"].us, costs["a"].us) == pytest.approx(1.25, rel=0.1)
    assert costs["a"].min_us == min(costs["a"].us)
