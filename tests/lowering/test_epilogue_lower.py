"""Lowering TeAAL's scalar epilogue ``Z = a * T1 + b * C``: the product is lowered from T1's
mapping as without the epilogue, the epilogue is carried in ``Form``; what the generator cannot
honour is refused in one located line naming it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import teaal_loops
from teaal_loops.cli import main
from teaal_loops.errors import UnsupportedMappingError
from teaal_loops.ir import recognise_einsum
from teaal_loops.ir.model import Combine, ScalarEpilogue
from teaal_loops.lowering import lower
from teaal_loops.spec import load_spec, load_spec_string
from tests.conftest import require_corpus
from tests.lowering.epilogue_specs import KINDS, PARAMS, PLAIN, SPECS


def test_teaal_gemv_lowers_as_a_transposed_spmv_with_its_epilogue() -> None:
    spec = load_spec(require_corpus("teaal-specs", "teaal-compiler", "gemv.yaml"))
    s = lower(spec)
    assert (s.kind, s.layout, s.combine) == ("thread_mapped", "csc", Combine.ATOMIC)
    assert (s.matrix, s.vector, s.output) == ("B", "A", "Z")
    assert s.form.kind == "spmv" and s.form.transposed and s.form.operands == ("A",)
    assert s.form.epilogue == ScalarEpilogue(
        output="Z", alpha="a", beta="b", addend="C", addend_ranks=("M",),
        addend_storage=("M",), text="Z[m] = a * T1[m] + b * C[m]",
    )
    assert s.einsum == "T1[m] = A[k] * B[k, m]"  # the product's einsum
    assert s.form.text == "T1[m] = A[k] * B[k, m]; Z[m] = a * T1[m] + b * C[m]"
    assert s.form.epilogue.scalars == ("a", "b")
    # the product's own view: T1's einsum, whose multiplies the reference stamps
    shape = recognise_einsum(spec)
    assert shape.output == "T1" and shape.epilogue is not None and shape.epilogue.output == "Z"


def test_teaal_gemm_lowers_as_a_transposed_spmm_with_its_epilogue() -> None:
    s = lower(load_spec(require_corpus("teaal-specs", "teaal-compiler", "gemm.yaml")))
    assert (s.kind, s.layout, s.output) == ("thread_mapped", "csc", "Z")
    assert s.form.kind == "spmm" and s.form.transposed and s.form.operands == ("B",)
    assert s.form.dense is not None and s.form.dense.name == "N"
    e = s.form.epilogue
    assert e is not None and (e.alpha, e.beta, e.addend) == ("a", "b", "C")
    assert e.addend_ranks == ("M", "N") and s.form.output_ranks == ("M", "N")


@pytest.mark.parametrize("name", sorted(SPECS))
def test_in_repo_epilogue_specs_lower_to_their_schedule(name: str) -> None:
    s = lower(load_spec_string(SPECS[name], source=f"{name}.yaml"), params=PARAMS[name])
    assert s.kind == KINDS[name] and s.layout == "csr" and s.output == "Z"
    e = s.form.epilogue
    assert e is not None and e.output == "Z"
    # the product is lowered from T1's mapping exactly as the same mapping without epilogue
    alone = lower(load_spec_string(PLAIN[name], source="plain.yaml"), params=PARAMS[name])
    assert alone.form.epilogue is None
    assert (s.ranks, s.combine, s.tiling, s.group_size, s.work_per_thread) == (
        alone.ranks, alone.combine, alone.tiling, alone.group_size, alone.work_per_thread)
    assert dataclasses.replace(s.form, epilogue=None, text="") == dataclasses.replace(
        alone.form, text="")


def test_absent_factors_and_addend() -> None:
    forms: dict[str, Any] = {
        n: lower(load_spec_string(SPECS[n]), params=PARAMS[n]).form.epilogue
        for n in ("spmv_group", "spmv_work", "spmv_scale", "spmm_group")
    }
    assert (forms["spmv_group"].alpha, forms["spmv_group"].beta) == (None, "b")
    assert (forms["spmv_work"].alpha, forms["spmv_work"].beta) == ("a", None)
    assert forms["spmv_scale"].addend is None and forms["spmv_scale"].scalars == ("a",)
    assert forms["spmm_group"].addend_storage == ("N", "M")


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    rc = main(["explain", str(path)])
    out = capsys.readouterr()
    assert rc == 2 and out.out == ""
    assert out.err.count("\n") == 1 and "Traceback" not in out.err
    assert out.err.startswith(f"{path}:") and ": error: " in out.err
    return out.err


def test_an_epilogue_after_sddmm_is_refused(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    text = """
einsum:
  declaration: {S: [M, N], A: [M, K], B: [K, N], T1: [M, N], C: [M, N], Z: [M, N]}
  expressions:
    - T1[m, n] = S[m, n] * A[m, k] * B[k, n]
    - Z[m, n] = a * T1[m, n] + b * C[m, n]
"""
    err = _refused(tmp_path, capsys, text)
    assert "follows an SDDMM" in err and "after SpMV and SpMM only" in err


def test_a_partitioned_epilogue_output_is_refused(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    text = SPECS["spmv_thread"].replace(
        "  partitioning:\n", "  partitioning:\n    Z:\n      M: [uniform_shape(4)]\n"
    )
    err = _refused(tmp_path, capsys, text)
    assert "Z is partitioned" in err and "partition the product" in err


def test_a_scalar_named_like_a_call_keyword_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused(tmp_path, capsys, SPECS["spmv_thread"].replace("a * T1", "out * T1"))
    assert "scalar out" in err and "rename it" in err


def test_an_addend_shaped_unlike_the_output_is_refused_by_the_parser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An addend indexed like Z must be declared with Z's ranks (indices follow the
    declaration order), so it cannot be another operand of the product either."""
    err = _refused(tmp_path, capsys, SPECS["spmv_thread"].replace("    C: [M]", "    C: [K]"))
    assert "C's rank there is K" in err


def test_schedule_auto_with_an_epilogue_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """auto picks a library SpMV kernel per matrix: it would drop the epilogue."""
    text = SPECS["spmv_thread"] + "x-teaal-loops:\n  schedule: auto\n"
    err = _refused(tmp_path, capsys, text)
    assert "schedule: auto" in err and "epilogue" in err
    with pytest.raises(UnsupportedMappingError, match="plain SpMV kernels"):
        teaal_loops.compile(load_spec_string(text))
