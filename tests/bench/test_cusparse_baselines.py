"""The cuSPARSE baselines' machinery without a GPU: algorithm lists, availability reasons,
descriptors made once and re-pointed only when an operand changes, choosing, naming."""

from __future__ import annotations

import gc
import sys
import types
from typing import Any

import numpy as np
import pytest

from teaal_loops.bench.cusparse import base, descriptors, sddmm, spmm, spmv
from teaal_loops.bench.cusparse.descriptors import (
    Availability,
    CusparseBaselineError,
    Descriptors,
    index_type,
    value_type,
)
from teaal_loops.errors import TeaalLoopsError
from tests.bench.fake_cusparse import FakeArray, FakeBinding, FakeCSR, FakeCupy, FakeTimer


def test_enum_values_are_cusparses() -> None:
    # cusparse.h (CUDA 12/13): a wrong value would silently run another algorithm
    assert descriptors.SPMV_ALGS == {"DEFAULT": 0, "CSR_ALG1": 2, "CSR_ALG2": 3}
    assert descriptors.SPMM_ALGS == {"DEFAULT": 0, "CSR_ALG1": 4, "CSR_ALG2": 6, "CSR_ALG3": 12}
    assert (descriptors.ORDER_COL, descriptors.ORDER_ROW) == (1, 2)
    assert (descriptors.INDEX_32I, descriptors.INDEX_64I) == (2, 3)
    assert (descriptors.CUDA_R_32F, descriptors.CUDA_R_64F) == (0, 1)


def test_value_and_index_types_and_one_line_refusals() -> None:
    assert (value_type("float32"), value_type(np.float64)) == (0, 1)
    assert (index_type(np.int32), index_type("int64")) == (2, 3)
    with pytest.raises(TeaalLoopsError, match="float32 or float64, not float16"):
        value_type(np.float16)
    with pytest.raises(CusparseBaselineError, match="int32 or int64, not uint32"):
        index_type(np.uint32)


def test_algorithm_lists_with_and_without_nvmath() -> None:
    plain = spmv.all_algorithms(nvmath=False)
    assert [(a.label, a.binding, a.code) for a in plain] == [
        ("DEFAULT", "cupy", 0), ("CSR_ALG1", "cupy", 2), ("CSR_ALG2", "cupy", 3)]
    full = spmv.all_algorithms(nvmath=True)
    assert [a.label for a in full[3:]] == ["DEFAULT+preprocess", "CSR_ALG1+preprocess",
                                           "CSR_ALG2+preprocess"]
    assert all(a.binding == "nvmath" and a.preprocess for a in full[3:])
    mm = spmm.all_algorithms(nvmath=True)
    assert [a.label for a in mm] == ["DEFAULT", "CSR_ALG1", "CSR_ALG2", "CSR_ALG3",
                                     "CSR_ALG1+preprocess", "CSR_ALG3+preprocess"]
    assert [a.code for a in mm] == [0, 4, 6, 12, 4, 12]
    dd = sddmm.all_algorithms()
    assert [(a.label, a.layout, a.preprocess) for a in dd] == [
        ("ROW", "row", False), ("COL_T", "col", False), ("BT_ROW", "bt_row", False),
        ("BT_COL", "bt_col", False), ("ROW+preprocess", "row", True),
        ("COL_T+preprocess", "col", True), ("BT_ROW+preprocess", "bt_row", True),
        ("BT_COL+preprocess", "bt_col", True)]
    assert {a.binding for a in dd} == {"nvmath"}
    assert len(sddmm.all_algorithms(preprocess=False)) == 4
    # each layout's operations describe op(A) as rows x K and op(B) as K x cols
    assert sddmm.OPS == {"row": (0, 0), "col": (1, 1), "bt_row": (0, 1), "bt_col": (1, 0)}


def test_availability_reasons_are_one_line_when_packages_are_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("cupy", "cupy_backends", "nvmath", "torch"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    for check, text in ((descriptors.cupy_binding_available, "CuPy is not importable"),
                        (descriptors.nvmath_available, "nvmath-python is not importable"),
                        (sddmm.torch_available, "PyTorch is not importable")):
        got = check()
        assert not got and isinstance(got, Availability)
        assert got.reason.startswith(text) and "\n" not in got.reason
    assert spmv.available().reason.startswith("CuPy is not importable")
    found = sddmm.backends()
    assert found["used"] is None and "has no SDDMM" in found["cupy"]
    reason = sddmm.available().reason
    assert reason.startswith("no SDDMM backend: nvmath: nvmath-python is not importable")
    with pytest.raises(CusparseBaselineError, match="no SDDMM backend"):
        sddmm.make_sddmm(FakeCSR(4, 4, 4), 8)
    with pytest.raises(CusparseBaselineError, match="CuPy is not importable"):
        descriptors.binding("cupy")
    with pytest.raises(CusparseBaselineError, match="unknown cuSPARSE binding 'mkl'"):
        descriptors.binding("mkl")


def test_nvmath_that_imports_but_cannot_load_cusparse_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any) -> int:
        raise OSError("libcusparse.so.12: cannot open shared object file\nmore")

    bindings = types.ModuleType("nvmath.bindings")
    bindings.cusparse = types.SimpleNamespace(  # type: ignore[attr-defined]
        create=broken, get_version=broken)
    monkeypatch.setitem(sys.modules, "nvmath", types.ModuleType("nvmath"))
    monkeypatch.setitem(sys.modules, "nvmath.bindings", bindings)
    fake_cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: 0)))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    got = descriptors.nvmath_available()
    assert not got
    assert got.reason == ("nvmath-python cannot use cuSPARSE (OSError: libcusparse.so.12: "
                          "cannot open shared object file)")


def test_descriptors_are_destroyed_in_reverse_when_closed_or_collected() -> None:
    fake = FakeBinding()
    owner = Descriptors(fake)
    owner.own("sp", 1)
    owner.own("vec", 2)
    owner.close()
    assert fake.destroyed == [("vec", 2), ("sp", 1)]
    owner.close()  # idempotent
    assert len(fake.destroyed) == 2
    other = Descriptors(fake)
    other.own("mat", 3)
    del other
    gc.collect()
    assert fake.destroyed[-1] == ("mat", 3)


# --------------------------------------------------------------------------------------------
# a baseline on the fake binding


@pytest.fixture
def fake_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    cp = FakeCupy()
    bindings = {"cupy": FakeBinding(refuse=(3,)), "nvmath": FakeBinding(name="nvmath")}
    monkeypatch.setattr(spmv.backend, "cupy_module", lambda: cp)
    monkeypatch.setattr(base, "binding", lambda name: bindings[name])
    return {"cp": cp, "bindings": bindings}


def test_set_up_makes_descriptors_once_and_skips_what_cusparse_refuses(
    fake_env: dict[str, Any],
) -> None:
    A = FakeCSR(5, 7, 9)
    b = spmv.SpMV(A, algorithms=spmv.all_algorithms(nvmath=True))
    fake, nv = fake_env["bindings"]["cupy"], fake_env["bindings"]["nvmath"]
    assert [a.label for a in b.algorithms] == ["DEFAULT", "CSR_ALG1", "DEFAULT+preprocess",
                                               "CSR_ALG1+preprocess", "CSR_ALG2+preprocess"]
    assert b.skipped["CSR_ALG2"] == "RuntimeError: CUSPARSE_STATUS_NOT_SUPPORTED for algorithm 3"
    # one descriptor set for the plain CuPy algorithms, one per preprocessed algorithm
    assert [c[1] for c in fake.calls if c[0] == "create"] == ["csr", "vec", "vec"]
    assert [c[1] for c in nv.calls if c[0] == "create"] == ["csr", "vec", "vec"] * 3
    pre = [c for c in nv.calls if c[0] == "spmv_preprocess"]
    assert [c[1] for c in pre] == [0, 2, 3]
    assert len({c[2] for c in pre}) == 3  # a buffer of its own each
    assert b.describe() == "cuSPARSE SpMV DEFAULT (descriptors once)"
    assert b.describe(b.by_label("CSR_ALG2+preprocess")) == (
        "cuSPARSE SpMV CSR_ALG2+preprocess (nvmath-python, descriptors once)")


def test_launch_repoints_descriptors_only_when_an_operand_changes(
    fake_env: dict[str, Any],
) -> None:
    cp, fake = fake_env["cp"], fake_env["bindings"]["cupy"]
    A = FakeCSR(5, 7, 9)
    b = spmv.SpMV(A, algorithms=spmv.all_algorithms(nvmath=False)[:2])
    x, y = b.operands
    fake.calls.clear()
    b.launch(x, y)
    b.launch(x, y, algorithm=b.by_label("CSR_ALG1"))
    assert [c[0] for c in fake.calls] == ["spmv", "spmv"]
    assert [c[4] for c in fake.calls] == [0, 2]
    x2 = cp.zeros(7, dtype=np.float32)
    fake.calls.clear()
    b.launch(x2, y)
    b.launch(x2, y)
    assert [c[0] for c in fake.calls] == ["set_vec", "spmv", "spmv"]
    assert fake.calls[0][2] == x2.data.ptr
    with pytest.raises(CusparseBaselineError,
                       match=r"SpMV: x must be a C-ordered float32 CuPy array of shape \(7,\), "
                             r"got FakeArray float64 \(7,\)"):
        b.launch(cp.zeros(7, dtype=np.float64), y)
    with pytest.raises(CusparseBaselineError, match=r"y must be .* shape \(5,\)"):
        b.launch(x, cp.zeros(6, dtype=np.float32))


def test_nvmath_launches_point_the_handle_at_the_current_stream(
    fake_env: dict[str, Any],
) -> None:
    cp, nv = fake_env["cp"], fake_env["bindings"]["nvmath"]
    b = spmv.SpMV(FakeCSR(3, 3, 3), algorithms=spmv.all_algorithms(nvmath=True)[3:4])
    nv.calls.clear()
    cp.stream.ptr = 42
    b.launch(*b.operands)
    assert [c[0] for c in nv.calls] == ["set_stream", "spmv"] and nv.calls[0][1] == 42


def test_choose_keeps_the_fastest_and_later_launches_use_it(fake_env: dict[str, Any]) -> None:
    fake = fake_env["bindings"]["cupy"]
    fake.refuse = ()
    b = spmv.SpMV(FakeCSR(5, 7, 9), algorithms=spmv.all_algorithms(nvmath=False))
    state: dict[str, str] = {}
    last = {"code": -1}
    codes = {0: "DEFAULT", 2: "CSR_ALG1", 3: "CSR_ALG2"}
    original = fake.spmv

    def spmv_call(*args: Any) -> None:
        state["label"] = codes[args[7]]
        last["code"] = args[7]
        original(*args)

    fake.spmv = spmv_call
    choice = b.choose(FakeTimer({"DEFAULT": 2.0, "CSR_ALG1": 3.0, "CSR_ALG2": 1.0}, state),
                      reps=3, warmup=1)
    assert choice.winner == "CSR_ALG2" and b.algorithm is not None
    assert b.algorithm.label == "CSR_ALG2" and b.choice is choice
    b.launch(*b.operands)
    assert last["code"] == 3
    assert b.name == "cuSPARSE SpMV CSR_ALG2 (descriptors once)"
    with pytest.raises(CusparseBaselineError, match="no algorithm 'CSR_ALG9' here"):
        b.select("CSR_ALG9")


def test_spmm_describes_row_major_operands_and_checks_them(fake_env: dict[str, Any]) -> None:
    fake = fake_env["bindings"]["cupy"]
    b = spmm.SpMM(FakeCSR(5, 7, 9), 8, algorithms=spmm.all_algorithms(nvmath=False))
    assert [a.label for a in b.algorithms] == ["DEFAULT", "CSR_ALG1", "CSR_ALG2", "CSR_ALG3"]
    assert [c[1] for c in fake.calls if c[0] == "create"] == ["csr", "mat", "mat"]
    assert b.describe() == "cuSPARSE SpMM DEFAULT (descriptors once), row-major B and C, N=8"
    fortran = FakeArray(np.asfortranarray(np.zeros((7, 8), dtype=np.float32)))
    with pytest.raises(CusparseBaselineError, match=r"B must be a C-ordered float32"):
        b.launch(fortran, b.operands[1])
    with pytest.raises(CusparseBaselineError, match="dense width n=0 must be >= 1"):
        spmm.SpMM(FakeCSR(5, 7, 9), 0)


def test_matrices_the_baselines_cannot_take_are_refused_in_one_line(
    fake_env: dict[str, Any],
) -> None:
    with pytest.raises(CusparseBaselineError, match="expected a cupyx.scipy.sparse.csr_matrix"):
        spmv.SpMV(np.zeros((3, 3)))
    with pytest.raises(CusparseBaselineError, match="the matrix has no nonzeros"):
        spmv.SpMV(FakeCSR(3, 3, 0))
    with pytest.raises(CusparseBaselineError, match="float32 or float64, not int32"):
        spmv.SpMV(FakeCSR(3, 3, 3, dtype=np.int32))
    fake_env["bindings"]["cupy"].refuse = (0, 2, 3)
    with pytest.raises(CusparseBaselineError, match=r"SpMV: no algorithm runs \(DEFAULT: "):
        spmv.SpMV(FakeCSR(3, 3, 3), algorithms=spmv.all_algorithms(nvmath=False))
    with pytest.raises(CusparseBaselineError, match="labels repeat"):
        spmv.SpMV(FakeCSR(3, 3, 3), algorithms=spmv.all_algorithms(nvmath=False)[:1] * 2)


def test_capture_runs_a_cupy_algorithm_through_nvmath_which_cupy_lets_capture(
    fake_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
) -> None:
    cp, fake, nv = fake_env["cp"], fake_env["bindings"]["cupy"], fake_env["bindings"]["nvmath"]
    fake.refuse = ()
    b = spmv.SpMV(FakeCSR(5, 7, 9), algorithms=spmv.all_algorithms(nvmath=False))
    b.select("CSR_ALG2")
    monkeypatch.setattr(base, "nvmath_available", lambda: Availability(True))
    nv.calls.clear()
    graph = b.capture()
    assert graph == "graph" and b.captured is not None
    assert (b.captured.label, b.captured.binding, b.captured.code) == (
        "CSR_ALG2 (nvmath)", "nvmath", 3)
    assert [c[0] for c in nv.calls] == ["create", "create", "create", "set_stream", "spmv",
                                        "set_stream", "spmv"]
    assert cp.stream.captures == 1
    assert [a.label for a in b.algorithms] == ["DEFAULT", "CSR_ALG1", "CSR_ALG2"]  # not timed
    monkeypatch.setattr(base, "nvmath_available", lambda: Availability(False, "absent"))
    b.capture()
    assert b.captured.label == "CSR_ALG2" and b.captured.binding == "cupy"
