"""The SpMM and SDDMM suites through the harness on the CPU (the ``fake_gpu`` fixture): every
width of every matrix, the best cuSPARSE beside the second column, wrong kernels refused
before timing, operands in the order each spec stores them, graphs, speedups, JSON."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from teaal_loops.bench import BenchOptions, bench, load, markdown, run_bench
from teaal_loops.bench.cusparse.descriptors import CusparseBaselineError
from teaal_loops.bench.suite import MatrixEntry, PlanItem
from teaal_loops.bench.variants import Variant
from tests.bench.conftest import FakeEnv
from tests.bench.fake_gpu import BASELINE_COSTS, COSTS, EVENT_MS
from tests.conftest import REPO

SPECS = REPO / "specs"
SPMM = [Variant(SPECS / "spmm" / "lanes_over_n.yaml"),
        Variant(SPECS / "spmm" / "group_lanes_over_k.yaml")]  # the fake makes it wrong
SDDMM = [Variant(SPECS / "sddmm" / "thread_per_nonzero.yaml")]


def _options(tmp_path: Path, **kw: object) -> BenchOptions:
    entries = [MatrixEntry("uni", "custom", "synthetic", text="uniform:rows=60,nnz=400,seed=1"),
               MatrixEntry("band", "large", "gpu", generator="banded",
                           options={"rows": 64, "width": 4})]
    options = BenchOptions(
        entries, [], reps=3, warmup=1, max_copies=2, auto=False,
        plan=[PlanItem(e, ("spmm", "sddmm")) for e in entries],
        kernel_variants={"spmm": SPMM, "sddmm": SDDMM},
        widths={"spmm": (4, 8), "sddmm": (3,)}, json_path=tmp_path / "r.json")
    for key, value in kw.items():
        setattr(options, key, value)
    return options


def test_dense_suites_end_to_end(fake_gpu: FakeEnv, tmp_path: Path) -> None:
    doc = run_bench(_options(tmp_path))
    assert [(c["matrix"], c["kernel"], c["width"]) for c in doc["cases"]] == [
        (m, k, w) for m in ("uni", "band") for k, w in (("spmm", 4), ("spmm", 8), ("sddmm", 3))]
    assert load(tmp_path / "r.json")["cases"][0]["kernel"] == "spmm"
    for c in doc["cases"]:
        assert c["copies"] == 2 and c["compulsory_bytes"] > 0
        cs = c["cusparse"]
        assert cs["winner"] == "CSR_ALG1"  # BROKEN is faster and wrong
        assert cs["kernel"]["median_ms"] == pytest.approx(BASELINE_COSTS["CSR_ALG1"] + EVENT_MS)
        assert cs["graph"]["check"]["valid"]
        by = {r["label"]: r for r in c["results"]}
        best = by[c["best"]["label"]]
        assert best["valid"] and {"kernel", "throughput", "latency", "graph"} <= set(best)
        assert best["speedup"]["kernel"] == pytest.approx(
            cs["kernel"]["median_ms"] / best["kernel"]["median_ms"])
        assert best["dense_launch"]["dense_space"] >= 1
    spmm = [c for c in doc["cases"] if c["kernel"] == "spmm"]
    for c in spmm:
        by = {r["label"]: r for r in c["results"]}
        assert c["best"]["label"] == "lanes_over_n" and c["cusparse"]["library"] == "cupy"
        assert by["lanes_over_n"]["kernel"]["median_ms"] == pytest.approx(
            COSTS["lanes_over_n"] + EVENT_MS)
        wrong = by["group_lanes_over_k"]
        assert not wrong["valid"] and "kernel" not in wrong and wrong["mismatches"] > 0
        assert c["second"]["what"].startswith("cupyx") and "kernel" in c["second"]
        assert "operands" not in by["lanes_over_n"]  # B is stored as given, [K, N]
    for c in (c for c in doc["cases"] if c["kernel"] == "sddmm"):
        assert c["cusparse"]["library"] == "nvmath"
        assert c["second"]["what"].startswith("torch") and c["second"]["check"]["valid"]
        ours = c["results"][0]
        assert ours["operands"] == ["B stored [N, K]: a transposed copy made once before timing"]
    text = markdown(doc)
    assert "### SpMM N=8: large synthetic matrices (> L2)" in text
    assert "### SDDMM K=3: other matrices" in text


def test_sddmm_operands_reach_the_kernel_in_the_specs_storage_order(
        fake_gpu: FakeEnv, tmp_path: Path) -> None:
    run_bench(_options(tmp_path, plan=[PlanItem(_options(tmp_path).entries[0], ("sddmm",))]))
    sddmm = [k for k in fake_gpu.kernels if k.form == "sddmm"]
    a, b = sddmm[0].calls[-1]
    assert a.shape == (60, 3) and a.flags.c_contiguous  # A stored [M, K]: as generated
    assert b.shape == (3, 60) and b.flags.f_contiguous  # B stored [N, K]: the transpose
    assert len(sddmm[0].forgotten) == 2  # both copies dropped after the case


def test_a_baseline_that_cannot_run_is_recorded_and_the_case_goes_on(
        fake_gpu: FakeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import teaal_loops.bench.baselines as baselines

    def refuse(*args: object) -> None:
        raise CusparseBaselineError("cuSPARSE SpMM: no algorithm runs (fake)")

    monkeypatch.setattr(baselines, "make_spmm", refuse)
    options = _options(tmp_path, widths={"spmm": (4,), "sddmm": ()})
    doc = run_bench(options)
    for c in doc["cases"]:
        assert c["cusparse"] == {"error": "CusparseBaselineError: cuSPARSE SpMM: no algorithm "
                                          "runs (fake)"}
        best = c["best"]
        assert best["label"] == "lanes_over_n" and best["speedup"]["kernel"] is None
        assert best["second_speedup"]["kernel"] is not None  # cupyx still ran
    errors = doc["summary"]["baseline_errors"]
    assert [(e["matrix"], e["side"]) for e in errors] == [("uni", "cusparse"), ("band", "cusparse")]
    assert doc["summary"]["targets"]["spmm_parity"]["met"] is False


def test_a_matrix_that_cannot_be_loaded_is_an_error_case_per_kernel(
        fake_gpu: FakeEnv, tmp_path: Path) -> None:
    bad = tmp_path / "bad.mtx"
    bad.write_text("%%MatrixMarket matrix coordinate real general\n2 2 5\n1 1 1.0\n")
    entry = MatrixEntry("bad", "corpus", "file", path=bad)
    doc = run_bench(_options(tmp_path, plan=[PlanItem(entry, ("spmm", "sddmm"))]))
    assert [(c["matrix"], c["kernel"]) for c in doc["cases"]] == [("bad", "spmm"),
                                                                   ("bad", "sddmm")]
    assert all(c["error"] == doc["cases"][0]["error"] for c in doc["cases"])
    assert doc["summary"]["targets"]["spmm_parity"]["misses"][0]["matrix"] == "bad"
    assert load(tmp_path / "r.json")["cases"][1]["kernel"] == "sddmm"


def test_a_case_over_the_time_budget_is_skipped_by_name(fake_gpu: FakeEnv, tmp_path: Path
                                                        ) -> None:
    doc = run_bench(_options(tmp_path, time_budget_s=1e-9))
    assert doc["incomplete"] and doc["cases"] == []
    assert doc["skipped"] == ["uni", "band"]


def test_outputs_are_poisoned_so_an_unwritten_entry_fails(fake_gpu: FakeEnv, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    from tests.bench.fake_gpu import FakeKernel

    real = FakeKernel.call_dense

    def skip_first(self: FakeKernel, p: object, operands: object, *, out: object = None
                   ) -> object:
        keep = None if out is None else np.array(out, copy=True)
        got = real(self, p, operands, out=out)
        if keep is not None:
            out[0] = keep[0]  # type: ignore[index]  # the first entry left as it was
        return got

    monkeypatch.setattr(FakeKernel, "call_dense", skip_first)
    doc = run_bench(_options(tmp_path, widths={"spmm": (4,), "sddmm": (3,)}))
    for c in doc["cases"]:
        assert all(not r["valid"] and r["mismatches"] >= 1 for r in c["results"]), c["matrix"]


def test_specs_given_without_a_suite_run_their_own_kernels(fake_gpu: FakeEnv) -> None:
    doc = bench([SPECS / "spmm" / "lanes_over_n.yaml", SPECS / "sddmm" / "thread_per_nonzero.yaml"],
                suites=(), synthetic=["uniform:rows=40,nnz=200,seed=1"],
                widths={"spmm": (4,), "sddmm": (2,)}, reps=3, warmup=0, max_copies=1)
    assert [(c["kernel"], c["width"], [r["label"] for r in c["results"]])
            for c in doc["cases"]] == [("spmm", 4, ["lanes_over_n"]),
                                       ("sddmm", 2, ["thread_per_nonzero"])]
    assert all(r["valid"] for c in doc["cases"] for r in c["results"])


def test_a_split_is_refused_where_no_spmm_is_timed_or_its_width_is_bad() -> None:
    """Refused before anything runs (no GPU needed): a split times SpMM; a panel width is
    checked as pieces:W checks its own."""
    from teaal_loops.bench import check_splits
    from teaal_loops.bench.context import SplitAt
    from teaal_loops.errors import LayoutError, TeaalLoopsError

    assert check_splits(["1024", 1024, 4096, "1024:4096"], ("spmm",)) == (SplitAt(1024),
                                                                          SplitAt(4096))
    assert check_splits([], ("spmv",)) == ()
    assert check_splits([1024], ("spmv",)) == (SplitAt(1024),)
    low = check_splits(["65536:128", " 65536 : 128"], ("spmm",))
    assert low == (SplitAt(65536, 128),) and low[0].name == "split:65536:128"
    assert SplitAt(1024).name == "split:1024"  # the default minimum is not named
    with pytest.raises(TeaalLoopsError, match="a split times SpMV and SpMM; add a suite"):
        check_splits([1024], ("sddmm",))
    with pytest.raises(TeaalLoopsError, match="--split 1024:128: a split times"):
        check_splits(["1024:128"], ("sddmm",))
    with pytest.raises(LayoutError, match="32 to 16777216"):
        check_splits([16], ("spmm",))
    for bad, message in (("1024:abc", "MIN after the colon must be a whole number"),
                         ("1024:", "MIN after the colon"), ("1024:-3", "MIN after the colon"),
                         ("1024:0", "min_nnz=0 must be a whole number >= 1"),
                         ("x:128", "the panel width in columns")):
        with pytest.raises(TeaalLoopsError, match=message):
            check_splits([bad], ("spmm",))


@pytest.mark.parametrize(("split", "message"), [
    ("abc", "the panel width in columns"), ("1024", "a split times SpMV and SpMM"),
    ("1024:many", "MIN after the colon must be a whole number"),
])
def test_the_command_line_refuses_a_bad_split_in_one_line(
    split: str, message: str, capsys: pytest.CaptureFixture[str],
) -> None:
    from teaal_loops.cli import main

    rc = main(["bench", "--synthetic", "uniform:rows=40,nnz=200,seed=1", "--split", split,
               *([] if split != "1024" else [str(SPECS / "sddmm" / "thread_per_nonzero.yaml")]),
               "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and message in err[0], err
