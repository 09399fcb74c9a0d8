"""Best / auto / targets, markdown and the plot, from a hand-made results document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teaal_loops.bench import markdown, plot, summarize
from teaal_loops.bench.results import case_best_and_auto, geomean
from teaal_loops.cli import main
from tests.bench.fake_results import case, document, result


def test_best_is_the_fastest_valid_variant_and_auto_is_compared_to_it() -> None:
    doc = document()
    tiny = doc["cases"][0]
    # merge_path has the lowest device time but failed validation: it cannot be best
    assert tiny["best"]["label"] == "group_mapped[BLOCK_SIZE=4]"
    assert tiny["best"]["speedup_called"] == pytest.approx(0.065 / 0.009)
    assert tiny["best"]["speedup_kernel"] == pytest.approx(0.006 / 0.003)
    assert tiny["auto"]["over_best"] == pytest.approx(1.0)
    slow = doc["cases"][1]
    assert slow["best"]["label"] == "merge_path"
    assert slow["auto"]["over_best"] == pytest.approx(0.030 / 0.025)
    assert slow["auto"]["rule"] == "R6"


def test_capped_and_failed_variants_are_never_best() -> None:
    capped = result("thread_mapped", 0.001, 0.001)
    capped["capped"] = True
    failed = {"label": "group_mapped", "error": "boom"}
    c = case("m", "corpus", 0.05, 0.01, [capped, failed, result("merge_path", 0.02, 0.02)])
    assert case_best_and_auto(c)["best"]["label"] == "merge_path"
    assert case_best_and_auto(case("n", "corpus", 0.05, 0.01, [failed]))["best"] is None


def test_a_variant_launching_another_source_is_compared_but_never_best() -> None:
    """``--source`` and patched variants (marked ``experiment``) time other kernels beside
    ours: the best is ours unless nothing of ours was timed."""
    old = result("merge_path+old.cu", 0.010, 0.010)
    old["experiment"] = True
    ours = result("merge_path", 0.011, 0.011)
    assert case_best_and_auto(case("m", "corpus", 0.05, 0.01, [old, ours]))["best"]["label"] \
        == "merge_path"
    alone = case_best_and_auto(case("n", "corpus", 0.05, 0.01, [old]))
    assert alone["best"]["label"] == "merge_path+old.cu"


def test_targets_report_misses_with_their_margins() -> None:
    s = summarize(document())
    t = s["targets"]
    assert t["corpus_2x"]["met"] is False
    assert [m["matrix"] for m in t["corpus_2x"]["misses"]] == ["slow"]
    assert t["corpus_2x"]["misses"][0]["speedup_called"] == pytest.approx(0.040 / 0.028)
    assert t["large_parity"]["met"] is False  # banded's best is slower than cuSPARSE
    assert [m["matrix"] for m in t["large_parity"]["misses"]] == ["banded"]
    assert t["banded_copy_80"]["met"] is True  # 2900 of 3000 GB/s
    assert t["auto_within_10pct"]["passed"] == 3 and t["auto_within_10pct"]["of"] == 4
    assert t["auto_within_10pct"]["met"] is False
    assert any(r["label"] == "merge_path" for r in s["invalid_results"])


def test_geomean() -> None:
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([]) is None


def test_markdown_names_the_gpu_the_command_and_every_matrix() -> None:
    text = markdown(document(), plot_name="plot.png")
    assert "NVIDIA H100 80GB HBM3" in text
    assert "`teaal-loops bench --suite corpus --suite large`" in text
    assert "2026-11-20" in text
    assert "![speedup and bandwidth](plot.png)" in text
    for name in ("tiny", "slow", "banded", "rmat-s23"):
        assert f"| {name} |" in text
    assert "MISSED" in text and "miss slow 1.43x" in text
    header = next(line for line in text.splitlines() if line.startswith("| matrix | dtype"))
    separator = text.splitlines()[text.splitlines().index(header) + 1]
    assert header.count("|") == separator.count("|")


def test_plot_writes_a_png(tmp_path: Path) -> None:
    out = plot(document(), tmp_path / "sub" / "p.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_cli_regenerates_reports_from_json_without_a_gpu(tmp_path: Path) -> None:
    results = tmp_path / "r.json"
    results.write_text(json.dumps(document()))
    md, png = tmp_path / "r.md", tmp_path / "r.png"
    assert main(["bench", "--report", str(results), "--markdown", str(md), "--plot", str(png)]) == 0
    assert "![speedup and bandwidth](r.png)" in md.read_text()
    assert png.stat().st_size > 0


def test_reports_read_gzipped_results(tmp_path: Path) -> None:
    import gzip

    from teaal_loops.bench import load

    path = tmp_path / "r.json.gz"
    path.write_bytes(gzip.compress(json.dumps(document()).encode()))
    assert load(path)["device"]["name"] == "NVIDIA H100 80GB HBM3"


def test_cli_bad_arguments_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                               ) -> None:
    assert main(["bench", "--suite", "large", "--large-scale", "3"]) == 2
    err = capsys.readouterr().err
    assert "large-scale" in err and "Traceback" not in err
    assert main(["bench", "--sweep", "BLOCK_SIZE=x", "--report", "/nonexistent.json"]) == 2


def test_the_committed_benchmark_passes_the_schema_check() -> None:
    from teaal_loops.bench import load
    from tests.conftest import REPO

    doc = load(REPO / "BENCHMARKS.json.gz", need_stats=True)
    assert len(doc["cases"]) == 30


def _broken(edit: object) -> dict[str, object]:
    doc = json.loads(json.dumps(document()))
    edit(doc)  # type: ignore[operator]
    return doc


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("schema"), "schema: missing"),
        (lambda d: d.update(schema="other/1"), "schema: expected 'teaal-loops-bench/<version>'"),
        (lambda d: d["device"].pop("name"), "device.name: missing"),
        (lambda d: d.update(cases={}), "cases: expected a list"),
        (lambda d: d["cases"][1].pop("rows"), "cases[1].rows: missing"),
        (lambda d: d["cases"][1].update(nnz=1.5), "cases[1].nnz: expected an integer"),
        (lambda d: d["cases"][0]["cusparse"]["kernel"].pop("median_ms"),
         "cases[0].cusparse.kernel.median_ms: missing"),
        (lambda d: d["cases"][0]["results"][2].update(kernel={"median_ms": "7"}),
         "cases[0].results[2].kernel.median_ms: expected a number or null"),
        (lambda d: d["cases"][0]["results"][1].pop("label"), "cases[0].results[1].label: missing"),
        (lambda d: d["cases"][0]["results"][1].update(valid="yes"),
         "cases[0].results[1].valid: expected true or false"),
        (lambda d: d["cases"][2]["best"].update(speedup_called=[1]),
         "cases[2].best.speedup_called: expected a number or null"),
        (lambda d: d["cases"][0]["results"].append({"label": "x"}),
         "cases[0].results[3]: neither timed"),
    ],
)
def test_report_refuses_a_document_naming_the_first_wrong_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: object, message: str
) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_broken(edit)))
    assert main(["bench", "--report", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}: error: not a teaal-loops bench results document: ")
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"# not json\n", "not JSON"),
        (b"[1, 2]", "expected a JSON object, got list"),
        (b"\xff\xfe\x00", "not JSON"),
        (b"{}", "schema: missing"),
    ],
)
def test_report_on_a_file_that_is_no_results_document_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(content)
    assert main(["bench", "--report", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    gz = tmp_path / "r.json.gz"
    gz.write_bytes(content)  # not gzip at all
    assert main(["bench", "--report", str(gz)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_report_outputs_that_cannot_be_written_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "r.json"
    results.write_text(json.dumps(document()))
    blocker = tmp_path / "file"
    blocker.write_text("")
    for flag in ("--markdown", "--plot"):
        assert main(["bench", "--report", str(results), flag, str(blocker / "x")]) == 2
        assert "is not a directory" in capsys.readouterr().err
        assert main(["bench", "--report", str(results), flag, str(tmp_path)]) == 2
        assert "is a directory" in capsys.readouterr().err


def test_the_speedup_axis_has_plain_tick_labels() -> None:
    import matplotlib.pyplot as plt

    from teaal_loops.bench.report import figure, minor_tick_label, tick_label

    assert [tick_label(v) for v in (0.5, 1.0, 2.0, 10.0)] == ["0.5", "1", "2", "10"]
    assert [minor_tick_label(v) for v in (0.2, 0.3, 5.0, 7.0, 20.0)] == ["0.2", "", "5", "", "20"]
    fig = figure(document())
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        assert ax.get_yscale() == "log"
        labels = [t.get_text() for t in ax.yaxis.get_ticklabels(which="both") if t.get_text()]
    finally:
        plt.close(fig)
    assert labels and "1" in labels
    assert not any("10^" in t or "times" in t or "\\" in t for t in labels), labels
    assert all(float(t) > 0 for t in labels)


def test_results_that_cannot_be_written_are_one_error_naming_the_file(tmp_path: Path) -> None:
    from teaal_loops.bench import write_json
    from teaal_loops.errors import TeaalLoopsError

    (tmp_path / "file").write_text("")
    target = tmp_path / "file" / "r.json"
    with pytest.raises(TeaalLoopsError) as err:
        write_json(document(), target)
    assert err.value.cli_line().startswith(f"{target}: error: cannot write")
    write_json(document(), tmp_path / "ok" / "r.json")
    assert json.loads((tmp_path / "ok" / "r.json").read_text())["schema"] == document()["schema"]
