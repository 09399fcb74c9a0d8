"""The benchmark harness end to end on the CPU: NumPy stands in for CuPy, a kernel that
multiplies with SciPy for the generated one and fake baselines for cuSPARSE (the ``fake_gpu``
fixture, :mod:`tests.bench.fake_gpu`). This checks the harness's own logic (rotation,
validation, the three timings and graphs of every side, the best cuSPARSE, auto, best,
speedups, JSON, errors), not the GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teaal_loops.bench import BenchOptions, load, markdown, run_bench
from teaal_loops.bench.suite import MatrixEntry
from teaal_loops.bench.variants import Variant
from teaal_loops.types import DeviceInfo
from tests.bench.conftest import FakeEnv
from tests.bench.fake_gpu import BASELINE_COSTS, COSTS, EVENT_MS
from tests.conftest import REPO

SPECS = REPO / "specs"


def test_harness_end_to_end(fake_gpu: FakeEnv, tmp_path: Path) -> None:
    mtx = tmp_path / "pat.mtx"
    mtx.write_text("%%MatrixMarket matrix coordinate pattern general\n3 3 4\n1 1\n1 3\n2 2\n3 1\n")
    entries = [
        MatrixEntry("pat", "corpus", "file", path=mtx),
        MatrixEntry("uni", "custom", "synthetic", text="uniform:rows=200,nnz=3000,seed=1"),
        MatrixEntry("band", "large", "gpu", generator="banded", options={"rows": 400, "width": 8}),
    ]
    variants = [
        Variant(SPECS / "thread_mapped.yaml"),
        Variant(SPECS / "group_mapped.yaml", {"BLOCK_SIZE": 2}),
        Variant(SPECS / "group_mapped.yaml", {"BLOCK_SIZE": 8}),
        Variant(SPECS / "work_oriented.yaml"),
        Variant(SPECS / "merge_path.yaml"),
    ]
    out = tmp_path / "r.json"
    doc = run_bench(BenchOptions(entries, variants, dtypes=("float32", "float64"), reps=5,
                                 warmup=1, json_path=out, command="test"))
    assert json.loads(out.read_text())["summary"] == json.loads(json.dumps(doc["summary"]))
    assert load(out)["schema"] == "teaal-loops-bench/2"  # what it wrote passes its own check
    assert doc["libraries"]["sddmm"] == "nvmath"
    cases = doc["cases"]
    assert [(c["matrix"], c["dtype"], c["kernel"], c["width"]) for c in cases] == [
        (m, d, "spmv", None) for m in ("pat", "uni", "band") for d in ("float32", "float64")]
    for c in cases:
        by = {r["label"]: r for r in c["results"]}
        assert by["merge_path"]["valid"] and by["group_mapped[BLOCK_SIZE=8]"]["valid"]
        for wrong in ("work_oriented", "thread_mapped"):  # 1.5x values; last row unwritten
            assert not by[wrong]["valid"] and by[wrong]["mismatches"] > 0
            assert by[wrong]["error"].startswith("wrong result:") and "kernel" not in by[wrong]
        assert by["group_mapped[BLOCK_SIZE=2]"]["bug"]
        assert by["group_mapped[BLOCK_SIZE=2]"]["error"] == "RuntimeError: nvrtc: template bug"
        merge = by["merge_path"]
        assert merge["accumulates"] and merge["kernel"]["reps"] == 5
        assert {"kernel", "throughput", "latency", "call", "graph"} <= set(merge)
        # each median is the launch's cost plus one event step (the fake clock)
        assert merge["kernel"]["median_ms"] == pytest.approx(COSTS["merge_path"] + EVENT_MS)
        assert merge["latency"]["median_ms"] == pytest.approx(COSTS["merge_path"] + EVENT_MS)
        batch = merge["throughput"]["batch"]
        assert merge["throughput"]["median_ms"] == pytest.approx(
            COSTS["merge_path"] + EVENT_MS / batch)
        assert merge["graph"]["check"]["valid"] and merge["graph"]["throughput"]["reps"] == 5
        assert c["best"]["label"] == "merge_path"  # cheapest of the valid ones
        # the best cuSPARSE: the fastest algorithm that gave a right result, BROKEN never
        cs = c["cusparse"]
        assert cs["winner"] == "CSR_ALG1" and cs["library"] == "cupy"
        assert {a["label"]: a["check"]["valid"] for a in cs["algorithms"]}["BROKEN"] is False
        assert cs["preprocess"] == {"ran": True, "algorithms": ["CSR_ALG1+preprocess"],
                                    "winner_preprocessed": False}
        assert cs["kernel"]["median_ms"] == pytest.approx(BASELINE_COSTS["CSR_ALG1"] + EVENT_MS)
        assert cs["graph"]["captured"] == "CSR_ALG1 through cupy"
        assert merge["speedup"]["kernel"] == pytest.approx(
            cs["kernel"]["median_ms"] / merge["kernel"]["median_ms"])
        assert merge["speedup"]["graph"] == pytest.approx(
            cs["graph"]["throughput"]["median_ms"] / merge["graph"]["throughput"]["median_ms"])
        second = c["second"]
        assert second["what"].startswith("cupyx") and second["kernel"]["queued"] is True
        assert merge["second_speedup"]["call"] == pytest.approx(
            second["throughput"]["median_ms"] / merge["call"]["median_ms"])
        assert c["best"]["speedup"]["kernel"] == merge["speedup"]["kernel"]
        assert sum(1 for r in c["results"] if r.get("auto")) == 1
        assert c["auto"]["label"] == c["auto_choice"]["label"]
        assert c["copies"] >= 1 and c["compulsory_bytes"] > 0
        # the limit model of the case, and how close each side comes to it
        limit = c["limit"]
        assert limit["compulsory_bytes"] == c["compulsory_bytes"] and limit["limit_us"] > 0
        assert merge["of_limit"] == pytest.approx(
            limit["limit_us"] / (merge["kernel"]["median_ms"] * 1e3))
        assert cs["of_limit"] == pytest.approx(
            limit["limit_us"] / (cs["kernel"]["median_ms"] * 1e3))
    # rotation: small matrices are copied (up to max_copies) so the L2 cannot hold them, and
    # every copy got a baseline of its own
    assert cases[0]["copies"] == 32
    assert cases[0]["stats"]["nnz"] == 4
    text = markdown(doc)
    assert "| pat | f32 |" in text and "CSR_ALG1" in text
    assert "limit us (bound)" in text


def test_time_budget_skips_matrices_and_says_so(fake_gpu: FakeEnv, tmp_path: Path) -> None:
    entries = [MatrixEntry(f"u{i}", "custom", "synthetic", text=f"uniform:rows=50,nnz=200,seed={i}")
               for i in range(3)]
    doc = run_bench(BenchOptions(entries, [Variant(SPECS / "merge_path.yaml")], reps=2,
                                 warmup=0, time_budget_s=1e-9))
    assert doc["incomplete"] is True
    assert doc["skipped"] == ["u0", "u1", "u2"]


def test_auto_choice_outside_the_variant_set_is_timed_too(fake_gpu: FakeEnv) -> None:
    from teaal_loops import auto, matrix
    from teaal_loops.matrix.stats import row_stats

    text = "uniform:rows=300,nnz=6000,seed=2"
    expected = auto.choose(row_stats(matrix.synthetic_from_string(text)), DeviceInfo.h100()).label
    assert expected != "merge_path"
    entries = [MatrixEntry("u", "custom", "synthetic", text=text)]
    doc = run_bench(BenchOptions(entries, [Variant(SPECS / "merge_path.yaml")], reps=3, warmup=0))
    labels = [r["label"] for r in doc["cases"][0]["results"]]
    assert labels == ["merge_path", expected]
    assert doc["cases"][0]["results"][1]["auto"] is True
    only = run_bench(BenchOptions(entries, [Variant(SPECS / "merge_path.yaml")], reps=3,
                                  warmup=0, only_auto=True))
    assert [r["label"] for r in only["cases"][0]["results"]] == [expected]


def test_the_l2_window_experiment_is_labelled_and_skips_rotated_matrices(
    fake_gpu: FakeEnv, tmp_path: Path
) -> None:
    from teaal_loops.bench.variants import with_experiments

    base = [Variant(SPECS / "merge_path.yaml")]
    both = with_experiments(base, l2_persist=True)
    assert [v.label for v in both] == ["merge_path", "merge_path+l2persist"]
    entries = [MatrixEntry("uni", "custom", "synthetic", text="uniform:rows=200,nnz=3000,seed=1")]
    doc = run_bench(BenchOptions(entries, both, reps=3, warmup=1, auto=False))
    (case,) = doc["cases"]
    by = {r["label"]: r for r in case["results"]}
    assert case["copies"] > 1  # a small matrix is rotated: the window would be meaningless
    assert "kernel" in by["merge_path"]
    assert by["merge_path+l2persist"]["skipped"].startswith("l2persist: the matrix is rotated")
