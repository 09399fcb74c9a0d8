"""Timing one side without a GPU: throughput batches and latency intervals on a fake clock,
capping slow sides, graph replays checked before they are timed (or the reason), and the
second column warming every input copy."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from teaal_loops.bench import baselines, sides, timing
from teaal_loops.bench.cusparse.choice import GraphError
from tests.bench.fake_gpu import EVENT_MS, FakeGraph, FakeNumpyCupy


@pytest.fixture
def cp() -> FakeNumpyCupy:
    return FakeNumpyCupy()


def _op(cp: FakeNumpyCupy, cost: float, log: list[int]) -> Any:
    def op(i: int) -> None:
        log.append(i)
        cp.spend(cost)

    return op


def test_batch_size_fills_half_a_millisecond_within_bounds() -> None:
    assert timing.batch_size(0.005) == timing.MAX_BATCH
    assert timing.batch_size(0.1) == 5
    assert timing.batch_size(3.0) == 1
    assert timing.batch_size(float("nan")) == timing.MAX_BATCH


def test_throughput_numbers_calls_across_batches_and_divides_by_the_batch(
        cp: FakeNumpyCupy) -> None:
    log: list[int] = []
    samples = timing.back_to_back(timing.Timer(cp), _op(cp, 0.2, log), reps=3, batch=4)
    assert log == list(range(12))
    assert samples.reps == 3 and samples.median == pytest.approx(0.2 + EVENT_MS / 4)
    with pytest.raises(ValueError, match="batch 0"):
        timing.back_to_back(timing.Timer(cp), _op(cp, 0.2, log), reps=3, batch=0)


def test_latency_times_one_call_per_pair_of_events(cp: FakeNumpyCupy) -> None:
    log: list[int] = []
    samples = timing.one_at_a_time(timing.Timer(cp), _op(cp, 0.05, log), reps=4)
    assert log == [0, 1, 2, 3] and samples.median == pytest.approx(0.05 + EVENT_MS)


def test_time_side_gives_three_medians_and_caps_slow_sides(cp: FakeNumpyCupy) -> None:
    timer = timing.Timer(cp)
    log: list[int] = []
    out = sides.time_side(timer, _op(cp, 0.1, log), reps=5, warmup=2)
    assert log[:2] == [0, 1]  # warm-up first
    assert out["kernel"]["median_ms"] == pytest.approx(0.1 + EVENT_MS)
    assert out["kernel"]["queued"] is True and out["throughput"]["batch"] == 5
    assert out["latency"]["reps"] == 5
    assert sides.repetitions(timer, _op(cp, 30.0, log), 25, 1.0)[0::2] == (3, True)
    assert sides.repetitions(timer, _op(cp, 30.0, log), 25, 5.0)[0::2] == (25, False)
    assert sides.repetitions(timer, _op(cp, 30.0, log), 25, None)[0::2] == (3, True)
    assert sides.repetitions(timer, _op(cp, 1.0, log), 25, None)[0::2] == (25, False)


def _check(out: Any) -> dict[str, Any]:
    bad = int(np.count_nonzero(~(np.abs(out - 1.0) <= 1e-6)))
    return {"valid": bad == 0, "mismatches": bad}


def test_graph_side_checks_the_replay_before_timing_it(cp: FakeNumpyCupy) -> None:
    timer = timing.Timer(cp)
    out = np.zeros(4)

    def right() -> None:
        out[:] = 1.0
        cp.spend(0.01)

    good = sides.graph_side(timer, [lambda: FakeGraph(right)] * 2, out, _check, 3, 1)
    assert good["check"]["valid"] and good["throughput"]["reps"] == 3
    assert good["throughput"]["median_ms"] == pytest.approx(
        0.01 + EVENT_MS / good["throughput"]["batch"])
    half = sides.graph_side(timer, [lambda: FakeGraph(lambda: out.__setitem__(slice(0, 2), 1))],
                            out, _check, 3, 1)
    assert half["reason"].startswith("the graph's replay wrote a wrong result (2 entries")
    assert "throughput" not in half and math.isnan(out[3])  # poisoned, then left unwritten


def test_graph_side_says_why_a_call_cannot_be_captured(cp: FakeNumpyCupy) -> None:
    def refuse() -> Any:
        raise GraphError("not capturable: NotImplementedError: setStream in capture")

    def crash() -> Any:
        raise RuntimeError("cudaErrorStreamCaptureUnsupported\nmore")

    timer = timing.Timer(cp)
    out = np.zeros(2)
    assert sides.graph_side(timer, [refuse], out, _check, 3, 1) == {
        "reason": "not capturable: NotImplementedError: setStream in capture"}
    assert sides.graph_side(timer, [crash], out, _check, 3, 1) == {
        "reason": "not capturable: RuntimeError: cudaErrorStreamCaptureUnsupported"}


def test_the_second_column_uses_every_input_copy_before_timing(cp: FakeNumpyCupy) -> None:
    log: list[int] = []
    record = baselines.second_side(timing.Timer(cp), _op(cp, 0.3, log), what="one line",
                                   reps=3, warmup=1, copies=6, nbytes=10**6, copy_gbps=3000.0)
    assert log[:6] == list(range(6))
    assert record["what"] == "one line" and record["kernel"]["median_ms"] == pytest.approx(0.301)
    assert record["gbps"] == pytest.approx(10**6 / 0.301e-3 / 1e9)
