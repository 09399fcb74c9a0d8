"""as_csr, validate_csr, matrix_shape, index_bits_for and row_stats."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.errors import MatrixError
from teaal_loops.matrix import as_csr, index_bits_for, matrix_shape, validate_csr
from teaal_loops.matrix.stats import row_stats
from teaal_loops.types import MatrixShape

DENSE = np.array([[0, 2.0, 0, 1], [0, 0, 0, 0], [3, 0, 0, 4], [0, 0, 5, 0]])


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "lil", "dok", "bsr", "dia"])
def test_every_scipy_format_becomes_the_same_canonical_csr(fmt: str) -> None:
    A = as_csr(sp.csr_matrix(DENSE).asformat(fmt))
    assert type(A) is sp.csr_matrix and A.dtype == np.float64
    assert A.has_sorted_indices
    np.testing.assert_array_equal(A.toarray(), DENSE)


def test_sparse_arrays_and_dense_input() -> None:
    np.testing.assert_array_equal(as_csr(sp.csr_array(DENSE)).toarray(), DENSE)
    np.testing.assert_array_equal(as_csr(DENSE).toarray(), DENSE)
    assert as_csr(DENSE.astype(np.int64)).dtype == np.float64
    assert as_csr(DENSE, dtype="f32").dtype == np.float32
    assert as_csr(sp.csr_matrix(DENSE, dtype=np.float32)).dtype == np.float32


def test_duplicates_are_summed_unsorted_sorted_and_the_input_left_alone() -> None:
    indptr = np.array([0, 3, 3])
    indices = np.array([2, 0, 2])
    data = np.array([1.0, 2.0, 3.0])
    original = sp.csr_matrix((data, indices, indptr), shape=(2, 3))
    A = as_csr(original)
    np.testing.assert_array_equal(A.indices, [0, 2])
    np.testing.assert_array_equal(A.data, [2.0, 4.0])
    np.testing.assert_array_equal(original.indices, [2, 0, 2])  # untouched
    coo = sp.coo_matrix(([1.0, 1.0], ([0, 0], [1, 1])), shape=(1, 2))
    assert as_csr(coo).nnz == 1 and as_csr(coo)[0, 1] == 2.0


def test_canonical_input_is_returned_without_a_copy() -> None:
    A = sp.csr_matrix(DENSE)
    assert as_csr(A) is A
    assert as_csr(A, dtype=np.float32) is not A


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (np.zeros((2, 2, 2)), "2-D"),
        (np.array([[1 + 2j]]), "complex"),
        (sp.csr_matrix(np.array([[1 + 1j]])), "complex"),
        (np.array([["a"]]), "not numbers"),
        (None, "None"),
        ([[1.0, 2.0], [3.0]], "expected a matrix: setting an array element with a sequence"),
    ],
)
def test_bad_inputs(value: object, words: str) -> None:
    with pytest.raises(MatrixError, match=words):
        as_csr(value)


def test_bad_dtype_option() -> None:
    with pytest.raises(MatrixError, match="float32 or float64"):
        as_csr(DENSE, dtype="int32")


def test_malformed_csr_matrix_is_caught_before_scipy_reads_it() -> None:
    bad = sp.csr_matrix((3, 3))
    bad.indices = np.array([0, 7], dtype=np.int32)
    bad.data = np.array([1.0, 1.0])
    bad.indptr = np.array([0, 1, 2, 2], dtype=np.int32)
    with pytest.raises(MatrixError, match="row 1 has column index 7"):
        as_csr(bad)


@pytest.mark.parametrize(
    ("indptr", "indices", "shape", "words"),
    [
        ([1, 2], [0], (1, 3), "start at 1"),
        ([0, 2, 1, 3], [0, 1, 2], (3, 3), "decrease at row 1"),
        ([0, 1, 2], [0, 1, 2], (2, 3), "last row offset is 2 but there are 3"),
        ([0, 1, 3], [0, 1, 3], (2, 3), "row 1 has column index 3, outside 0..2"),
        ([0, 1, 2], [0, -1], (2, 3), "row 1 has column index -1"),
        ([0, 1], [0], (2, 3), "2 row offsets for 2 rows"),
        ([0], [], (0, -1), "negative shape"),
        ([0.0, 1.0], [0], (1, 1), "expected integers"),
    ],
)
def test_validate_csr_names_the_problem_and_row(
    indptr: list[float], indices: list[int], shape: tuple[int, int], words: str
) -> None:
    with pytest.raises(MatrixError) as err:
        validate_csr(np.array(indptr), np.array(indices, dtype=np.int64), shape, where="A")
    assert err.value.message.startswith("A: ")
    assert words in err.value.message


def test_validate_csr_accepts_empty_and_zero_sized() -> None:
    validate_csr(np.array([0, 0, 0]), np.array([], dtype=np.int32), (2, 0))
    validate_csr(np.array([0]), np.array([], dtype=np.int32), (0, 5))


def test_matrix_shape() -> None:
    assert matrix_shape(DENSE) == MatrixShape(rows=4, cols=4, nnz=5, max_row=2)
    assert matrix_shape(sp.csr_matrix((0, 3))) == MatrixShape(0, 3, 0, 0)


def test_index_bits_thresholds() -> None:
    limit = 2**31 - 1
    assert index_bits_for(0, 0) == 32
    assert index_bits_for(0, limit) == 32
    assert index_bits_for(1, limit) == 64  # rows + nnz overflows int32
    assert index_bits_for(0, limit + 1) == 64
    assert index_bits_for(limit - 10, 10) == 32
    assert index_bits_for(limit - 10, 11) == 64
    assert index_bits_for(10**6, 10**9) == 32
    with pytest.raises(MatrixError):
        index_bits_for(-1, 0)


def test_row_stats_against_hand_computation() -> None:
    lengths = [2, 0, 2, 1]
    stats = row_stats(DENSE)
    assert (stats.rows, stats.cols, stats.nnz) == (4, 4, 5)
    assert (stats.max, stats.min, stats.empty_rows) == (2, 0, 1)
    assert stats.mean == pytest.approx(statistics.fmean(lengths))
    assert stats.std == pytest.approx(statistics.pstdev(lengths))
    assert stats.cv == pytest.approx(statistics.pstdev(lengths) / statistics.fmean(lengths))
    assert stats.p50 == pytest.approx(statistics.median(lengths))
    assert stats.empty_fraction == 0.25
    empty = row_stats(sp.csr_matrix((3, 3)))
    assert empty.cv == 0.0 and empty.empty_rows == 3
    assert row_stats(sp.csr_matrix((0, 3))).rows == 0


class _FakeDeviceMatrix:
    """Stands in for a cupyx.scipy.sparse matrix: lives in a cupyx module, has ``.get()``."""

    __module__ = "cupyx.scipy.sparse._csr"

    def __init__(self, host: sp.csr_matrix) -> None:
        self.host = host

    def get(self) -> sp.csr_matrix:
        return self.host


def test_device_objects_are_moved_to_the_host_through_get() -> None:
    A = as_csr(_FakeDeviceMatrix(sp.csr_matrix(DENSE)))
    np.testing.assert_array_equal(A.toarray(), DENSE)


@pytest.mark.gpu
def test_real_cupyx_matrix_and_cupy_array() -> None:
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device")
    import cupyx.scipy.sparse as csp

    np.testing.assert_array_equal(as_csr(csp.csr_matrix(cupy.asarray(DENSE))).toarray(), DENSE)
    np.testing.assert_array_equal(as_csr(cupy.asarray(DENSE)).toarray(), DENSE)
