"""Tuning experiments in the benchmark (block sizes, source files, patches), the loop timing and
the profile command's planning: everything that runs without a GPU."""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path
from typing import Any

import pytest

from teaal_loops.bench import harness, profile
from teaal_loops.bench.timing import Timer
from teaal_loops.bench.variants import (
    Variant,
    parse_block_threads,
    parse_sources,
    prepare_variant,
    with_experiments,
)
from teaal_loops.cli import main
from teaal_loops.errors import TeaalLoopsError
from tests.conftest import REPO

SPECS = REPO / "specs"
MERGE = Variant(SPECS / "merge_path.yaml", {"ITEMS_PER_THREAD": 16})


def test_labels_name_block_size_source_and_patch() -> None:
    assert MERGE.label == "merge_path[ITEMS_PER_THREAD=16]"
    assert dataclasses.replace(MERGE, block_threads=256).label == (
        "merge_path[ITEMS_PER_THREAD=16]@t256")
    assert dataclasses.replace(MERGE, source=Path("old/m.cu")).label == (
        "merge_path[ITEMS_PER_THREAD=16]+m.cu")
    patched = dataclasses.replace(MERGE, patch=(("a", "b"),), tag="unroll8")
    assert patched.label == "merge_path[ITEMS_PER_THREAD=16]+unroll8"
    assert MERGE.generated and not patched.generated


def test_block_threads_and_sources_parse_and_refuse_in_one_line(tmp_path: Path) -> None:
    assert parse_block_threads(["128,256", "256", "512"]) == (128, 256, 512)
    for bad in ("100", "2048", "x", "0"):
        with pytest.raises(TeaalLoopsError, match="--block-threads"):
            parse_block_threads([bad])
    cu = tmp_path / "old.cu"
    cu.write_text("// old kernel\n")
    assert parse_sources([f"merge_path[ITEMS_PER_THREAD=16]={cu}"]) == [
        ("merge_path[ITEMS_PER_THREAD=16]", cu)]
    for bad in ("merge_path", f"={cu}", "merge_path=", f"merge_path={tmp_path / 'none.cu'}"):
        with pytest.raises(TeaalLoopsError, match="--source"):
            parse_sources([bad])


def test_experiments_add_block_sizes_and_source_variants(tmp_path: Path) -> None:
    thread = Variant(SPECS / "thread_mapped.yaml")
    cu = tmp_path / "old.cu"
    cu.write_text("x")
    out = with_experiments([thread, MERGE], block_threads=(256,),
                           sources=[("merge_path[ITEMS_PER_THREAD=16]@t256", cu)])
    assert [v.label for v in out] == [
        "thread_mapped", "merge_path[ITEMS_PER_THREAD=16]", "thread_mapped@t256",
        "merge_path[ITEMS_PER_THREAD=16]@t256", "merge_path[ITEMS_PER_THREAD=16]@t256+old.cu"]
    assert out[-1].source == cu and out[-1].block_threads == 256
    with pytest.raises(TeaalLoopsError, match="no variant 'group_mapped' is timed"):
        with_experiments([thread], sources=[("group_mapped", cu)])


def test_a_source_file_must_define_the_kernel_and_a_patch_must_apply(tmp_path: Path) -> None:
    generated = 'extern "C" __global__ void teaal_spmv_merge_path(int n) { UNROLL 4 }'
    old = tmp_path / "old.cu"
    old.write_text('extern "C" __global__ void teaal_spmv_merge_path(int n) { }')
    v = dataclasses.replace(MERGE, source=old)
    assert v.kernel_source(generated, "teaal_spmv_merge_path") == old.read_text()
    with pytest.raises(TeaalLoopsError) as err:
        v.kernel_source(generated, "teaal_spmv_thread_mapped")
    assert err.value.cli_line().startswith(f"{old}: error: defines no kernel teaal_spmv_thread_mapped")
    patched = dataclasses.replace(MERGE, patch=(("UNROLL 4", "UNROLL 8"),))
    assert "UNROLL 8" in patched.kernel_source(generated, "teaal_spmv_merge_path")
    stale = dataclasses.replace(MERGE, patch=(("UNROLL 2", "UNROLL 8"),))
    with pytest.raises(TeaalLoopsError, match="patch target 'UNROLL 2' is not in"):
        stale.kernel_source(generated, "teaal_spmv_merge_path")


@dataclasses.dataclass
class FakePrepared:
    source: str
    config: Any
    _functions: dict[bool, Any] = dataclasses.field(default_factory=dict)
    _raw: dict[bool, Any] = dataclasses.field(default_factory=dict)


def test_prepare_variant_replaces_the_source_with_fresh_function_caches() -> None:
    config = types.SimpleNamespace(kernel_name="k")
    kernel = types.SimpleNamespace(
        prepare=lambda m: FakePrepared(f"void k() {{ {m} }}", config, {False: "compiled"}))
    plain = prepare_variant(kernel, MERGE, ["a", "b"])
    assert [p.source for p in plain] == ["void k() { a }", "void k() { b }"]
    assert plain[0]._functions == {False: "compiled"}  # the generated source: kept as is
    patched = dataclasses.replace(MERGE, patch=(("{ a }", "{ a; a }"),))
    out = prepare_variant(kernel, patched, ["a", "a"])
    assert [p.source for p in out] == ["void k() { a; a }"] * 2
    assert all(p._functions == {} and p._raw == {} for p in out)


def test_loop_timing_counts_calls_and_divides_wall_time() -> None:
    synced: list[str] = []
    cp = types.SimpleNamespace(
        RawKernel=lambda *a: None,
        cuda=types.SimpleNamespace(Device=lambda: types.SimpleNamespace(
            synchronize=lambda: synced.append("sync"))))
    calls: list[int] = []
    ms = Timer(cp).loop(calls.append, 40)
    assert calls == list(range(40)) and synced == ["sync", "sync"] and ms >= 0
    assert harness.loop_calls(25, 0.005) == harness.LOOP_CALLS  # fast: the full count
    assert harness.loop_calls(25, 2.0) == 25  # slow: the budget, never below reps
    assert harness.loop_calls(5, 0.5) == int(harness.LOOP_BUDGET_MS / 0.5)
    assert harness.loop_calls(7, float("nan")) == 7


# -- profile: labels and the matrix -----------------------------------------------------------


def test_profile_variants_come_from_table_labels() -> None:
    v = profile.variant_from_label("merge_path[ITEMS_PER_THREAD=16]@t256", SPECS)
    assert v.spec == SPECS / "merge_path.yaml" and v.params == {"ITEMS_PER_THREAD": 16}
    assert v.block_threads == 256 and v.label == "merge_path[ITEMS_PER_THREAD=16]@t256"
    own = profile.variant_from_label(str(SPECS / "thread_mapped.yaml"), SPECS)
    assert own.spec == SPECS / "thread_mapped.yaml" and own.block_threads is None
    # a layout other than CSR, as the bench labels it (after a block size, if any)
    panels = profile.variant_from_label("group_mapped[BLOCK_SIZE=8]@t256@panels:3", SPECS)
    assert panels.layout == "panels:3" and panels.block_threads == 256
    assert panels.label == "group_mapped[BLOCK_SIZE=8]@t256@panels:3"
    assert profile.variant_from_label("merge_path@PANELS", SPECS).layout == "panels:2"
    for bad, message in (("nope", "no spec"), ("merge_path@t100", "@t100"),
                         ("merge_path[X]", "NAME=INTEGER"), ("../x[Y=1]", "no spec"),
                         ("merge_path@hyb", "unknown layout 'hyb'")):
        with pytest.raises(TeaalLoopsError, match=message):
            profile.variant_from_label(bad, SPECS)


def test_profile_finds_one_matrix(tmp_path: Path) -> None:
    banded = profile.find_entry(name="banded", large_scale=1 / 256)
    assert banded.origin == "gpu" and banded.generator == "banded"
    synthetic = profile.find_entry(synthetic="uniform:rows=100,nnz=500")
    assert synthetic.origin == "synthetic"
    mtx = tmp_path / "m.mtx"
    mtx.write_text("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 2.0\n")
    assert profile.find_entry(file=str(mtx)).path == mtx
    with pytest.raises(TeaalLoopsError, match="not a large class"):
        profile.find_entry(name="nope", corpus_dir=tmp_path)
    with pytest.raises(TeaalLoopsError, match="give one matrix"):
        profile.find_entry(name="banded", file=str(mtx))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["profile", "--bench-matrix", "banded"], "nothing to launch"),
        (["profile", "--bench-matrix", "banded", "--cusparse", "--launches", "0"], "--launches"),
        (["profile", "--bench-matrix", "nope", "--cusparse"], "not a large class"),
        (["profile", "--synthetic", "uniform:rows=9,nnz=9", "--variant", "nope"], "no spec"),
        (["profile", "-m", "/nonexistent.mtx", "--cusparse"], "no such file"),
    ],
)
def test_profile_errors_are_one_line(argv: list[str], message: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
