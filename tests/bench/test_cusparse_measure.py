"""The baselines' driver and its arithmetic without a GPU: compulsory bytes, argument checks,
the one-line refusal where CuPy is missing."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.bench.cusparse import checks, measure_baselines
from teaal_loops.bench.cusparse.descriptors import CusparseBaselineError
from teaal_loops.errors import DeviceError


def _matrix(dtype: str = "float32") -> sp.csr_matrix:
    return sp.random(50, 70, density=0.1, format="csr", dtype=dtype, random_state=1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_spmm_bytes_are_the_arrays_a_kernel_must_read_and_write(dtype: str) -> None:
    A = _matrix(dtype)
    n = 16
    B = np.zeros((A.shape[1], n), dtype=dtype)
    C = np.zeros((A.shape[0], n), dtype=dtype)
    arrays = A.data.nbytes + A.indices.nbytes + A.indptr.nbytes + B.nbytes + C.nbytes
    assert checks.spmm_bytes(A, n) == arrays
    assert checks.spmm_compulsory_bytes(*A.shape, A.nnz, 1, dtype) == (
        arrays - B.nbytes - C.nbytes + A.shape[1] * B.itemsize + A.shape[0] * C.itemsize)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sddmm_bytes_are_the_arrays_a_kernel_must_read_and_write(dtype: str) -> None:
    C = _matrix(dtype)
    k = 32
    A = np.zeros((C.shape[0], k), dtype=dtype)
    B = np.zeros((k, C.shape[1]), dtype=dtype)
    Z = np.zeros(C.nnz, dtype=dtype)
    arrays = (C.data.nbytes + C.indices.nbytes + C.indptr.nbytes + A.nbytes + B.nbytes
              + Z.nbytes)
    assert checks.sddmm_bytes(C, k) == arrays
    wide = sp.csr_matrix(C, dtype=dtype)
    wide.indptr = wide.indptr.astype(np.int64)
    assert checks.sddmm_bytes(wide, k) == arrays + 4 * (C.shape[0] + 1)


def test_spmv_bytes_are_the_roofline_modules() -> None:
    A = _matrix()
    x = np.zeros(A.shape[1], np.float32)
    y = np.zeros(A.shape[0], np.float32)
    assert checks.spmv_bytes(A) == (A.data.nbytes + A.indices.nbytes + A.indptr.nbytes
                                    + x.nbytes + y.nbytes)


def test_negative_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="negative size"):
        checks.spmm_compulsory_bytes(1, 1, -1, 4)
    with pytest.raises(ValueError, match="negative size"):
        checks.sddmm_compulsory_bytes(1, 1, 1, -4)


def test_widths_must_be_positive_integers() -> None:
    assert checks.widths([1, np.int64(8)], "widths") == (1, 8)
    for bad in (0, -3, 2.5, True, "8"):
        with pytest.raises(CusparseBaselineError, match=f"widths: {bad!r} is not a positive"):
            checks.widths([8, bad], "widths")  # type: ignore[list-item]


def test_measure_refuses_bad_arguments_before_touching_a_gpu() -> None:
    timer = object()
    with pytest.raises(CusparseBaselineError, match=r"unknown baseline kind\(s\) \['spgemm'\]"):
        measure_baselines(_matrix(), "float32", (8,), timer, kinds=("spmv", "spgemm"))
    with pytest.raises(CusparseBaselineError, match="sddmm_widths: 0 is not"):
        measure_baselines(_matrix(), "float32", (8,), timer, sddmm_widths=(0,))
    with pytest.raises(CusparseBaselineError, match="copies 0, reps 25, warmup 3"):
        measure_baselines(_matrix(), "float32", (8,), timer, copies=0)


def test_measure_without_cupy_is_one_device_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(DeviceError) as info:
        measure_baselines(_matrix(), "float32", (8,), object())
    assert "CuPy is not importable" in str(info.value) and "\n" not in str(info.value)
