"""Schema 2 without a GPU: speedups over the best cuSPARSE and the second column, the targets
of SpMV, SpMM and SDDMM, the markdown and the plot, the schema check, old documents still
read as they were, and the auto fit keeping to SpMV."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from teaal_loops.bench import fit_auto, load, markdown, plot, summarize
from teaal_loops.bench.report import sections
from teaal_loops.cli import main
from tests.bench.fake_results import document_v2
from tests.conftest import REPO


def _cases(doc: dict[str, Any], kernel: str) -> dict[tuple[str, Any], dict[str, Any]]:
    return {(c["matrix"], c["width"]): c for c in doc["cases"] if c["kernel"] == kernel}


def test_speedups_are_over_the_best_cusparse_and_the_second_column() -> None:
    tiny = _cases(document_v2(), "spmv")[("tiny", None)]
    best = tiny["best"]
    assert best["label"] == "group_mapped[BLOCK_SIZE=4]"  # merge_path was wrong: never best
    assert best["speedup"]["kernel"] == pytest.approx(0.010 / 0.004)
    assert best["speedup"]["throughput"] == pytest.approx(0.011 / 0.0048)
    assert best["speedup"]["latency"] == pytest.approx(0.015 / 0.008)
    assert best["speedup"]["graph"] == pytest.approx(0.004 / 0.002)
    assert best["second_speedup"]["kernel"] == pytest.approx(0.012 / 0.004)
    assert best["second_speedup"]["call"] == pytest.approx(0.030 / 0.006)  # one line each
    slow = _cases(document_v2(), "spmv")[("slow", None)]
    assert slow["best"]["speedup"]["graph"] is None  # cuSPARSE's replay was not timed
    assert slow["best"]["second_speedup"]["kernel"] is None  # no second column


def test_targets_judge_every_kernel_against_the_best_cusparse() -> None:
    t = summarize(document_v2())["targets"]
    # SpMV: device time against the best cuSPARSE on every corpus matrix and large class
    assert t["spmv_parity"]["met"] and t["spmv_parity"]["of"] == 3
    assert t["spmv_banded_copy_90"]["met"]  # 90% of copy exactly
    assert t["spmv_auto"]["passed"] == 3 and t["spmv_auto"]["met"]
    assert t["spmm_parity"]["met"] and t["spmm_parity"]["of"] == 4
    # uniform at N = 8 and 32: 3.0x and 1.25x, geomean 1.94 < 2
    assert t["spmm_random_2x"]["met"] is False
    assert t["spmm_random_2x"]["geomean"] == pytest.approx(math.sqrt(3.0 * 1.25))
    assert [m["matrix"] for m in t["spmm_random_2x"]["misses"]] == ["uniform-r20 N=32"]
    assert t["spmm_banded_copy_60"]["met"]  # 2100 of 3000 GB/s
    sddmm = t["sddmm_anchor_2x"]
    assert sddmm["met"] is False and sddmm["anchors"] == ["nvmath"]
    assert sddmm["geomean"] == pytest.approx(1.0 / 2.5)
    assert {m["matrix"] for m in sddmm["misses"]} == {"tiny K=32", "bad K=32"}


def test_spmv_targets_miss_a_slow_matrix_and_an_auto_below_the_floor() -> None:
    doc = document_v2()
    for c in doc["cases"]:
        if c.get("kernel", "spmv") == "spmv" and c["matrix"] == "slow":
            c["best"]["speedup"]["kernel"] = 0.9
            c["auto"]["speedup"]["kernel"] = 0.9
    t = summarize(doc)["targets"]
    assert t["spmv_parity"]["met"] is False
    assert [(m["matrix"], m["value"]) for m in t["spmv_parity"]["misses"]] == [("slow", 0.9)]
    assert t["spmv_auto"]["met"] is False and t["spmv_auto"]["passed"] == 3
    assert t["spmv_auto"]["below_floor"] == [{"matrix": "slow", "value": 0.9}]


def test_summary_lists_wrong_variants_and_baselines_that_did_not_run() -> None:
    s = summarize(document_v2())
    wrong = {(r["matrix"], r["kernel"], r["label"]) for r in s["invalid_results"]}
    assert wrong == {("tiny", "spmv", "merge_path"), ("tiny", "spmm", "group_lanes_over_k")}
    assert s["baseline_errors"] == [{"matrix": "bad", "kernel": "sddmm", "width": 32,
                                     "side": "cusparse", "error": "no SDDMM backend: fake"}]
    assert s["geomeans"]["spmm"]["cases"] == 4
    assert s["geomeans"]["spmm"]["speedup_kernel"] == pytest.approx(
        (2.0 * 3.0 * 1.25 * 1.25) ** 0.25)


def test_an_sddmm_target_with_a_case_lacking_its_anchor_is_not_met() -> None:
    doc = document_v2()
    for c in doc["cases"]:
        if c["kernel"] == "sddmm" and c["matrix"] == "tiny":
            c["best"]["speedup"]["kernel"] = 9.0
    t = summarize(doc)["targets"]["sddmm_anchor_2x"]
    assert t["geomean"] == pytest.approx(9.0) and t["met"] is False  # "bad" has no anchor


def test_a_failed_case_counts_as_a_miss_and_shows_in_its_table() -> None:
    doc = document_v2()
    doc["cases"].append({"matrix": "broken", "group": "corpus", "kernel": "spmm", "width": 8,
                         "error": "MatrixError: row offsets decrease at row 3"})
    t = summarize(doc)["targets"]["spmm_parity"]
    assert t["met"] is False and t["of"] == 5
    assert t["misses"] == [{"matrix": "broken N=8", "value": None, "best": None}]
    assert "| broken | - | - | - | error: MatrixError: row offsets decrease at row 3 |" in (
        markdown(doc))


def test_markdown_has_a_section_per_kernel_width_and_group() -> None:
    doc = document_v2()
    text = markdown(doc, plot_name="p.png")
    titles = [title for title, _ in sections(doc["cases"])]
    assert titles == ["SpMV: corpus matrices", "SpMV: large synthetic matrices (> L2)",
                      "SpMM N=8: corpus matrices", "SpMM N=8: large synthetic matrices (> L2)",
                      "SpMM N=32: large synthetic matrices (> L2)",
                      "SDDMM K=32: corpus matrices"]
    for title in titles:
        assert f"### {title}\n" in text
    assert "![speedup and bandwidth](p.png)" in text
    assert "nvmath-python: no (nvmath-python is not importable (fake))" in text
    assert "| nvmath ROW+preprocess |" in text and "| did not run |" in text
    assert "MISSED" in text and "miss uniform-r20 N=32" in text
    assert "- not capturable: refused (fake): cuSPARSE on slow (SpMV)" in text
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| matrix |"):
            assert line.count("|") == lines[i + 1].count("|"), line
            row = lines[i + 2]
            assert row.count("|") == line.count("|"), row


def test_plot_of_a_v2_document_writes_a_png(tmp_path: Path) -> None:
    out = plot(document_v2(), tmp_path / "p.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_old_documents_are_read_and_drawn_as_they_were() -> None:
    doc = load(REPO / "BENCHMARKS.json.gz", need_stats=True)
    assert doc["schema"] == "teaal-loops-bench/1"
    text = markdown(doc)
    committed = (REPO / "BENCHMARKS.md").read_text()
    banded = next(line for line in text.splitlines() if line.startswith("| banded |"))
    assert banded in committed  # the same row as the committed report's
    assert summarize(doc)["targets"]["corpus_2x"]["passed"] == 25


def test_the_auto_fit_reads_only_spmv_cases() -> None:
    names = [c.name for c in fit_auto.cases_of(document_v2())]
    assert names == ["tiny (float32)", "slow (float32)", "banded (float32)"]


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_cli_draws_a_v2_report(tmp_path: Path) -> None:
    path = _write(tmp_path, document_v2())
    md = tmp_path / "r.md"
    assert main(["bench", "--report", str(path), "--markdown", str(md)]) == 0
    assert "### SDDMM K=32: corpus matrices" in md.read_text()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(schema="teaal-loops-bench/3"),
         "schema 'teaal-loops-bench/3': this teaal-loops reads versions 1, 2"),
        (lambda d: d.update(schema="teaal-loops-bench/2b"), "this teaal-loops reads versions"),
        (lambda d: d["cases"][0].update(kernel="spgemm"),
         "cases[0].kernel: expected one of spmv, spmm, sddmm"),
        (lambda d: d["cases"][0].update(width=8), "cases[0].width: expected null for spmv"),
        (lambda d: d["cases"][3].update(width=0), "cases[3].width: expected a positive integer"),
        (lambda d: d["cases"][1]["cusparse"].pop("latency"), "cases[1].cusparse.latency: missing"),
        (lambda d: d["cases"][1]["cusparse"]["preprocess"].update(ran="no"),
         "cases[1].cusparse.preprocess.ran: expected true or false"),
        (lambda d: d["cases"][0]["results"][0]["graph"].pop("throughput"),
         "cases[0].results[0].graph.throughput: missing"),
        (lambda d: d["cases"][0]["results"][0]["speedup"].update(kernel="2x"),
         "cases[0].results[0].speedup.kernel: expected a number or null"),
        (lambda d: d["cases"][8]["cusparse"].update(error=7),
         "cases[8].cusparse.error: expected a string"),
        (lambda d: d["cases"][0]["results"][1].pop("error"),
         "cases[0].results[1]: neither timed"),
    ],
)
def test_a_wrong_v2_document_is_one_line_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, message: str
) -> None:
    doc = json.loads(json.dumps(document_v2()))
    edit(doc)
    assert main(["bench", "--report", str(_write(tmp_path, doc))]) == 2
    err = capsys.readouterr().err
    assert "not a teaal-loops bench results document: " in err
    assert message in err and len(err.strip().splitlines()) == 1
