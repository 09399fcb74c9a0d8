"""The SpMM and SDDMM suites on a real GPU, tiny: every library spec right within the rounding
bound against the best cuSPARSE, all three timings and the graph replays of every side, the
second column, the large classes generated on the GPU, and the command line end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teaal_loops.bench import bench, markdown
from teaal_loops.bench.suite import dense_large_classes

pytestmark = pytest.mark.gpu
SCALE = 1 / 256  # the dense classes at 4096 rows, 65k nonzeros


@pytest.fixture(scope="module", autouse=True)
def _gpu() -> None:
    pytest.importorskip("cupy", reason="CuPy is not installed")
    from teaal_loops.runtime import gpu_available

    if not gpu_available():
        pytest.skip("no CUDA device")


def _check_side(block: dict[str, object]) -> None:
    assert "error" not in block, block
    for way in ("kernel", "throughput", "latency"):
        assert block[way]["median_ms"] > 0, (way, block)  # type: ignore[index]


def test_tiny_spmm_and_sddmm_suites_validate_and_time_every_side(tmp_path: Path) -> None:
    doc = bench(
        suites=(),
        synthetic=["uniform:rows=3000,nnz=30000,seed=1", "longrows:rows=2000,nnz=60000,seed=2"],
        kernels=("spmm", "sddmm"),
        widths={"spmm": (8, 33), "sddmm": (32,)},
        reps=5,
        warmup=1,
        max_copies=2,
        json_path=tmp_path / "r.json",
    )
    cases = doc["cases"]
    assert [(c["kernel"], c["width"]) for c in cases] == [
        ("spmm", 8), ("spmm", 33), ("sddmm", 32)] * 2
    libs = doc["libraries"]
    for case in cases:
        cs = case["cusparse"]
        _check_side(cs)
        assert cs["check"]["valid"] and cs["winner"]
        graph = cs["graph"]
        assert ("throughput" in graph and graph["check"]["valid"]) or "reason" in graph
        if case["kernel"] == "spmm":
            assert cs["library"] == "cupy" and case["second"]["what"].startswith("cupyx")
            _check_side(case["second"])
        else:
            assert cs["library"] == libs["sddmm"]
            if cs["library"] == "nvmath" and libs["torch"] is True:
                assert case["second"]["check"]["valid"]
        for r in case["results"]:
            assert "error" not in r, (case["matrix"], case["kernel"], r)
            assert r["valid"], (case["matrix"], r["label"], r.get("max_error_over_bound"))
            _check_side(r)
            assert r["graph"]["check"]["valid"], r["graph"]
            assert r["speedup"]["kernel"] > 0 and r["gbps"] > 0
        assert case["best"] is not None
    sddmm = [r for c in cases if c["kernel"] == "sddmm" for r in c["results"]]
    assert all(r["operands"][0].startswith("B stored [N, K]") for r in sddmm)
    text = markdown(doc)
    assert "### SpMM N=33: other matrices" in text and "### SDDMM K=32" in text
    assert json.loads((tmp_path / "r.json").read_text())["schema"] == "teaal-loops-bench/2"


def test_the_dense_suite_from_the_command_line_with_gpu_generated_classes(
    tmp_path: Path,
) -> None:
    from teaal_loops.cli import main

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tiny.mtx").write_text(
        "%%MatrixMarket matrix coordinate real general\n4 5 6\n1 1 1.0\n1 3 2.0\n"
        "2 2 3.0\n3 1 4.0\n4 5 -1.5\n4 4 0.5\n")
    out, md = tmp_path / "d.json", tmp_path / "d.md"
    rc = main(["bench", "--suite", "spmm", "--suite", "sddmm", "--corpus-dir", str(corpus),
               "--large-scale", str(SCALE), "--widths", "spmm:8", "--widths", "sddmm:16",
               "--reps", "3", "--warmup", "1", "-q", "-o", str(out), "--markdown", str(md)])
    assert rc == 0
    doc = json.loads(out.read_text())
    names = {c["matrix"] for c in doc["cases"]}
    assert names == {"tiny", *(e.name for e in dense_large_classes(SCALE))}
    for case in doc["cases"]:
        assert "error" not in case, case
        assert all(r.get("valid") for r in case["results"]), case["matrix"]
    assert {"spmm_parity", "spmm_random_2x", "spmm_banded_copy_60", "sddmm_anchor_2x"} <= set(
        doc["summary"]["targets"])
    assert main(["bench", "--report", str(out), "--markdown", str(tmp_path / "again.md")]) == 0
    assert (tmp_path / "again.md").read_text() == md.read_text()


def test_a_split_case_times_both_parts_and_the_pair_checked_against_the_whole(
    tmp_path: Path,
) -> None:
    """``--split 1024`` on long rows: each part's fastest variant named with its time, the
    pair checked against the whole product and timed as one operation; a matrix with no
    heavy row is skipped by name."""
    from tests.conftest import REPO

    specs = [REPO / "specs" / "spmm" / f"{s}.yaml" for s in ("group_lanes_vec",
                                                             "nonzero_split_vec")]
    doc = bench(
        specs,
        suites=(),
        synthetic=["longrows:rows=20000,nnz=200000,long_rows=8,fraction=0.5,seed=2",
                   "uniform:rows=3000,nnz=30000,seed=1"],
        kernels=("spmm",),
        widths={"spmm": (32,)},
        splits=[1024],
        reps=5,
        warmup=1,
        max_copies=2,
        json_path=tmp_path / "s.json",
    )
    long_case, uniform_case = doc["cases"]
    split = next(r for r in long_case["results"] if r["layout"] == "split:1024")
    assert "error" not in split, split
    assert split["valid"] and split["graph"]["check"]["valid"]
    _check_side(split)
    info = split["split"]
    assert info["heavy_rows"] == 8 and info["heavy_nnz"] + info["light_nnz"] == long_case["nnz"]
    assert (info["panel_width"], info["min_nnz"]) == (1024, 4096)
    timed = sum(1 for r in long_case["results"] if r["layout"] == "csr" and r.get("valid"))
    # every variant of the run ran on each part, the pieces also in blocks of 512 threads
    for part, count in (("light", timed), ("pieces", 2 * timed)):
        assert info[part]["median_ms"] > 0 and info[part]["variants"] == count > 0
        assert min(info[part]["times_ms"].values()) == info[part]["median_ms"]
    assert split["label"] == (f"split:1024[{info['light']['label']} + "
                              f"{info['pieces']['label'].replace('@pieces:1024', '')}]")
    none = next(r for r in uniform_case["results"] if r["layout"] == "split:1024")
    assert none["skipped"] == "no row is heavy at panels of 1024 columns from 4096 nonzeros"
