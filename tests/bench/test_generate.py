"""The large-matrix generators, run with NumPy at small sizes: canonical CSR of the right class."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.bench import generate


def check_canonical(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, cols: int) -> None:
    assert indptr[0] == 0 and np.all(np.diff(indptr) >= 0) and indptr[-1] == len(indices)
    assert len(data) == len(indices)
    assert indices.dtype == np.int32 and indptr.dtype == np.int32
    assert data.dtype == np.float32
    assert np.all((indices >= 0) & (indices < cols))
    assert np.all(data != 0) and np.all(np.abs(data) <= 1)
    A = sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, cols))
    assert A.has_sorted_indices
    B = A.copy()
    B.sum_duplicates()
    assert B.nnz == A.nnz  # no duplicate columns within a row


def test_banded_rows_hold_the_band_clipped_at_the_edges() -> None:
    rows, width = 1000, 32
    indptr, indices, data = generate.banded(np, rows=rows, width=width, seed=1)
    check_canonical(indptr, indices, data, rows)
    lengths = np.diff(indptr)
    assert np.all(lengths[width:-width] == width)
    # row r holds columns r - 16 .. r + 15: the first row keeps 16, the last 17 (16 + itself)
    assert lengths[0] == width - width // 2 and lengths[-1] == width // 2 + 1
    r = 500
    assert list(indices[indptr[r]:indptr[r + 1]]) == list(range(r - 16, r + 16))


def test_uniform_rows_average_nnz_over_rows() -> None:
    indptr, indices, data = generate.uniform(np, rows=4096, nnz=4096 * 16, seed=2)
    check_canonical(indptr, indices, data, 4096)
    lengths = np.diff(indptr)
    assert 15.0 < lengths.mean() < 17.0
    assert lengths.std() / lengths.mean() < 0.5  # Poisson, not skewed


def test_rmat_is_skewed_and_square() -> None:
    scale = 12
    indptr, indices, data = generate.rmat(np, scale=scale, nnz=16 << scale, seed=3)
    check_canonical(indptr, indices, data, 1 << scale)
    lengths = np.diff(indptr)
    assert len(lengths) == 1 << scale
    assert 0.5 * (16 << scale) < indptr[-1] <= 16 << scale  # duplicates merged, not many
    assert lengths.max() > 20 * lengths.mean()  # R-MAT's heavy rows
    assert np.count_nonzero(lengths == 0) > 0


def test_longrows_put_most_nonzeros_in_a_few_rows() -> None:
    rows, nnz = 1 << 16, 1 << 18
    indptr, indices, data = generate.longrows(np, rows=rows, nnz=nnz, long_rows=8,
                                              fraction=0.9, seed=4)
    check_canonical(indptr, indices, data, rows)
    lengths = np.sort(np.diff(indptr))[::-1]
    per_long = round(0.9 * nnz / 8)
    assert list(lengths[:8]) == [per_long] * 8  # distinct columns: nothing merged away
    assert lengths[:8].sum() > 0.85 * indptr[-1]
    assert lengths[8] < 20


def test_powerlaw_is_the_projects_power_law_family_made_whole() -> None:
    from teaal_loops.matrix.rowwise import PowerLaw, whole_matrix

    rows, nnz = 1 << 15, 16 << 15
    indptr, indices, data = generate.powerlaw(np, rows=rows, nnz=nnz, seed=5)
    check_canonical(indptr, indices, data, rows)
    lengths = np.diff(indptr)
    assert lengths.max() > 50 * lengths.mean()  # the Pareto tail
    want = whole_matrix(PowerLaw(rows, rows, nnz / rows, 1.5, 0.5, 5), np.float32)
    np.testing.assert_array_equal(indptr, want.indptr)
    np.testing.assert_array_equal(indices, want.indices)


def test_emptyrows_leave_the_fraction_empty() -> None:
    rows, nnz = 1 << 14, 32 << 14
    indptr, indices, data = generate.emptyrows(np, rows=rows, nnz=nnz, empty_fraction=0.5,
                                               seed=6)
    check_canonical(indptr, indices, data, rows)
    lengths = np.diff(indptr)
    assert 0.45 < np.count_nonzero(lengths == 0) / rows < 0.55
    assert 0.9 * nnz < indptr[-1] < 1.1 * nnz
    assert 56 < lengths[lengths > 0].mean() < 72  # Poisson(64) in the other half


def test_same_seed_same_matrix_and_arguments_are_checked() -> None:
    a = generate.uniform(np, rows=256, nnz=2048, seed=7)
    b = generate.uniform(np, rows=256, nnz=2048, seed=7)
    assert all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))
    with pytest.raises(ValueError):
        generate.banded(np, rows=0, width=4)
    with pytest.raises(ValueError):
        generate.rmat(np, scale=0, nnz=10)
    with pytest.raises(ValueError):
        generate.longrows(np, rows=4, nnz=10, long_rows=5)
    with pytest.raises(ValueError):
        generate.powerlaw(np, rows=4, nnz=10, alpha=1.0)
    with pytest.raises(ValueError):
        generate.powerlaw(np, rows=4, nnz=10, skew=1.0)
    with pytest.raises(ValueError):
        generate.emptyrows(np, rows=4, nnz=10, empty_fraction=1.0)
