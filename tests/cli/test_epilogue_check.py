"""``teaal-loops check`` on specs with TeAAL's scalar epilogue (``Z = a * T1 + b * C``): the
HiFiber reference (which runs both einsums, the scalars and C bound by their spec names)
agrees with the CPU simulation on Z and on the owner of every nonzero of the product, for
TeAAL's gemv.yaml and gemm.yaml and the in-repo epilogue specs; a simulation that drops or
miscomputes the epilogue is caught; the NumPy oracle path applies the epilogue too."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import teaal_loops.lowering as lowering
from teaal_loops.cli import main
from tests.conftest import require_corpus
from tests.lowering.epilogue_specs import PARAMS, SPECS, write_spec

SYNTH = "emptyrows:rows=40,cols=30,nnz=200,seed=3"


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["check", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("name", ["gemv", "gemm"])
@pytest.mark.parametrize("matrix", ["synthetic", "west0067"])
def test_teaal_gemv_and_gemm_agree_with_the_simulation(
    capsys: pytest.CaptureFixture[str], name: str, matrix: str
) -> None:
    path = require_corpus("teaal-specs", "teaal-compiler", f"{name}.yaml")
    source = (
        ["--synthetic", SYNTH] if matrix == "synthetic"
        else ["-m", str(require_corpus("matrices", "west0067.mtx.gz"))]
    )
    extra = ["--rank", "N=3"] if name == "gemm" else []
    rc, out, err = check(capsys, str(path), *source, *extra, "--reference", "builtin")
    assert rc == 0, out + err
    kind = "spmv" if name == "gemv" else "spmm"
    assert f"(thread_mapped, {kind}, transposed)" in out.splitlines()[0]
    line = next(x for x in out.splitlines() if x.startswith("epilogue: "))
    assert line.startswith(f"epilogue: Z[{'m' if name == 'gemv' else 'm, n'}] = a * T1")
    assert "a = " in line and "b = " in line and " C " in line
    assert "values (CPU simulation vs reference): agree" in out
    nnz = int(out.split(" nonzeros)")[0].rsplit(", ", 1)[1])
    owners = f"agree for all {nnz} nonzeros" + (" x 3 dense indices" if name == "gemm" else "")
    assert owners in out
    assert out.rstrip().endswith("result: AGREE")


@pytest.mark.parametrize("name", sorted(SPECS))
def test_in_repo_epilogue_specs_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    spec = write_spec(tmp_path, name)
    params = [a for p, v in PARAMS[name].items() for a in ("--param", f"{p}={v}")]
    rank = ["--rank", "N=5"] if name.startswith("spmm") else []
    rc, out, err = check(capsys, str(spec), "--synthetic", SYNTH, *rank, *params)
    assert rc == 0, out + err
    assert "values (CPU simulation vs reference): agree" in out
    assert "result: AGREE" in out


def _patched(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    real = lowering.simulate

    def wrong(bound: Any, A: Any, *operands: Any, **kw: Any) -> Any:
        return change(real, bound, A, operands, kw)

    monkeypatch.setattr(lowering, "simulate", wrong)


def test_a_simulation_without_the_epilogue_disagrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The product alone (alpha = beta = 1, no C) is not Z: the check says so."""

    def product_only(real: Any, bound: Any, A: Any, operands: Any, kw: Any) -> Any:
        form = dataclasses.replace(bound.schedule.form, epilogue=None)
        plain = dataclasses.replace(bound, schedule=dataclasses.replace(bound.schedule,
                                                                        form=form))
        return dataclasses.replace(real(plain, A, *operands[:-1]), bound=bound)

    _patched(monkeypatch, product_only)
    rc, out, _ = check(capsys, str(write_spec(tmp_path, "spmv_thread")), "--synthetic", SYNTH,
                       "--param", "NUM_THREADS=3")
    assert rc == 1 and "result: DISAGREE" in out
    assert "values (CPU simulation vs reference): DISAGREE at 40 of 40 entries" in out
    assert "owners (CPU simulation vs reference): agree" in out  # the product's are right


def test_one_wrong_element_of_z_disagrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def one_element_off(real: Any, bound: Any, A: Any, operands: Any, kw: Any) -> Any:
        result = real(bound, A, *operands, **kw)
        y = result.y.copy()
        y[7, 2] += 0.01  # one element of Z
        return dataclasses.replace(result, y=y)

    _patched(monkeypatch, one_element_off)
    rc, out, _ = check(capsys, str(write_spec(tmp_path, "spmm_thread")), "--synthetic", SYNTH,
                       "--rank", "N=4", "--param", "NUM_THREADS=3")
    assert rc == 1 and "result: DISAGREE" in out
    assert "values (CPU simulation vs reference): DISAGREE at 1 of 160 entries" in out


def test_the_oracle_path_applies_the_epilogue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, "spmm_work")
    rc, out, err = check(capsys, str(spec), "--synthetic", SYNTH, "--rank", "N=4",
                         "--param", "W=3", "--max-nnz", "10")
    assert rc == 0, out + err
    assert "values (CPU simulation vs NumPy oracle): agree" in out
    assert "result: AGREE" in out


def test_the_seeded_scalars_and_addend_depend_on_the_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, "spmv_merge")
    lines = []
    for seed in ("1", "2"):
        rc, out, _ = check(capsys, str(spec), "--synthetic", SYNTH, "--param", "I=4",
                           "--seed", seed)
        assert rc == 0
        lines.append(next(x for x in out.splitlines() if x.startswith("epilogue: ")))
    assert lines[0] != lines[1]
    values = [float(v) for v in lines[0].split("a = ")[1].split(",")[0:1]]
    assert 0.5 <= abs(values[0]) < 1.5 and np.float32(values[0]) == values[0]
