"""Planning a benchmark without a GPU: which kernels each matrix runs, the dense suites'
classes, widths, the variants of each kernel, and the command line's one-line refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from teaal_loops.bench import plan
from teaal_loops.bench.suite import build_plan, dense_large_classes
from teaal_loops.cli import main
from teaal_loops.errors import TeaalLoopsError
from tests.conftest import REPO

LOOPS_SPMM = "spmm_thread_mapped__cell08_0.yaml"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name in ("a", "b"):
        (folder / f"{name}.mtx").write_text(
            "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1.0\n")
    return folder


def test_widths_default_per_kernel_and_parse_for_one_or_both() -> None:
    assert plan.parse_widths([]) == {"spmm": (8, 32, 128), "sddmm": (32, 128)}
    assert plan.parse_widths(["16,64"]) == {"spmm": (16, 64), "sddmm": (16, 64)}
    assert plan.parse_widths(["spmm:4", "sddmm:1,1,3"]) == {"spmm": (4,), "sddmm": (1, 3)}
    for bad, message in (("spgemm:4", "expected spmm:N"), ("8,x", "'x' is not an integer"),
                         ("0", "outside 1..4096"), ("spmm:99999", "outside 1..4096")):
        with pytest.raises(TeaalLoopsError, match=message):
            plan.parse_widths([bad])
    with pytest.raises(TeaalLoopsError, match="widths of spmm are given twice"):
        plan.parse_widths(["spmm:4", "8"])


def test_a_corpus_matrix_runs_every_kernel_of_the_suites_loaded_once(corpus: Path) -> None:
    items = build_plan(["corpus", "spmm", "sddmm"], corpus_dir=corpus, large_scale=1 / 64)
    kernels = {i.entry.name: i.kernels for i in items}
    assert kernels["a"] == ("spmv", "spmm", "sddmm") and kernels["b"] == kernels["a"]
    dense = [n for n, k in kernels.items() if k == ("spmm", "sddmm")]
    assert dense == [e.name for e in dense_large_classes(1 / 64)]
    alone = [i.entry.name for i in build_plan(["spmm"], corpus_dir=corpus)]
    assert alone == [e.name for e in dense_large_classes(1.0)] + ["a", "b"]  # classes first
    with pytest.raises(TeaalLoopsError, match="appear twice in the suite: a, b"):
        build_plan(["spmm", "spmm"], corpus_dir=corpus)


def test_single_matrices_run_the_suites_kernels_or_those_given(corpus: Path) -> None:
    text = "uniform:rows=50,nnz=200"
    assert build_plan([], synthetic=[text])[0].kernels == ("spmv",)
    items = build_plan(["sddmm"], synthetic=[text], corpus_dir=corpus, only=["uniform:rows=50,"
                                                                            "nnz=200"])
    assert [(i.entry.name, i.kernels) for i in items] == [("uniform:rows=50,nnz=200", ("sddmm",))]
    assert build_plan([], synthetic=[text], custom_kernels=("spmm",))[0].kernels == ("spmm",)
    with pytest.raises(TeaalLoopsError, match="kernel 'spgemm'"):
        build_plan([], synthetic=[text], custom_kernels=("spgemm",))


def test_dense_classes_are_named_by_size_and_never_clash_with_spmv_ones() -> None:
    full = dense_large_classes(1.0)
    assert [e.name for e in full] == ["banded-r20", "uniform-r20", "rmat-s20", "longrows-r20"]
    assert full[1].options == {"rows": 2**20, "nnz": 2**24}
    small = dense_large_classes(1 / 256)
    assert small[0].name == "banded-r12@0.00390625" and small[1].options["rows"] == 2**12
    assert {e.generator for e in full} == {"banded", "uniform", "rmat", "longrows"}


def test_each_kernel_gets_its_specs_or_the_library() -> None:
    loops = REPO.parent / "shared" / "corpus" / "teaal-specs" / "loops" / LOOPS_SPMM
    lanes = REPO / "specs" / "spmm" / "lanes_over_n.yaml"
    assert plan.spec_kernel(lanes) == "spmm"
    assert plan.spec_kernel(REPO / "specs" / "sddmm" / "thread_per_nonzero.yaml") == "sddmm"
    by, auto = plan.kernel_variants([lanes], ("spmv", "spmm", "sddmm"))
    assert [v.label for v in by["spmm"]] == ["lanes_over_n"]  # given: no sweep
    assert "merge_path" in [v.label for v in by["spmv"]] and auto is False  # the library
    assert [v.label for v in by["sddmm"]] == [
        "lanes_over_k", "lanes_over_k_runs", "lanes_over_k_runs[K_STEP=16]",
        "thread_per_nonzero", "thread_per_nonzero[WORK_PER_THREAD=1]",
        "thread_per_nonzero_runs", "thread_per_nonzero_runs[K_STEP=16]",
        "thread_per_nonzero_runs[WORK_PER_THREAD=1]",
        "thread_per_nonzero_runs[K_STEP=16,WORK_PER_THREAD=1]"]
    library, _ = plan.kernel_variants([], ("spmm",))
    assert [v.label for v in library["spmm"]] == [
        "group_lanes_over_k", "group_lanes_vec", "group_lanes_vec[ROW_LANES=1]",
        "group_lanes_vec[ROW_LANES=2]",
        "group_lanes_vec[ROW_LANES=8]", "group_lanes_vec[ROW_LANES=16]", "lanes_over_n", "lanes_over_n_tiled[N_TILE=32]",
        "lanes_over_n_vec", "lanes_over_n_vec_rows", "lanes_over_n_vec_rows[ROWS=2]",
        "nonzero_split", "nonzero_split[NNZ_PER_WORKER=8]",
        "nonzero_split[NNZ_PER_WORKER=12]", "nonzero_split[NNZ_PER_WORKER=24]",
        "nonzero_split[NNZ_PER_WORKER=48]", "nonzero_split[NNZ_PER_WORKER=64]",
        "nonzero_split[NNZ_PER_WORKER=128]",
        "nonzero_split_vec", "nonzero_split_vec[NNZ_PER_WORKER=8]",
        "nonzero_split_vec[NNZ_PER_WORKER=12]", "nonzero_split_vec[NNZ_PER_WORKER=24]",
        "nonzero_split_vec[NNZ_PER_WORKER=48]", "nonzero_split_vec[NNZ_PER_WORKER=64]",
        "nonzero_split_vec[NNZ_PER_WORKER=128]"]
    assert all(v.layout == "csr" for v in library["spmm"])
    if loops.is_file():
        given, _ = plan.kernel_variants([loops], ("spmm",))
        assert [v.label for v in given["spmm"]] == [loops.stem]


def test_the_spmm_suite_runs_in_every_layout_given_that_serves_it() -> None:
    nonzero = REPO / "specs" / "spmm" / "nonzero_split_vec.yaml"
    got, _ = plan.kernel_variants([nonzero], ("spmv", "spmm"),
                                  layouts=("csr", "panels:2", "heavy:1024"))
    assert [v.layout for v in got["spmm"]] == ["csr", "heavy:1024"]  # panels: SpMV alone
    assert {v.layout for v in got["spmv"]} == {"csr", "panels:2", "heavy:1024"}


def test_kernel_variants_refuse_in_one_line() -> None:
    lanes = REPO / "specs" / "spmm" / "lanes_over_n.yaml"
    with pytest.raises(TeaalLoopsError, match="a SPMM spec, but no spmm case runs .*--suite spmm"):
        plan.kernel_variants([lanes], ("spmv",))
    with pytest.raises(TeaalLoopsError, match=r"--layout panels:2: none serves SPMM \(layouts "
                                              r"that do: .*heavy"):
        plan.kernel_variants([], ("spmv", "spmm"), layouts=("panels:2",))
    with pytest.raises(TeaalLoopsError, match="--layout heavy:1024: none serves SDDMM"):
        plan.kernel_variants([], ("sddmm",), layouts=("heavy:1024",))
    with pytest.raises(TeaalLoopsError, match="SDDMM has no auto choice"):
        plan.kernel_variants([], ("sddmm",), schedule="auto")
    with pytest.raises(TeaalLoopsError, match="no spmm spec left to benchmark for --schedule "
                                              "merge_path"):
        plan.kernel_variants([], ("spmm",), schedule="merge_path")


def test_the_command_line_refuses_bad_dense_options_in_one_line(
        corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--suite", "spmm", "--widths", "spmm:0"]) == 2
    assert "--widths 'spmm:0': 0 is outside 1..4096" in capsys.readouterr().err
    assert main(["bench", str(REPO / "specs" / "spmm" / "lanes_over_n.yaml"),
                 "--corpus-dir", str(corpus)]) == 2
    err = capsys.readouterr().err
    assert "no spmm case runs" in err and len(err.strip().splitlines()) == 1
    # everything is planned before the GPU is asked for: here, one line saying there is none
    assert main(["bench", "--suite", "sddmm", "--corpus-dir", str(corpus), "--widths",
                 "sddmm:8", "--only", "a", "-q", "-o", str(corpus / "r.json")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_block_sizes_and_source_files_apply_to_the_kernel_that_times_the_label(
        tmp_path: Path) -> None:
    from teaal_loops import bench as bench_module

    cu = tmp_path / "old.cu"
    cu.write_text("// a kernel from an earlier commit\n")
    by, _ = plan.kernel_variants([], ("spmv", "spmm"))
    out = bench_module._with_experiments(by, (256,), [("lanes_over_n@t256", cu)])
    spmm = [v.label for v in out["spmm"]]
    assert "lanes_over_n@t256" in spmm and "lanes_over_n@t256+old.cu" in spmm
    assert not any(v.source for v in out["spmv"])
    assert "merge_path@t256" in [v.label for v in out["spmv"]]
    with pytest.raises(TeaalLoopsError, match="no variant 'nope' is timed"):
        bench_module.bench(suites=(), synthetic=["uniform:rows=20,nnz=50"],
                           sources=[("nope", cu)])


def test_a_spec_with_an_epilogue_is_refused_by_the_bench(tmp_path: Path) -> None:
    from teaal_loops.errors import TeaalLoopsError

    spec = tmp_path / "gemv_like.yaml"
    spec.write_text(
        "einsum:\n  declaration: {A: [M, K], B: [K], T1: [M], C: [M], Z: [M]}\n"
        "  expressions: ['T1[m] = A[m, k] * B[k]', 'Z[m] = a * T1[m] + b * C[m]']\n"
    )
    with pytest.raises(TeaalLoopsError, match="epilogue"):
        plan.spec_kernel(spec)
