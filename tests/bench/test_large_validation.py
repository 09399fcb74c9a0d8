"""``teaal-loops validate``: sizes, planning, numbers, the summary and its errors, on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teaal_loops.auto import library_dir
from teaal_loops.bench import large_validation as lv
from teaal_loops.cli import main
from teaal_loops.errors import TeaalLoopsError


@pytest.mark.parametrize(
    ("text", "value"),
    [("100000000", 10**8), ("1e8", 10**8), ("1E6", 10**6), ("2.5e6", 2_500_000),
     ("100_000", 100_000), (" 42 ", 42), ("1e9", 10**9)],
)
def test_counts_accept_whole_numbers_in_any_notation(text: str, value: int) -> None:
    assert lv.parse_count(text, "--max-nnz") == value


@pytest.mark.parametrize(
    ("text", "message"),
    [("1.5e0", "not a whole number"), ("1.5", "not a whole number"), ("abc", "whole number"),
     ("0", "at least 1"), ("-1e6", "at least 1"), ("inf", "not a whole number"),
     ("nan", "not a whole number"), ("2e9", "at most 1,000,000,000"), ("", "whole number")],
)
def test_counts_refuse_what_is_not_a_count(text: str, message: str) -> None:
    with pytest.raises(TeaalLoopsError, match=message):
        lv.parse_count(text, "--max-nnz")


def test_sizes_step_by_ten_from_a_million() -> None:
    assert lv.sizes(10**8) == [10**6, 10**7, 10**8]
    assert lv.sizes(5 * 10**7) == [10**6, 10**7]
    assert lv.sizes(10**8, 10**8) == [10**8]
    assert lv.sizes(10**7, 2 * 10**6) == [10**7]
    assert lv.sizes(200_000) == [200_000]  # a quick run below a million


def test_plan_covers_every_size_kind_dtype_and_spec() -> None:
    options = lv.make_options(max_nnz="1e7")
    planned = lv.plan(options)
    assert [p.nnz for p in planned] == [10**6] * 5 + [10**7] * 5
    assert [p.text.split(":")[0] for p in planned[:5]] == list(lv.KINDS)
    first = planned[0]
    assert first.text == "uniform:rows=100000,nnz=1000000,seed=11" and first.rows == 100_000
    assert len(first.cases) == 2 * 5
    assert {(d, s) for d, s, _ in first.cases} == {(d, s) for d in lv.DTYPES for s in lv.SPECS}
    longrows = next(p for p in planned if p.text.startswith("longrows"))
    assert longrows.rows == 10_000  # a hundred nonzeros a row


def test_block_groups_take_several_rows_once_lanes_would_overflow() -> None:
    assert lv.fit_params("group_mapped_block", 1_000_000) == {}
    assert lv.fit_params("merge_path", 10**8) == {}
    rows = 10**8 // 10  # 1e7 rows x 256 lanes > 2**31 - 1
    rpg = lv.fit_params("group_mapped_block", rows)["ROWS_PER_GROUP"]
    assert rows * 256 / rpg <= lv.INT32_MAX < rows * 256 / (rpg - 1)
    planned = lv.plan(lv.make_options(max_nnz="1e8", min_nnz="1e8", kinds=["uniform"]))
    params = {spec: dict(p) for _, spec, p in planned[0].cases}
    assert params["group_mapped_block"] == {"ROWS_PER_GROUP": rpg}


def test_options_refuse_bad_flags_in_one_line() -> None:
    lib = library_dir()
    with pytest.raises(TeaalLoopsError, match="--min-nnz 1e8 is above --max-nnz 1e7"):
        lv.make_options(max_nnz="1e7", min_nnz="1e8")
    with pytest.raises(TeaalLoopsError, match="--kind 'dense'"):
        lv.make_options(kinds=["dense"])
    with pytest.raises(TeaalLoopsError, match="not a library spec"):
        lv.make_options(specs=["../../etc/passwd"], library=lib)
    with pytest.raises(TeaalLoopsError, match="--dtype 'f16'"):
        lv.make_options(dtypes=["f16"])
    chosen = lv.make_options(kinds=["rmat", "rmat"], specs=["merge_path"], dtypes=["f64"],
                             library=lib)
    assert (chosen.kinds, chosen.specs, chosen.dtypes) == (("rmat",), ("merge_path",),
                                                           ("float64",))


def test_a_case_fails_on_any_of_verdict_repeat_and_trace() -> None:
    assert lv.case_ok("NOT_A_BUG", True, True)
    assert lv.case_ok("NOT_A_BUG", True, None)  # trace not taken above --trace-max-nnz
    assert not lv.case_ok("BUG", True, True)
    assert not lv.case_ok("NOT_A_BUG", False, True)
    assert not lv.case_ok("NOT_A_BUG", True, False)


def test_summary_counts_failures_and_is_written_atomically(tmp_path: Path) -> None:
    options = lv.make_options(max_nnz="1e6", output=tmp_path / "s.json")
    doc = lv.summary([{"ok": True}, {"ok": False}, {"ok": True}], options)
    assert (doc["failed"], doc["of"]) == (1, 3)
    assert doc["settings"]["max_nnz"] == 10**6
    lv.write_summary(doc, options.output)
    assert json.loads(options.output.read_text()) == doc
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-nnz", "1.5e0"], "--max-nnz 1.5e0: not a whole number"),
        (["--trace-max-nnz", "x"], "--trace-max-nnz 'x'"),
        (["--kind", "dense"], "--kind 'dense'"),
        (["--spec", "nope"], "not a library spec"),
        (["-o", "{tmp}"], "is a directory"),
        (["-o", "{file}/out.json"], "is not a directory"),
    ],
)
def test_cli_errors_are_one_line_before_any_gpu_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (tmp_path / "f").write_text("")
    names = {"tmp": str(tmp_path), "file": str(tmp_path / "f")}
    assert main(["validate", *(a.format(**names) for a in argv)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_cli_without_a_gpu_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from teaal_loops.runtime import gpu_available
    from teaal_loops.runtime.backend import unavailable_reason

    if gpu_available():
        pytest.skip("a GPU is present: tests/bench/test_bench_gpu.py runs the command")
    assert main(["validate", "--max-nnz", "1e5", "-o", str(tmp_path / "v.json")]) == 2
    err = capsys.readouterr().err
    # the real cause, whichever it is here: CuPy missing, or CuPy without a usable device
    reason = unavailable_reason()
    assert reason is not None and reason in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "v.json").exists()
