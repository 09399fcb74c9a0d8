"""``teaal-loops check`` and ``explain`` on the dense forms: every SpMM spec of the loops
corpus (the ver1/ver2 "spgemm" specs that are textually SpMM included), TeAAL's transposed
spmm.yaml and two-einsum sddmm.yaml agree with the simulation on a synthetic and a real
matrix; the 3-D SpGEMM specs are refused; ``--rank`` sizes the dense rank."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import teaal_loops.lowering as lowering
from teaal_loops.cli import main
from teaal_loops.spec import load_spec
from tests.conftest import REPO, corpus_dir, require_corpus
from tests.lowering.dense_specs import PARAMS, SPECS, SPMV_TRANSPOSED, write_spec

SYNTH = "emptyrows:rows=40,cols=30,nnz=200,seed=3"
# Small bindings of the corpus specs' parameters (tile sizes nest, group sizes are powers of 2).
CORPUS_PARAMS = {
    "NUM_TILES": 4, "NUM_THREADS": 2, "GRID_SIZE": 2, "BLOCK_SIZE": 2, "NUM_SM": 3,
    "WARP_SIZE": 2, "TILES_PER_GROUP": 3, "WORK_PER_THREAD": 3,
}


def _loops(pattern: str) -> list[str]:
    return sorted(p.name for p in (corpus_dir() / "teaal-specs" / "loops").glob(pattern))


# Listed by name so that the parametrisation does not depend on the corpus being present.
SPMM_SPECS = [
    "spmm_group_mapped__cell08_0.yaml", "spmm_thread_mapped__cell08_0.yaml",
    "spmm_work_oriented__cell07_0.yaml", "ver1__spmm_group_mapped__cell08_0.yaml",
    "ver1__spmm_thread_mapped__cell08_0.yaml", "ver2__spmm_group_mapped__cell08_0.yaml",
    "ver2__spmm_thread_mapped__cell08_0.yaml",
    # textually SpMM: same einsum, no format section, only the loop order differs
    "ver1__spgemm_group_mapped__cell08_0.yaml", "ver1__spgemm_thread_mapped__cell08_0.yaml",
    "ver2__spgemm_work_oriented__cell07_0.yaml",
]
SPGEMM_3D = [
    "spgemm_group_mapped__cell08_0.yaml", "spgemm_thread_mapped__cell08_0.yaml",
    "spgemm_work_oriented__cell07_0.yaml", "ver2__spgemm_group_mapped__cell08_0.yaml",
    "ver2__spgemm_thread_mapped__cell08_0.yaml",
]
CORPUS_CASES = [("loops", n) for n in SPMM_SPECS] + [
    ("teaal-compiler", "spmm.yaml"), ("teaal-compiler", "sddmm.yaml")
]


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["check", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _param_args(spec_path: Path) -> list[str]:
    names = load_spec(spec_path).parameters
    assert set(names) <= set(CORPUS_PARAMS), f"bind {set(names) - set(CORPUS_PARAMS)} small"
    return [a for p in names for a in ("--param", f"{p}={CORPUS_PARAMS[p]}")]


def test_the_lists_cover_the_corpus() -> None:
    require_corpus("teaal-specs", "loops")
    assert sorted(_loops("*spmm*.yaml")) == sorted(n for n in SPMM_SPECS if "spmm" in n)
    assert sorted(_loops("*spgemm*.yaml")) == sorted(
        [n for n in SPMM_SPECS if "spgemm" in n] + SPGEMM_3D
    )


@pytest.mark.parametrize(
    "matrix", ["synthetic", "west0067"],
)
@pytest.mark.parametrize("folder,name", CORPUS_CASES)
def test_corpus_dense_specs_agree_with_the_simulation(
    capsys: pytest.CaptureFixture[str], folder: str, name: str, matrix: str
) -> None:
    path = require_corpus("teaal-specs", folder, name)
    rank = "K" if "sddmm" in name else "N"
    source = (
        ["--synthetic", SYNTH] if matrix == "synthetic"
        else ["-m", str(require_corpus("matrices", "west0067.mtx.gz"))]
    )
    rc, out, err = check(
        capsys, str(path), *source, *_param_args(path), "--rank", f"{rank}=3",
        "--reference", "builtin",
    )
    assert rc == 0, out + err
    kind = "sddmm" if "sddmm" in name else "spmm"
    assert f", {kind}" in out.splitlines()[0]
    assert "values (CPU simulation vs reference): agree" in out
    nnz = int(out.split(" nonzeros)")[0].rsplit(", ", 1)[1])
    if name == "sddmm.yaml":  # TeAAL's two einsums: the sampling one has no k
        assert f"agree for all {nnz} nonzeros, compared per atom" in out
    else:
        assert f"agree for all {nnz} nonzeros x 3 dense indices" in out
    assert out.rstrip().endswith("result: AGREE")


def test_teaal_spmm_is_transposed(capsys: pytest.CaptureFixture[str]) -> None:
    path = require_corpus("teaal-specs", "teaal-compiler", "spmm.yaml")
    rc, out, _ = check(capsys, str(path), "--synthetic", "uniform:rows=20,cols=12,nnz=60")
    assert rc == 0 and "(thread_mapped, spmm, transposed)" in out
    assert "operands B 20 x 8" in out  # B: [K, N], K = the matrix's 20 rows, N = 8 by default
    assert "layout csc" in out


@pytest.mark.parametrize("name", SPGEMM_3D)
def test_three_dimensional_spgemm_specs_are_refused(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = require_corpus("teaal-specs", "loops", name)
    rc, out, err = check(capsys, str(path), "--synthetic", SYNTH)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "T[k, m, n] = A[m, k] * B[k, n]" in err and "SpMM Z[m, n]" in err


@pytest.mark.parametrize("name", sorted(SPECS))
def test_in_repo_dense_specs_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """N0 in space, N split in time, N in space between group and lanes, work-oriented,
    B declared [N, K], transposed, both SDDMMs: no corpus needed."""
    spec = write_spec(tmp_path, name)
    params = [a for p, v in PARAMS[name].items() for a in ("--param", f"{p}={v}")]
    rank = "K" if name.startswith("sddmm") else "N"
    rc, out, err = check(capsys, str(spec), "--synthetic", SYNTH, "--rank", f"{rank}=6",
                         *params)
    assert rc == 0, out + err
    assert "result: AGREE" in out


def test_transposed_spmv_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spmv_t.yaml"
    spec.write_text(SPMV_TRANSPOSED)
    rc, out, err = check(capsys, str(spec), "--synthetic", SYNTH, "--param", "COLS=4")
    assert rc == 0, out + err
    assert "(thread_mapped, spmv, transposed)" in out and "dense:" not in out
    assert "nonzeros (layout csc)" in out and "owners (CPU simulation vs reference): agree" in out


def test_a_dense_owner_given_to_another_thread_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = lowering.simulate

    def shifted(bound, A, *operands):  # (atom 0, n = 5) owned by the next thread
        sim = real(bound, A, *operands)
        owner = sim.owner.copy()
        owner[0, 5] += 1
        return type(sim)(y=sim.y, owner=owner, stats=sim.stats, bound=sim.bound)

    monkeypatch.setattr(lowering, "simulate", shifted)
    spec = write_spec(tmp_path, "spmm_n0_space")
    rc, out, _ = check(capsys, str(spec), "--synthetic", SYNTH, "--rank", "N=6",
                       "--param", "NUM_THREADS=3")
    assert rc == 1 and "DISAGREE for 1 of" in out and "index 5 atom 0" in out


def test_a_wrong_sddmm_value_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = lowering.simulate

    def wrong(bound, A, *operands):
        sim = real(bound, A, *operands)
        y = sim.y.copy()
        y[3] *= 1.5
        return type(sim)(y=y, owner=sim.owner, stats=sim.stats, bound=sim.bound)

    monkeypatch.setattr(lowering, "simulate", wrong)
    spec = write_spec(tmp_path, "sddmm_one")
    rc, out, _ = check(capsys, str(spec), "--synthetic", SYNTH, "--param", "NUM_THREADS=3")
    assert rc == 1 and "DISAGREE at 1 of" in out


@pytest.mark.parametrize("name", ["spmm_transposed", "sddmm_two", "spmm_b_nk"])
def test_above_max_nnz_the_oracle_checks_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    spec = write_spec(tmp_path, name)
    params = [a for p, v in PARAMS[name].items() for a in ("--param", f"{p}={v}")]
    rc, out, _ = check(capsys, str(spec), "--synthetic", SYNTH, "--max-nnz", "100", *params)
    assert rc == 0, out
    assert "reference: skipped" in out and "reference multiplies" in out
    assert "values (CPU simulation vs NumPy oracle): agree" in out
    assert "owners: not checked" in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["--rank", "N=0"], "--rank N: size 0 is not in 1..65536"),
        (["--rank", "N=65537"], "not in 1..65536"),
        (["--rank", "N=-3"], "is not a size"),
        (["--rank", "N=1e3"], "is not a size"),
        (["--rank", "N"], "expected NAME=SIZE"),
        (["--rank", "Q=3"], "--rank Q: not a rank of this spec (its dense rank: N)"),
        (["--rank", "M=3"], "--rank M: the size of M comes from the matrix"),
        (["--rank", "N=3", "--rank", "N=4"], "given twice"),
    ],
)
def test_bad_ranks_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    spec = write_spec(tmp_path, "spmm_n0_space")
    for command in ("check", "explain"):
        rc = main([command, str(spec), "--synthetic", SYNTH, *args])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and message in err, err


def test_spmv_has_no_dense_rank(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = check(capsys, str(REPO / "specs" / "thread_mapped.yaml"), "--synthetic", SYNTH,
                       "--rank", "N=4")
    assert rc == 2 and "has no dense rank" in err and err.count("\n") == 1


def test_dense_arrays_past_the_memory_limit_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, "spmm_n0_space")
    rc, _, err = check(capsys, str(spec), "--synthetic", "uniform:rows=4000,nnz=4000,seed=1",
                       "--rank", "N=65536")
    assert rc == 2 and "more than 134217728" in err and err.count("\n") == 1


def test_explain_prints_the_form_and_the_dense_placement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, "spmm_n0_space")
    assert main(["explain", str(spec), "--synthetic", SYNTH, "--rank", "N=10",
                 "--param", "NUM_THREADS=3"]) == 0
    text = capsys.readouterr().out
    assert "form:      spmm; sparse operand A, not transposed; dense operand B" in text
    assert "N0  space -> dense slot within the thread" in text
    assert "N1  time  -> sequential loop" in text
    assert "N0 in space (DS = 4 threads for each worker), N1 in time" in text
    assert "dense:     N = 10: DS = 4 thread(s) for each worker (thread), DT = 3 steps" in text
    assert "12 threads in all" in text  # 3 workers x 4 slots
    assert "balance:   (atom, N index) pairs per thread max" in text


def test_explain_json_and_the_default_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, "spmm_n_space_group")
    assert main(["explain", str(spec), "--synthetic", SYNTH, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["form"]["kind"] == "spmm" and out["form"]["dense_rank"]["space"] == "N"
    assert out["matrix"]["dense"] == {"rank": "N", "size": 8, "space": 8, "time": 1}
    lb = out["load_balance"]
    assert lb["dense_indices_per_atom"] == 8
    expected = 8 * out["matrix"]["nnz"]
    assert lb["mean_atoms_per_thread"] * lb["threads"] == pytest.approx(expected, rel=1e-4)


def test_explain_names_a_transposed_and_a_sampled_operand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(write_spec(tmp_path, "spmm_transposed"))]) == 0
    text = capsys.readouterr().out
    assert "transposed: declared [K, M], the layout holds A^T ([M, K])" in text
    assert main(["explain", str(write_spec(tmp_path, "sddmm_two")), "--rank", "K=4",
                 "--synthetic", SYNTH]) == 0
    text = capsys.readouterr().out
    assert "einsum:    T1[m, n] = A[m, k] * B[k, n]; Z[m, n] = C[m, n] * T1[m, n]" in text
    assert "sparse operand C (the sampler" in text and "dense operands A, B" in text
    assert "K (summed per atom), in time" in text and "K = 4: DS = 1" in text


def test_spmv_explain_is_unchanged_but_for_the_form_line(
    capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(REPO / "specs" / "thread_mapped.yaml"), "--synthetic", SYNTH]) == 0
    text = capsys.readouterr().out
    assert "form:      spmv; sparse operand A, not transposed; dense operand B" in text
    assert "dense:" not in text and "balance:   atoms per thread max" in text
    assert np.isfinite(float(text.split("mean ")[1].split()[0]))
