"""``teaal-loops check``: reference vs simulation (and GPU where present), exit status, messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import teaal_loops.reference.execute as execute
from teaal_loops.cli import main
from tests.conftest import REPO

SYNTH = "emptyrows:rows=300,cols=120,nnz=2500,seed=4"


def check(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["check", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize(
    "name", ["thread_mapped", "group_mapped", "group_mapped_block", "work_oriented", "merge_path"]
)
def test_check_agrees_with_the_simulation(capsys, name) -> None:
    rc, out, err = check(
        capsys, str(REPO / "specs" / f"{name}.yaml"), "--synthetic", SYNTH, "--reference", "auto"
    )
    assert rc == 0, out + err
    assert "result: AGREE" in out
    assert "owners (CPU simulation vs reference): agree for all" in out
    engine = "fibertree" if execute.fibertree_available() else "builtin"
    assert f"reference: {engine} (" in out


def test_check_with_parameters_and_builtin_engine(capsys) -> None:
    rc, out, _ = check(
        capsys,
        str(REPO / "specs" / "thread_mapped.yaml"),
        "--synthetic",
        SYNTH,
        "--reference",
        "builtin",
        "--param",
        "NUM_TILES=64",
        "--param",
        "NUM_THREADS=16",
    )
    assert rc == 0 and "NUM_TILES=64, NUM_THREADS=16" in out and "reference: builtin (" in out


def test_large_matrices_use_the_numpy_oracle(capsys) -> None:
    rc, out, _ = check(
        capsys, str(REPO / "specs" / "merge_path.yaml"), "--synthetic", SYNTH, "--max-nnz", "100"
    )
    assert rc == 0
    assert "reference: skipped" in out and "NumPy oracle" in out and "owners: not checked" in out


def test_disagreeing_owners_exit_non_zero(capsys, monkeypatch) -> None:
    import teaal_loops.lowering as lowering

    real = lowering.simulate

    def off_by_one(bound, A, x):  # a simulation that gives atom 0 to another thread
        sim = real(bound, A, x)
        owner = sim.owner.copy()
        owner[0] += 1
        return type(sim)(y=sim.y, owner=owner, stats=sim.stats, bound=sim.bound)

    monkeypatch.setattr(lowering, "simulate", off_by_one)
    rc, out, _ = check(capsys, str(REPO / "specs" / "work_oriented.yaml"), "--synthetic", SYNTH)
    assert rc == 1
    assert "DISAGREE for 1 of" in out and "result: DISAGREE" in out


def test_disagreeing_values_exit_non_zero(capsys, monkeypatch) -> None:
    import teaal_loops.lowering as lowering

    real = lowering.simulate

    def wrong(bound, A, x):
        sim = real(bound, A, x)
        y = sim.y.copy()
        y[np.flatnonzero(y)[0]] *= 2
        return type(sim)(y=y, owner=sim.owner, stats=sim.stats, bound=sim.bound)

    monkeypatch.setattr(lowering, "simulate", wrong)
    rc, out, _ = check(capsys, str(REPO / "specs" / "thread_mapped.yaml"), "--synthetic", SYNTH)
    assert rc == 1 and "DISAGREE at 1 of 300 entries" in out


def test_fibertree_requested_but_absent(capsys, monkeypatch) -> None:
    monkeypatch.setattr(execute, "_FIBERTREE", None)
    monkeypatch.setattr(execute, "_FIBERTREE_ERROR", "ModuleNotFoundError: No module named 'x'")
    rc, _, err = check(
        capsys,
        str(REPO / "specs" / "thread_mapped.yaml"),
        "--synthetic",
        SYNTH,
        "--reference",
        "fibertree",
    )
    assert rc == 2
    assert "fibertree is not importable" in err and "--reference builtin" in err
    assert "Traceback" not in err


@pytest.mark.gpu
def test_check_against_the_gpu(capsys) -> None:
    from teaal_loops.runtime import gpu_available

    if not gpu_available():
        pytest.skip("no CUDA device / CuPy here")
    rc, out, _ = check(
        capsys, str(REPO / "specs" / "merge_path.yaml"), "--synthetic", SYNTH, "--against", "gpu"
    )
    assert rc == 0 and "GPU float32" in out and "result: AGREE" in out


CSC_SPEC = """
einsum:
  declaration: {A: [I, J], B: [J], Z: [I]}
  expressions: ["Z[i] = A[i, j] * B[j]"]
mapping:
  rank-order:
    A: [J, I]
  partitioning:
    Z:
      J: [uniform_shape(COLS_PER_THREAD)]
  loop-order:
    Z: [J1, J0, I]
  spacetime:
    Z:
      space: [J1]
      time: [J0, I]
"""


@pytest.mark.parametrize("layout_args", [[], ["--param", "COLS_PER_THREAD=3"]])
def test_check_compares_owners_of_a_csc_spec_in_its_own_atom_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], layout_args: list[str]
) -> None:
    spec = tmp_path / "csc.yaml"
    spec.write_text(CSC_SPEC)
    code = main(["check", str(spec), "--synthetic", "emptyrows:rows=60,nnz=400,seed=2",
                 *layout_args])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "layout csc" in out and "owners (CPU simulation vs reference): agree for all" in out


@pytest.mark.parametrize(
    "spec,why",
    [
        ("specs/layouts/ell/work_oriented.yaml", "chunks count its"),
        ("specs/layouts/bcsr_2x2/thread_mapped.yaml", "40 tiles are not the matrix's 80"),
        ("specs/layouts/bcsr_2x2/work_oriented.yaml", "tiles are not the matrix's"),
    ],
)
def test_check_says_owners_are_not_comparable_where_layout_atoms_are_not_nonzeros(
    capsys: pytest.CaptureFixture[str], spec: str, why: str
) -> None:
    code = main(["check", str(REPO / spec), "--synthetic", "banded:rows=80,nnz=640,seed=1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "values (CPU simulation vs reference): agree" in out
    assert "owners (CPU simulation vs reference): not compared" in out and why in out
