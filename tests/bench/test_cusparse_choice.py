"""Choosing among cuSPARSE algorithms and capturing graphs, with a fake timer and stream."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from teaal_loops.bench.cusparse.choice import (
    AlgorithmTime,
    GraphError,
    capture,
    pick,
    time_algorithms,
    time_graphs,
)
from teaal_loops.bench.cusparse.descriptors import Algorithm
from tests.bench.fake_cusparse import FakeTimer

ALGS = [Algorithm("DEFAULT", "cupy", 0), Algorithm("CSR_ALG1", "cupy", 2),
        Algorithm("CSR_ALG2", "cupy", 3)]


def _ops(state: dict[str, str], calls: list[str], fail: str = "") -> Any:
    def op_for(a: Algorithm) -> Any:
        def op(i: int) -> None:
            if a.label == fail:
                raise RuntimeError(f"CUSPARSE_STATUS_NOT_SUPPORTED ({a.label})\ndetail")
            state["label"] = a.label
            calls.append(a.label)
        return op
    return op_for


def test_the_lowest_queued_median_wins_and_every_algorithm_is_timed_both_ways() -> None:
    state: dict[str, str] = {}
    calls: list[str] = []
    timer = FakeTimer({"DEFAULT": 3.0, "CSR_ALG1": 2.0, "CSR_ALG2": 1.5}, state,
                      per_call_cost={"DEFAULT": 3.0, "CSR_ALG1": 1.0, "CSR_ALG2": 4.0})
    choice = time_algorithms(timer, ALGS, _ops(state, calls), reps=4, warmup=2)
    assert choice.winner == "CSR_ALG2" and choice.by == "queued"
    assert choice.per_call_winner == "CSR_ALG1"  # latency and device time may disagree
    assert [(m, label) for m, label, _ in timer.log] == [
        (m, a.label) for a in ALGS for m in ("per_call", "queued")]
    assert calls.count("DEFAULT") == 2 + 4 + 4  # warm-up, per-call, queued
    assert choice.time_of("CSR_ALG1").per_call_ms == 1.0
    record = choice.as_dict()
    assert record["winner"] == "CSR_ALG2"
    assert [a["label"] for a in record["algorithms"]] == ["DEFAULT", "CSR_ALG1", "CSR_ALG2"]
    assert record["algorithms"][2]["queued_ms"] == 1.5


def test_an_algorithm_that_fails_is_recorded_with_one_line_and_cannot_win() -> None:
    state: dict[str, str] = {}
    timer = FakeTimer({"DEFAULT": 3.0, "CSR_ALG1": 2.0, "CSR_ALG2": 0.1}, state)
    choice = time_algorithms(timer, ALGS, _ops(state, [], fail="CSR_ALG2"), reps=3)
    assert choice.winner == "CSR_ALG1"
    failed = choice.time_of("CSR_ALG2")
    assert failed.error == "RuntimeError: CUSPARSE_STATUS_NOT_SUPPORTED (CSR_ALG2)"
    assert choice.as_dict()["algorithms"][2] == {"label": "CSR_ALG2", "error": failed.error}


def test_an_invalid_algorithm_is_timed_but_never_wins() -> None:
    state: dict[str, str] = {}
    timer = FakeTimer({"DEFAULT": 3.0, "CSR_ALG1": 2.0, "CSR_ALG2": 0.1}, state)
    choice = time_algorithms(timer, ALGS, _ops(state, []), reps=2, invalid=["CSR_ALG2"])
    assert choice.winner == "CSR_ALG1"
    assert choice.time_of("CSR_ALG2").queued_ms == 0.1
    assert choice.as_dict()["algorithms"][2]["valid"] is False


def test_without_a_trusted_queued_run_the_per_call_median_decides() -> None:
    state: dict[str, str] = {}
    timer = FakeTimer({"DEFAULT": 1.0, "CSR_ALG1": 2.0, "CSR_ALG2": 3.0}, state,
                      queued_ok=False,
                      per_call_cost={"DEFAULT": 9.0, "CSR_ALG1": 5.0, "CSR_ALG2": 7.0})
    choice = time_algorithms(timer, ALGS, _ops(state, []), reps=2)
    assert (choice.winner, choice.by) == ("CSR_ALG1", "per_call")


def test_pick_with_nothing_runnable_has_no_winner() -> None:
    times = [AlgorithmTime("A", error="E: refused"), AlgorithmTime("B", 1.0, True, 1.0,
                                                                   valid=False)]
    choice = pick(times)
    assert choice.winner is None and choice.by == "none"
    with pytest.raises(KeyError):
        choice.time_of("C")


def test_bad_repetition_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="reps 0"):
        time_algorithms(FakeTimer({}, {}), ALGS, lambda a: (lambda i: None), reps=0)


class _Stream:
    instances: list[_Stream] = []

    def __init__(self, non_blocking: bool = False, fail_begin: bool = False) -> None:
        self.ptr = 7
        self.events: list[str] = []
        self.fail_begin = fail_begin
        _Stream.instances.append(self)

    def __enter__(self) -> _Stream:
        self.events.append("enter")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.events.append("exit")

    def begin_capture(self) -> None:
        if self.fail_begin:
            raise RuntimeError("cudaErrorStreamCaptureUnsupported: operation not permitted")
        self.events.append("begin")

    def end_capture(self) -> str:
        self.events.append("end")
        return "graph"


def _fake_cupy(**stream_kw: Any) -> Any:
    return SimpleNamespace(cuda=SimpleNamespace(Stream=lambda non_blocking: _Stream(
        non_blocking, **stream_kw)))


def test_capture_returns_the_graph_of_the_launch() -> None:
    ran: list[str] = []
    assert capture(_fake_cupy(), lambda: ran.append("launch")) == "graph"
    assert ran == ["launch"]
    assert _Stream.instances[-1].events == ["enter", "begin", "end", "exit"]


def test_a_launch_refused_in_capture_ends_the_capture_and_gives_the_reason() -> None:
    def refuse() -> None:
        raise RuntimeError("CUSPARSE_STATUS_EXECUTION_FAILED\ntrace")

    with pytest.raises(GraphError) as info:
        capture(_fake_cupy(), refuse)
    assert str(info.value) == "not capturable: RuntimeError: CUSPARSE_STATUS_EXECUTION_FAILED"
    assert _Stream.instances[-1].events == ["enter", "begin", "end", "exit"]
    with pytest.raises(GraphError, match="not capturable: RuntimeError: cudaErrorStream"):
        capture(_fake_cupy(fail_begin=True), lambda: None)


def test_graph_replays_rotate_over_the_graphs_and_report_both_medians() -> None:
    launched: list[int] = []
    graphs = [SimpleNamespace(launch=lambda n=n: launched.append(n)) for n in range(3)]
    state = {"label": "g"}
    record = time_graphs(FakeTimer({"g": 0.5}, state, per_call_cost={"g": 0.8}), graphs,
                         reps=6, warmup=1)
    assert record["queued_ms"] == 0.5 and record["per_call_ms"] == 0.8 and record["queued"]
    assert launched[:3] == [0, 1, 2]  # warm-up touches every graph once
    assert launched[3:] == [0, 1, 2, 0, 1, 2] * 2
    assert not math.isnan(record["host_ms_per_call"])
