"""A tiny benchmark on a real GPU: every library schedule validates against cuSPARSE and is
timed beside the best cuSPARSE and cupyx."""

from __future__ import annotations

from pathlib import Path

import pytest

from teaal_loops.bench import bench, markdown


def _require_gpu() -> None:
    pytest.importorskip("cupy", reason="CuPy is not installed")
    from teaal_loops.runtime import gpu_available

    if not gpu_available():
        pytest.skip("no CUDA device")


@pytest.mark.gpu
def test_tiny_bench_runs_every_schedule_and_validates(tmp_path: Path) -> None:
    _require_gpu()
    doc = bench(
        suites=(),
        synthetic=["uniform:rows=3000,nnz=30000,seed=1", "longrows:rows=4000,nnz=200000,seed=2"],
        sweeps={"BLOCK_SIZE": (4, 32)},
        reps=5,
        warmup=1,
        json_path=tmp_path / "r.json",
    )
    assert doc["copy"]["gbps"] > 100
    assert doc["device"]["name"]
    nvmath = doc["libraries"]["nvmath"] is True
    for case in doc["cases"]:
        cs = case["cusparse"]
        assert "error" not in cs, cs
        assert cs["winner"] in {a["label"] for a in cs["algorithms"]} and cs["check"]["valid"]
        assert cs["preprocess"]["ran"] is nvmath
        assert all(cs[w]["median_ms"] > 0 for w in ("kernel", "throughput", "latency"))
        # CuPy's binding refuses capture: the graph goes through nvmath-python or says why
        if nvmath:
            assert cs["graph"]["check"]["valid"] and cs["graph"]["throughput"]["median_ms"] > 0
        else:
            assert cs["graph"]["reason"].startswith("not capturable")
        assert case["second"]["throughput"]["median_ms"] > 0
        schedules = {r["schedule"] for r in case["results"] if "schedule" in r}
        assert schedules == {"thread_mapped", "group_mapped", "work_oriented", "merge_path"}
        for r in case["results"]:
            assert "error" not in r, r
            assert r["valid"], (case["matrix"], r["label"], r["mismatches"])
            assert r["kernel"]["median_ms"] > 0 and r["throughput"]["median_ms"] > 0
            assert r["latency"]["median_ms"] > 0 and r["call"]["median_ms"] > 0
            assert r["graph"]["check"]["valid"] and r["graph"]["throughput"]["median_ms"] > 0
            assert r["speedup"]["kernel"] > 0
        assert case["best"] is not None and case["auto"]["over_best"] >= 1.0
    assert "uniform" in markdown(doc)


@pytest.mark.gpu
def test_experiments_time_block_sizes_and_source_files_with_the_loop_timing(
    tmp_path: Path,
) -> None:
    _require_gpu()
    from teaal_loops.bench.variants import Variant, with_experiments
    from teaal_loops.cli import main
    from tests.conftest import REPO

    spec = REPO / "specs" / "merge_path.yaml"
    old = tmp_path / "old.cu"
    assert main(["generate", str(spec), "-o", str(old)]) == 0  # the same kernel, from a file
    doc = bench(
        [spec],
        suites=(),
        synthetic=["uniform:rows=3000,nnz=30000,seed=1"],
        block_threads=(256,),
        sources=[("merge_path", old)],
        auto=False,
        reps=5,
        warmup=1,
    )
    by = {r["label"]: r for r in doc["cases"][0]["results"]}
    assert set(by) == {"merge_path", "merge_path@t256", "merge_path+old.cu"}
    assert by["merge_path@t256"]["bound"]["threads_per_block"] == 256
    for r in by.values():
        assert r["valid"], r
        assert r["throughput"]["median_ms"] > 0 and r["call"]["median_ms"] > 0
    assert doc["cases"][0]["second"]["throughput"]["median_ms"] > 0
    assert with_experiments([Variant(spec)], block_threads=(256,))[1].block_threads == 256


@pytest.mark.gpu
def test_validate_command_checks_a_small_run_and_writes_json(tmp_path: Path) -> None:
    _require_gpu()
    import json

    from teaal_loops.cli import main

    out = tmp_path / "v.json"
    rc = main(["validate", "--max-nnz", "2e5", "--kind", "uniform", "--kind", "longrows",
               "--spec", "merge_path", "--spec", "group_mapped_block", "--dtype", "f32",
               "-o", str(out)])
    doc = json.loads(out.read_text())
    assert rc == 0 and doc["failed"] == 0 and doc["of"] == 4
    for case in doc["cases"]:
        assert case["verdict"] == "NOT_A_BUG" and case["repeat_ok"] and case["trace_ok"]


@pytest.mark.gpu
def test_profile_command_launches_and_compares_with_cusparse(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _require_gpu()
    from teaal_loops.cli import main

    rc = main(["profile", "--synthetic", "rmat:rows=4096,nnz=40000,seed=3", "--cusparse",
               "--variant", "merge_path[ITEMS_PER_THREAD=16]", "--variant", "thread_mapped@t256"])
    out = capsys.readouterr().out
    assert rc == 0
    lines = {line.split(":")[0]: line for line in out.splitlines()}
    assert "x 256 threads" in lines["thread_mapped@t256"]
    for label in ("merge_path[ITEMS_PER_THREAD=16]", "thread_mapped@t256"):
        error = float(lines[label].rsplit("=", 1)[1])
        assert error < 1e-3, lines[label]
    assert "cuSPARSE (A @ x): 3 launches" in out


@pytest.mark.gpu
def test_an_spmv_split_times_both_parts_and_the_pair_checked_against_the_whole(
    tmp_path: Path,
) -> None:
    """``splits`` on SpMV: the light rows' fastest variant, then the pieces' raw launch adding
    into its output, checked against the whole product and timed (a graph replay too)."""
    _require_gpu()
    from tests.conftest import REPO

    specs = [REPO / "specs" / f"{s}.yaml" for s in ("merge_path", "group_mapped")]
    doc = bench(specs, suites=(),
                synthetic=["longrows:rows=20000,nnz=200000,long_rows=8,fraction=0.5,seed=2"],
                kernels=("spmv",), splits=[1024], auto=False, reps=5, warmup=1,
                json_path=tmp_path / "v.json")
    (case,) = doc["cases"]
    split = next(r for r in case["results"] if r["layout"] == "split:1024")
    assert "error" not in split, split
    assert split["valid"] and split["kernel"]["median_ms"] > 0
    assert split["graph"]["check"]["valid"] or "reason" in split["graph"]
    info = split["split"]
    assert info["heavy_rows"] == 8 and info["heavy_nnz"] + info["light_nnz"] == case["nnz"]
    timed = sum(1 for r in case["results"] if r["layout"] == "csr" and r.get("valid"))
    assert info["light"]["variants"] == timed and info["pieces"]["variants"] == 2 * timed
