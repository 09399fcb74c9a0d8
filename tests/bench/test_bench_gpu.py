"""A tiny benchmark on a real GPU: every library schedule validates against cuSPARSE."""

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
    for case in doc["cases"]:
        assert case["cusparse"]["call"]["median_ms"] > 0
        schedules = {r["schedule"] for r in case["results"] if "schedule" in r}
        assert schedules == {"thread_mapped", "group_mapped", "work_oriented", "merge_path"}
        for r in case["results"]:
            assert "error" not in r, r
            assert r["valid"], (case["matrix"], r["label"], r["mismatches"])
            assert r["kernel"]["median_ms"] > 0 and r["launch"]["median_ms"] > 0
        assert case["best"] is not None and case["auto"]["over_best"] >= 1.0
    assert "uniform" in markdown(doc)
