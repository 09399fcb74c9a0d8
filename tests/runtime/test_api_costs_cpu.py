"""The API-cost measurement (teaal_loops.bench.api_costs) without a GPU: its problems are the
ones it claims, PageRank converges to the stationary distribution, the targets are judged as
stated, and the whole run goes through on the fake GPU (NumPy and SciPy standing in)."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.bench import api_costs
from teaal_loops.bench.timing import HostCost
from teaal_loops.runtime import gpu_available

from .conftest import FakeGpu


def test_poisson_is_the_five_point_stencil() -> None:
    n = 4
    A = api_costs.poisson_2d(n)
    dense = np.zeros((n * n, n * n))
    for i in range(n):
        for j in range(n):
            row = i * n + j
            dense[row, row] = 4
            for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                if 0 <= i + di < n and 0 <= j + dj < n:
                    dense[row, (i + di) * n + j + dj] = -1
    np.testing.assert_array_equal(A.toarray(), dense)
    assert A.nnz == 5 * n * n - 4 * n and A.has_sorted_indices
    assert api_costs.poisson_2d(3, np.float32).dtype == np.float32


def test_pagerank_matrix_and_iteration() -> None:
    # 0 -> 1, 0 -> 2 (twice: one edge), 1 -> 2, 2 -> 0, 3 -> 2; node 4 has no out-edges
    G = sp.coo_matrix((np.ones(6), ([0, 0, 0, 1, 2, 3], [1, 2, 2, 2, 0, 2])), shape=(5, 5))
    M, dangling = api_costs.pagerank_matrix(G)
    assert dangling.tolist() == [False, False, False, False, True]
    np.testing.assert_allclose(np.asarray(M.sum(axis=0)).ravel(), [1, 1, 1, 1, 0])
    assert M[1, 0] == M[2, 0] == 0.5 and M[0, 2] == 1.0
    ranks = api_costs.pagerank(M.__matmul__, dangling.astype(np.float64), 200, np)
    # the stationary vector of the Google matrix, densely
    alpha, n = 0.85, 5
    S = M.toarray() + np.outer(np.ones(n), dangling) / n
    google = alpha * S + (1 - alpha) / n
    w, v = np.linalg.eig(google)
    stationary = np.real(v[:, np.argmax(np.real(w))])
    stationary /= stationary.sum()
    np.testing.assert_allclose(ranks, stationary, rtol=1e-10, atol=1e-12)
    assert ranks.sum() == pytest.approx(1.0)


def test_per_call_counts_calls_and_synchronises() -> None:
    calls, syncs = [0], [0]
    stream = types.SimpleNamespace(synchronize=lambda: syncs.__setitem__(0, syncs[0] + 1))
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(get_current_stream=lambda: stream))
    out = api_costs.per_call_us(cupy, lambda: calls.__setitem__(0, calls[0] + 1), 50, warmup=5)
    assert calls[0] == 55 and syncs[0] == 2
    assert 0 < out["issue_us"] <= out["wall_us"]


def _timing(host_us: float, loop_us: float = 1.0, fastest: float | None = None) -> dict[str, Any]:
    return {"host_us": host_us, "wall_us": loop_us, "host_min_us": fastest or host_us}


def _report(prepared_us: float, matrix_us: float, cg_speedup: float) -> dict[str, Any]:
    kernel: dict[str, Any] = {m: _timing(1.0) for m in ("launch", "launch_into",
                                                         "call_scipy_matrix", "graph_replay")}
    # the loop column is never judged: make it contradict the host column
    kernel.update(call_prepared=_timing(prepared_us, loop_us=50.0),
                  call_cupyx_matrix=_timing(matrix_us, loop_us=1.0), device_us=3.0)
    cg = [{"dtype": d, "rows": 10, "operator": "auto (x)", "key": "auto",
           "wall_us_per_iter": 1.0, "device_us_per_iter": 1.0,
           "speedup_over_cupyx": cg_speedup, "ok": True} for d in ("float64", "float32")]
    return {"device": "fake", "quick": True, "cg": cg, "pagerank": [], "host": {
        "kernels": {"merge_path": kernel},
        "cupyx": {"call": _timing(2.0), "device_us": 2.0},
        "auto": {"choice": "x", "auto_call": _timing(12.0, loop_us=99.0),
                 "chosen_call": _timing(10.0), "chosen_call_prepared": _timing(9.0)}}}


def test_targets_are_judged_on_the_host_column() -> None:
    good = _report(prepared_us=9.0, matrix_us=12.0, cg_speedup=1.3)
    assert all(t["met"] for t in api_costs.judge(good))
    bad = _report(prepared_us=11.0, matrix_us=20.0, cg_speedup=0.9)
    met = {t["target"]: t["met"] for t in api_costs.judge(bad)}
    assert met == {
        api_costs.PREPARED_CALL: False,
        "kernel(A, x) / kernel(prepared, x) (worst schedule)": False,
        "auto(A, x) / chosen(A, x)": True,
        "CG iteration, cupyx / ours, float64 (auto)": False,
        "CG iteration, cupyx / ours, float32 (auto)": False,
    }
    good["targets"] = api_costs.judge(good)
    table = api_costs.markdown(good)
    assert "| merge_path | 1.0 / 1.0 | 1.0 / 1.0 | 9.0 / 50.0 | 12.0 / 1.0 | 1.0 / 1.0 | " \
        "1.0 / 1.0 | 3.0 |" in table
    assert f"| {api_costs.PREPARED_CALL} | 9.00 | <= 10.0 | True |" in table
    assert "prepared call, host us, median (worst schedule) 9.00" in table


def test_the_prepared_call_is_judged_by_its_fastest_batch_and_its_median_is_shown() -> None:
    report = _report(prepared_us=12.0, matrix_us=12.0, cg_speedup=1.3)
    kernel = report["host"]["kernels"]["merge_path"]
    kernel["call_prepared"]["host_min_us"] = 9.5  # a quiet batch; the median fell in a slow one
    kernel["graph_replay"] = _timing(3.9)
    report["targets"] = api_costs.judge(report)
    met = {t["target"]: (t["value"], t["met"]) for t in report["targets"]}
    assert met[api_costs.PREPARED_CALL] == (9.5, True)
    table = api_costs.markdown(report)
    assert "prepared call, host us, median (worst schedule) 12.00" in table
    assert "graph replay, host us, median (worst schedule) 3.90" in table
    del kernel["call_prepared"]["host_min_us"]  # an older report: the median is all there is
    assert api_costs.target_values(report)[api_costs.PREPARED_CALL] == 12.0


def test_the_ratio_targets_compare_calls_round_by_round() -> None:
    # the machine slows down between rounds: medians of each call, taken over different
    # rounds, would mislead; the paired ratio is 1.25 in every round
    report = _report(prepared_us=9.0, matrix_us=12.0, cg_speedup=1.3)
    kernel = report["host"]["kernels"]["merge_path"]
    kernel["call_prepared"].update(paired=True, host_batches_us=[4.0, 8.0, 16.0, 32.0, 64.0])
    kernel["call_cupyx_matrix"].update(paired=True, host_batches_us=[5.0, 10.0, 20.0, 40.0, 80.0])
    kernel["call_prepared"]["host_us"], kernel["call_cupyx_matrix"]["host_us"] = 16.0, 40.0
    values = api_costs.target_values(report)
    assert values["kernel(A, x) / kernel(prepared, x) (worst schedule)"] == pytest.approx(1.25)
    # a report written before the rounds were interleaved: the ratio of the medians
    del kernel["call_prepared"]["paired"]
    values = api_costs.target_values(report)
    assert values["kernel(A, x) / kernel(prepared, x) (worst schedule)"] == pytest.approx(2.5)


def test_targets_not_measured_say_so() -> None:
    report = _report(prepared_us=9.0, matrix_us=12.0, cg_speedup=1.3)
    report["cg"] = []  # --host-only
    report["targets"] = api_costs.judge(report)
    met = {t["target"]: t["met"] for t in report["targets"]}
    assert met["CG iteration, cupyx / ours, float64 (auto)"] is None
    assert met[api_costs.PREPARED_CALL] is True
    table = api_costs.markdown(report)
    assert "| CG iteration, cupyx / ours, float32 (auto) | nan | > 1.0 | not measured |" in table
    assert "| CG |" not in table


def test_a_cg_run_is_ok_only_when_it_ran_every_iteration_and_agrees() -> None:
    ref = {"dtype": "float64", "maxiter": 200, "iterations": 200, "residual": 0.1}
    ours = dict(ref, key="auto", iterate_rel_diff=1e-12, residual=0.1)
    assert api_costs._cg_ok(ref, ref) and api_costs._cg_ok(ours, ref)
    assert not api_costs._cg_ok(dict(ours, iterations=150), ref)
    assert not api_costs._cg_ok(dict(ours, iterate_rel_diff=1e-3), ref)
    assert not api_costs._cg_ok(dict(ours, residual=0.2), ref)


@pytest.mark.skipif(gpu_available(), reason="checks the message shown where there is no GPU")
def test_without_a_gpu_it_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert api_costs.main(["--out", str(tmp_path / "r.json"), "--quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ("CuPy is not importable" in err or "CUDA device" in err)


class FakeTimer:
    """bench's event Timer needs CUDA events and a spin kernel: this one calls ``op`` as the
    real one would and reports fixed times."""

    def __init__(self, cupy: object) -> None:
        self.host_calls = 0

    def queued(self, op, reps, *, before=None):  # type: ignore[no-untyped-def]
        for i in range(reps):
            if before is not None:
                before(i)
            op(i)
        return types.SimpleNamespace(median=0.001)

    def host_rounds(self, ops, calls=200, rounds=15):  # type: ignore[no-untyped-def]
        for op in ops.values():
            for i in range(calls * rounds):
                op(i)
        self.host_calls += 1
        return {name: HostCost((2.0,) * rounds, True, calls) for name in ops}


@pytest.mark.parametrize("host_only", [False, True])
def test_the_whole_run_on_the_fake_gpu(fake_gpu: FakeGpu, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch, host_only: bool) -> None:
    monkeypatch.setattr(api_costs, "Timer", FakeTimer)
    out = tmp_path / "r.json"
    report = api_costs.measure(out, quick=True, host_only=host_only)
    assert json.loads(out.read_text())["targets"] == json.loads(json.dumps(report["targets"]))
    assert report["correct"], "the fake computes exact products: every check must pass"
    assert set(report["host"]["kernels"]) == set(api_costs.SCHEDULES)
    for row in report["host"]["kernels"].values():
        for call in api_costs.CALLS:
            assert row[call]["host_us"] == 2.0 and row[call]["host_queued"]
            assert row[call]["paired"] and len(row[call]["host_batches_us"]) == 3
            assert row[call]["wall_us"] > 0
    printed = capsys.readouterr().out
    assert "| target | value | limit | met |" in printed
    if host_only:
        assert report["cg"] == [] and report["pagerank"] == []
        assert "not measured" in printed
        return
    cg = report["cg"]
    assert {r["dtype"] for r in cg} == {"float64", "float32"}
    assert all(r["iterations"] == r["maxiter"] == 50 for r in cg)
    assert {r.get("key") for r in cg} == {None, "auto", "thread_mapped", "merge_path"}
    assert [r["dtype"] for r in report["pagerank"]] == ["float64", "float32"]


def test_the_solvers_speedup_is_taken_round_by_round() -> None:
    paired_speedup = api_costs.paired_ratio  # baseline / ours, round by round
    # the machine is twice as slow in the last two rounds; ours is 1.2x faster in each round
    baseline = [300.0, 300.0, 300.0, 600.0, 600.0]
    ours = [250.0, 250.0, 250.0, 500.0, 500.0]
    assert paired_speedup(baseline, ours) == pytest.approx(1.2)
    # ours met a slow moment in round 2, the baseline in round 3: the columns' medians
    # (300 / 500) would say 0.6, the rounds say 1.2 twice out of three
    assert paired_speedup([300.0, 300.0, 600.0], [250.0, 500.0, 500.0]) == \
        pytest.approx(1.2)
