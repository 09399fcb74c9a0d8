"""auto's constants file and their refit from a benchmark's results (no GPU needed)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from teaal_loops import auto
from teaal_loops.bench import fit_auto, load
from teaal_loops.cli import main
from teaal_loops.errors import TeaalLoopsError
from teaal_loops.types import DeviceInfo
from tests.conftest import REPO

H200 = DeviceInfo("H200", 132)
BENCHMARKS = REPO / "BENCHMARKS.json.gz"


# -- the constants file ------------------------------------------------------------------------


def test_the_shipped_file_holds_every_constant_and_auto_reads_it() -> None:
    doc = json.loads(auto.CONSTANTS_FILE.read_text())
    assert doc["schema"] == auto.CONSTANTS_SCHEMA
    for dtype, value_bytes in (("float32", 4), ("float64", 8)):
        assert auto.load_constants(auto.CONSTANTS_FILE, dtype) == auto.constants(value_bytes)
        assert set(doc[dtype]["constants"]) == set(auto.constants().as_dict())
    assert auto.constants(8) != auto.constants(4)  # float64 has constants of its own
    assert auto.constant_sets() is auto.constant_sets()  # read once


def test_choose_takes_the_constants_of_the_values_dtype() -> None:
    # a case the two sets decide differently (ca-AstroPh-cc1's shape: float32's constants
    # pick a warp a row, float64's merge-path)
    astro = fit_auto.Stats(17903, 394003, 22.008, 504, 1.409, cols=17903)
    f32 = auto.choose(astro, H200, value_bytes=4)
    f64 = auto.choose(astro, H200, value_bytes=8)
    assert f32 == auto.choose(astro, H200, auto.constants(4), value_bytes=8)
    assert f64 == auto.choose(astro, H200, auto.constants(8), value_bytes=8)
    assert f32.label != f64.label


def test_a_schema_1_file_serves_every_dtype(tmp_path: Path) -> None:
    one = {"schema": auto.CONSTANTS_SCHEMA_V1, "fitted_from": {"how": "old"},
           "constants": auto.constants(8).as_dict()}
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(one))
    assert auto.load_constant_sets(path) == {"float32": auto.constants(8),
                                             "float64": auto.constants(8)}


def test_choose_follows_the_constants_it_is_given() -> None:
    # 30k rows, longest 500: with a cheap critical path a thread a row wins, with an expensive
    # one the longest row is split over many lanes
    s = fit_auto.Stats(30_000, 300_000, 10.0, 500, 1.3, cols=30_000)
    cheap = auto.choose(s, H200, auto.constants().replace(CI=0.001))
    dear = auto.choose(s, H200, auto.constants().replace(CI=50.0, CB=0.0, CF0=1e6))
    assert cheap.label == "thread_mapped"
    assert dear.spec == auto.BLOCK_SPEC


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["float32"]["constants"].pop("CI"), "auto constant CI is missing"),
        (lambda d: d["float64"]["constants"].update(CX=1), "unknown auto constant 'CX'"),
        (lambda d: d["float32"]["constants"].update(CI="0.2"), "CI: expected a number"),
        (lambda d: d["float64"]["constants"].update(FLAT_WORK=8.5),
         "FLAT_WORK: expected an integer"),
        (lambda d: d["float32"]["constants"].update(CW=-1), "CW = -1 is out of range"),
        (lambda d: d["float64"]["constants"].update(LARGE_ITEMS_MIN=64),
         "LARGE_ITEMS_MIN <= LARGE_ITEMS_MAX"),
        (lambda d: d.pop("float64"), "'float64' must be an object"),
        (lambda d: d.update(schema="other/1"), "not an auto constants file"),
    ],
)
def test_a_bad_constants_file_is_one_line_naming_the_file(
    tmp_path: Path, edit: Any, message: str
) -> None:
    doc = json.loads(auto.CONSTANTS_FILE.read_text())
    edit(doc)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TeaalLoopsError) as err:
        auto.load_constants(path)
    assert message in err.value.cli_line()
    assert err.value.cli_line().startswith(f"{path}")
    assert ": error: " in err.value.cli_line()
    path.write_text("{not json")
    with pytest.raises(TeaalLoopsError, match="cannot read auto constants"):
        auto.load_constants(path)


# -- the fit on a synthetic run whose right constants are known ------------------------------

TRUE = {"CI": 0.6, "CB": 0.1, "LANE_WORK": 8.0, "MIN_LARGE_GROUP": 4}


def _variant(choice: auto.AutoChoice, ms: float) -> dict[str, Any]:
    params = dict(choice.params)
    return {"label": choice.label, "spec": choice.spec, "params": params, "bound": params,
            "layout": "csr", "valid": True, "kernel": {"median_ms": ms},
            "launch": {"median_ms": ms}, "call": {"median_ms": ms}}


def synthetic_run() -> dict[str, Any]:
    """Cases whose fastest variant is, by construction, what choose() picks with TRUE."""
    truth = auto.constants().replace(**TRUE)
    candidates = [auto.group_choice(g, "", "") for g in auto.GROUP_SIZES]
    candidates += [auto.AutoChoice("merge_path", auto.MERGE_SPEC,
                                   {auto.MERGE_PARAM: n}) for n in (4, 8, 16, 32)]
    shapes = [(rows, longest) for rows in (500, 4000, 30_000, 200_000)
              for longest in (3, 12, 40, 150, 600, 3000)]
    cases = []
    stats_list = [fit_auto.Stats(r, r * min(m, 8), float(min(m, 8)), m, 0.5, cols=r) for r, m in shapes]
    stats_list += [fit_auto.Stats(1 << 23, (1 << 23) * m, float(m), m + 2, 0.1, cols=1 << 23)
                   for m in (12, 20, 40, 70)]  # regular and large: the lanes a row
    for i, s in enumerate(stats_list):
        right = auto.choose(s, H200, truth)
        results = [_variant(c, 1.0 if c.label == right.label else 1.3 + 0.01 * j)
                   for j, c in enumerate(candidates)]
        if not any(c.label == right.label for c in candidates):
            results.append(_variant(right, 1.0))
        cases.append({"matrix": f"m{i}", "dtype": "float32", "group": "corpus", "rows": s.rows,
                      "cols": s.rows, "nnz": s.nnz,
                      "stats": {"rows": s.rows, "nnz": s.nnz, "mean": s.mean, "max": s.max,
                                "cv": s.cv},
                      "cusparse": {"call": {"median_ms": 1.0}, "kernel": {"median_ms": 1.0}},
                      "results": results})
    return {"schema": "teaal-loops-bench/1", "device": {"name": "H200", "sm_count": 132},
            "date": "synthetic", "cases": cases}


def test_the_fit_recovers_choices_known_by_construction() -> None:
    doc = synthetic_run()
    cases = fit_auto.cases_of(doc)
    truth = auto.constants().replace(**TRUE)
    assert fit_auto.score(cases, truth).within == len(cases)  # the construction holds
    start = fit_auto.score(cases, auto.constants())
    assert start.within < len(cases)  # the shipped constants miss some: the fit has work
    result = fit_auto.fit(cases, auto.constants())
    assert result.before == start
    assert result.after.within == len(cases)
    assert result.after.geomean_ratio == pytest.approx(1.0)
    for case in cases:
        assert (auto.choose(case.stats, H200, result.constants).label
                == auto.choose(case.stats, H200, truth).label), case.name
    assert result.changed(auto.constants())  # and it said what moved
    assert "CW" not in result.changed(auto.constants())  # the unit stays


def test_a_pick_that_was_not_measured_counts_as_twice_the_best() -> None:
    doc = synthetic_run()
    case = fit_auto.cases_of(doc)[0]
    right = auto.choose(case.stats, H200, auto.constants().replace(**TRUE))
    lonely = fit_auto.FitCase("x", case.stats,
                              tuple(m for m in case.variants if m.ms > 1.0), 1.0)
    assert lonely.time_of(right) is None
    assert fit_auto.ratio(lonely, auto.constants().replace(**TRUE)) == 2.0


def test_default_parameters_match_through_the_recorded_bound_values() -> None:
    choice = auto.AutoChoice("merge_path", "merge_path", {"ITEMS_PER_THREAD": 8})
    default = fit_auto.Measured("merge_path", {}, {"ITEMS_PER_THREAD": 8}, 2.0)
    other = fit_auto.Measured("merge_path", {"ITEMS_PER_THREAD": 16}, {"ITEMS_PER_THREAD": 16}, 1)
    case = fit_auto.FitCase("c", fit_auto.Stats(1, 1, 1.0, 1, 0.0, cols=1), (other, default), 1.0)
    assert case.time_of(choice) == 2.0
    bare = auto.AutoChoice("thread_mapped", "thread_mapped")
    bound = fit_auto.Measured("thread_mapped", {"NUM_THREADS": 64}, {"NUM_THREADS": 64}, 1.0)
    assert fit_auto.FitCase("d", case.stats, (bound,), 1.0).time_of(bare) is None


# -- the fit on the committed benchmark run ---------------------------------------------------


# The float32 constants BENCHMARKS.json.gz ran with (2026-11-21), whose picks its auto
# column records; the shipped ones have been refitted since.
RUN_CONSTANTS = {
    "THROUGHPUT_WAVES": 32, "CW": 1.5, "CI": 0.2, "CB": 0.5, "MIN_WAVES": 0.25, "CF0": 5.0,
    "CFS": 0.3, "CFW": 1.0, "CT": 0.25, "FLAT_WORK": 8, "FLAT_WORK_LARGE": 32,
    "FLAT_LARGE_NNZ": 2000000, "HIGH_CV": 2.0, "LONG_ROW": 1024, "SKEW": 32.0,
    "LARGE_ITEMS_MIN": 16, "LARGE_ITEMS_MAX": 32, "LANE_WORK": 4, "MIN_LARGE_GROUP": 8,
}


def test_fit_on_the_committed_benchmark_never_loses_and_round_trips(tmp_path: Path) -> None:
    doc = load(BENCHMARKS, need_stats=True)
    ran = auto.constants_from_mapping(RUN_CONSTANTS, "RUN_CONSTANTS")
    [fitted] = fit_auto.fit_documents(  # a float32 run: one dtype
        [(doc, str(BENCHMARKS))], {"float32": ran, "float64": auto.constants(8)})
    result, record = fitted.result, fitted.record
    assert fitted.dtype == "float32"
    cases = fit_auto.cases_of(doc)
    assert len(cases) == 30 and record["cases"] == 30
    # the document's own auto column: the shipped constants' picks over the best (where the
    # pick was timed twice, under two labels, the fit takes the faster: hence approx)
    over = [c["auto"]["over_best"] for c in doc["cases"]]
    assert result.before.within == sum(r <= fit_auto.FIT_SLACK for r in over)
    assert result.before.geomean_ratio == pytest.approx(
        math.exp(sum(math.log(r) for r in over) / len(over)), rel=1e-3)
    assert result.after.within >= result.before.within
    assert result.after.log_ratio <= result.before.log_ratio
    out = fit_auto.write_constants([fitted], tmp_path / "c.json")
    assert auto.load_constants(out, "float32") == result.constants
    assert fit_auto.score(cases, auto.load_constants(out)) == result.after
    # the dtype the run does not hold keeps the shipped constants and their record
    assert auto.load_constants(out, "float64") == auto.constants(8)
    written = json.loads(out.read_text())
    shipped = json.loads(auto.CONSTANTS_FILE.read_text())
    assert written["float64"] == shipped["float64"]


def _one_dtype(doc: dict[str, Any], dtype: str) -> dict[str, Any]:
    return {**doc, "cases": [{**c, "dtype": dtype} for c in doc["cases"]]}


def test_each_dtype_is_fitted_on_its_own_cases_pooled_over_runs() -> None:
    doc = synthetic_run()
    f64 = _one_dtype(doc, "float64")
    fits = fit_auto.fit_documents([(doc, "a.json"), (f64, "b.json"), (f64, "c.json")])
    by = {f.dtype: f for f in fits}
    assert set(by) == {"float32", "float64"}
    n = len(fit_auto.cases_of(doc))
    assert by["float32"].record["cases"] == n and by["float32"].record["results"] == ["a.json"]
    assert by["float64"].record["cases"] == 2 * n
    assert by["float64"].record["results"] == ["b.json", "c.json"]
    # the float64 cases start from float64's constants, not float32's
    f64_cases = fit_auto.cases_of(f64)
    assert by["float64"].result.before == fit_auto.score(2 * f64_cases, auto.constants(8))


def test_cli_fit_auto_writes_the_file_and_reports(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sub" / "constants.json"
    assert main(["bench", "--fit-auto", str(BENCHMARKS), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"float32: auto within 1\.05x of the best: \d+/30 -> \d+/30", text)
    assert f"constants: {out}" in text and "float64" not in text
    written = json.loads(out.read_text())
    assert written["float32"]["fitted_from"]["results"] == ["BENCHMARKS.json.gz"]
    assert "within 1.05x" in written["float32"]["fitted_from"]["objective"]
    assert auto.load_constants(out).CW == auto.constants().CW


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fit-auto", "{readme}"], "not JSON"),
        (["--fit-auto", "{nostats}"], "cases[0].stats: missing"),
        (["--fit-auto", "{bench}", "--plot", "x.png"], "drop --report"),
        (["--fit-auto", "{bench}", "-o", "{tmp}"], "is a directory"),
    ],
)
def test_cli_fit_auto_errors_are_one_line(tmp_path: Path, argv: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    nostats = synthetic_run()
    del nostats["cases"][0]["stats"]
    (tmp_path / "n.json").write_text(json.dumps(nostats))
    names = {"readme": str(REPO / "README.md"), "nostats": str(tmp_path / "n.json"),
             "bench": str(BENCHMARKS), "tmp": str(tmp_path)}
    assert main(["bench", *(a.format(**names) for a in argv)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_experiment_variants_are_neither_picks_nor_the_best() -> None:
    """A ``--source`` / patched kernel (or another block size) is not one auto can choose:
    the fit drops it, so the best it compares a pick with is one of ours."""
    doc = synthetic_run()
    first = doc["cases"][0]
    fastest = min(r["kernel"]["median_ms"] for r in first["results"])
    for label, mark in (("merge_path+old.cu", {"experiment": True}),
                        ("merge_path@t256", {}), ("merge_path+l2persist", {})):
        extra = _variant(auto.AutoChoice("merge_path", auto.MERGE_SPEC), fastest / 2)
        first["results"].append({**extra, "label": label, **mark})
    case = fit_auto.cases_of(doc)[0]
    assert case.best_ms == fastest
    assert len(case.variants) == len(first["results"]) - 3


# -- constants fitted on one GPU model -----------------------------------------------------------

H200_F64 = REPO / "benchmarks/spmv_h200_f64_publish.json.gz"


def test_a_gpu_model_with_a_section_of_its_own_uses_it_and_no_other_does() -> None:
    """The shipped file holds the H200's float64 set: the banded matrix of an H200 float64 run,
    where the H200's set and float64's pick different groups, shows which set decided."""
    sets = auto.device_constant_sets()
    assert set(sets) == {("NVIDIA H200", "float64")}
    doc = load(H200_F64, need_stats=True)
    banded = next(c for c in fit_auto.cases_of(doc) if c.name.startswith("banded"))
    h200 = DeviceInfo("NVIDIA H200", 132)
    h100 = DeviceInfo("NVIDIA H100 80GB HBM3", 132)
    own = auto.choose(banded.stats, h200, sets[("NVIDIA H200", "float64")], value_bytes=8)
    generic = auto.choose(banded.stats, h200, auto.constant_sets()["float64"], value_bytes=8)
    assert own.label != generic.label
    assert auto.choose(banded.stats, h200, value_bytes=8) == own
    assert auto.choose(banded.stats, h100, value_bytes=8) == auto.choose(
        banded.stats, h100, auto.constant_sets()["float64"], value_bytes=8)
    assert auto.constants(4, h200) is auto.constant_sets()["float32"]  # no float32 section
    # and the H200's set is the better one on that run (the fit's own measure)
    mine = [c for c in fit_auto.cases_of(doc) if c.dtype == "float64"]
    assert fit_auto.score(mine, sets[("NVIDIA H200", "float64")]).within > \
        fit_auto.score(mine, auto.constant_sets()["float64"]).within


def _on(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return {**doc, "device": {**doc["device"], "name": name}}


def test_a_per_device_fit_writes_a_section_per_gpu_and_keeps_every_other(
    tmp_path: Path,
) -> None:
    doc = synthetic_run()
    a, b = _on(doc, "GPU A"), _on(_one_dtype(doc, "float64"), "GPU B")
    fits = fit_auto.fit_documents([(a, "a.json"), (b, "b.json")], per_device=True)
    assert {(f.device, f.dtype) for f in fits} == {("GPU A", "float32"), ("GPU B", "float64")}
    by = {f.device: f for f in fits}
    assert by["GPU A"].record["results"] == ["a.json"]
    assert by["GPU B"].start == auto.constants(8)  # from what GPU B used: float64's set
    out = fit_auto.write_constants(fits, tmp_path / "c.json")
    sets = auto.load_device_sets(out)
    assert sets[("GPU A", "float32")] == by["GPU A"].result.constants
    assert sets[("GPU B", "float64")] == by["GPU B"].result.constants
    assert sets[("NVIDIA H200", "float64")] == \
        auto.device_constant_sets()[("NVIDIA H200", "float64")]  # the shipped one kept
    written, shipped = json.loads(out.read_text()), json.loads(auto.CONSTANTS_FILE.read_text())
    assert written["float32"] == shipped["float32"] and written["float64"] == shipped["float64"]
    assert written["devices"]["NVIDIA H200"] == shipped["devices"]["NVIDIA H200"]
    assert written["devices"]["GPU A"]["float32"]["fitted_from"]["devices"] == ["GPU A"]


def test_a_per_device_fit_starts_from_the_given_constants() -> None:
    """A caller's start set is where every section's fit starts, also for a GPU that has a
    shipped section of its own (which is only the default)."""
    doc = _on(_one_dtype(synthetic_run(), "float64"), "NVIDIA H200")
    shipped = auto.device_constant_sets()[("NVIDIA H200", "float64")]
    default = fit_auto.fit_documents([(doc, "a.json")], per_device=True)
    assert default[0].start == shipped
    mine = dict(auto.constant_sets())
    mine["float64"] = dataclasses.replace(mine["float64"], CW=mine["float64"].CW * 2)
    given = fit_auto.fit_documents([(doc, "a.json")], start=mine, per_device=True)
    assert given[0].start == mine["float64"] != shipped


@pytest.mark.parametrize(("devices", "message"), [
    ({"X": {"float16": {}}}, "devices: X: unknown dtype 'float16'"),
    ({"X": {}}, "devices: X: must be an object with a section per dtype"),
    ({"X": {"float64": []}}, "devices: X: 'float64' must be an object"),
    ({"X": {"float64": {"constants": {"CW": 1.0}}}}, "devices: X: float64: auto constant"),
    ([], "'devices' must be an object"),
])
def test_a_broken_device_section_is_one_located_line(tmp_path: Path, devices: Any,
                                                     message: str) -> None:
    doc = json.loads(auto.CONSTANTS_FILE.read_text())
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**doc, "devices": devices}))
    with pytest.raises(TeaalLoopsError) as err:
        auto.load_device_sets(path)
    assert message in str(err.value) and str(path) in str(err.value)
    assert len(str(err.value).splitlines()) == 1


def test_cli_fit_auto_per_device_reports_each_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    run = tmp_path / "run.json"
    run.write_text(json.dumps(_on(synthetic_run(), "GPU A")))
    out = tmp_path / "c.json"
    assert main(["bench", "--fit-auto", str(run), "--per-device", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "GPU A, float32: auto within 1.05x of the best:" in text
    assert ("GPU A", "float32") in auto.load_device_sets(out)
    assert main(["bench", "--per-device"]) == 2
    assert "--per-device goes with --fit-auto" in capsys.readouterr().err
