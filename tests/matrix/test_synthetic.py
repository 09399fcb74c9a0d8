"""Synthetic matrices: shape, reproducibility, size, and the property each kind promises."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.errors import MatrixError
from teaal_loops.matrix import (
    SYNTHETIC_KINDS,
    limits,
    synthetic,
    synthetic_from_string,
    validate_csr,
)

# the module, not the function of the same name that the package exports
synthetic_module = importlib.import_module("teaal_loops.matrix.synthetic")
ROWS, NNZ = 2048, 20000


def _canonical(A: sp.csr_matrix) -> None:
    validate_csr(A.indptr, A.indices, A.shape)
    for r in range(0, A.shape[0], max(1, A.shape[0] // 64)):
        row = A.indices[A.indptr[r] : A.indptr[r + 1]]
        assert np.all(np.diff(row) > 0), f"row {r} not strictly increasing"
    assert np.all(A.data != 0)
    assert np.all((A.data >= -1) & (A.data < 1))


def _same(A: sp.csr_matrix, B: sp.csr_matrix) -> bool:
    return (
        A.shape == B.shape
        and np.array_equal(A.indptr, B.indptr)
        and np.array_equal(A.indices, B.indices)
        and np.array_equal(A.data, B.data)
    )


@pytest.mark.parametrize("kind", SYNTHETIC_KINDS)
def test_every_kind_is_canonical_sized_and_reproducible(kind: str) -> None:
    A = synthetic(kind, rows=ROWS, nnz=NNZ, seed=3)
    assert A.shape == (ROWS, ROWS)  # 2048 is a power of two, so rmat keeps it
    assert A.dtype == np.float64
    _canonical(A)
    assert abs(A.nnz - NNZ) <= 0.05 * NNZ, A.nnz
    assert _same(A, synthetic(kind, rows=ROWS, nnz=NNZ, seed=3))
    assert not _same(A, synthetic(kind, rows=ROWS, nnz=NNZ, seed=4))


@pytest.mark.parametrize("kind", ["uniform", "banded", "longrows", "emptyrows"])
def test_rectangular_and_float32(kind: str) -> None:
    A = synthetic(kind, rows=300, cols=5000, nnz=6000, seed=1, dtype="float32")
    assert A.shape == (300, 5000) and A.dtype == np.float32
    _canonical(A)
    assert abs(A.nnz - 6000) <= 0.1 * 6000


def test_banded_stays_within_its_band() -> None:
    A = synthetic("banded", rows=1000, nnz=9000, seed=0).tocoo()
    assert np.all(np.abs(A.col - A.row) <= 9 // 2)
    assert np.all(np.diff(synthetic("banded", rows=1000, nnz=9000).indptr)[10:-10] == 9)
    B = synthetic("banded", rows=1000, nnz=1000, bandwidth=3).tocoo()
    assert np.all(np.abs(B.col - B.row) <= 1) and B.nnz == 3 * 1000 - 2


def test_longrows_concentrate_the_requested_fraction() -> None:
    A = synthetic("longrows", rows=4000, cols=20000, nnz=40000, long_rows=4, fraction=0.8)
    lengths = np.sort(np.diff(A.indptr))[::-1]
    assert lengths[:4].sum() >= 0.75 * A.nnz
    assert lengths[4] < lengths[3] / 100


def test_longrows_denser_than_the_columns_are_capped_and_drawn_without_many_losses() -> None:
    A = synthetic("longrows", rows=500, cols=1000, nnz=5000, long_rows=2, fraction=0.9)
    lengths = np.sort(np.diff(A.indptr))[::-1]
    assert lengths[0] <= 1000 and lengths[1] >= 0.85 * 1000  # wanted 2250 each, capped at 1000


def test_emptyrows_fraction() -> None:
    A = synthetic("emptyrows", rows=10000, nnz=30000, empty_fraction=0.3, seed=5)
    empty = np.count_nonzero(np.diff(A.indptr) == 0)
    assert empty == 3000  # exactly the chosen rows: every other row holds >= 1 nonzero


def test_rmat_is_skewed_and_keeps_the_power_of_two_rows_it_is_given() -> None:
    A = synthetic("rmat", rows=4096, nnz=48000, seed=2)
    assert A.shape == (4096, 4096)
    lengths = np.diff(A.indptr)
    assert lengths.max() > 20 * lengths.mean()
    B = synthetic("uniform", rows=4096, nnz=48000, seed=2)
    assert lengths.max() > 10 * np.diff(B.indptr).max()
    assert abs(A.nnz - 48000) <= 0.02 * 48000  # duplicates were topped up


@pytest.mark.parametrize("rows", [3000, 10000, 4097, 3])
def test_rmat_honours_a_size_that_is_not_a_power_of_two(rows: int) -> None:
    """rows=10000 gives 10000 rows (not 16384): edges drawn on 2**14 vertices are mapped onto
    the 10000, so the skew and the requested number of nonzeros stay."""
    nnz = min(12 * rows, rows * rows // 2)
    A = synthetic_from_string(f"rmat:rows={rows},nnz={nnz},seed=4")
    assert A.shape == (rows, rows)
    _canonical(A)
    assert abs(A.nnz - nnz) <= 0.02 * nnz
    lengths = np.diff(A.indptr)
    if rows >= 1000:
        assert lengths.max() > 10 * lengths.mean()  # still R-MAT's heavy rows
        assert np.argmax(lengths) < rows // 8
    assert _same(A, synthetic_from_string(f"rmat:rows={rows},nnz={nnz},seed=4"))


def test_rmat_scale_and_permutation() -> None:
    A = synthetic_from_string("rmat:scale=10,nnz=8000,seed=1")
    assert A.shape == (1024, 1024)
    P = synthetic_from_string("rmat:scale=10,nnz=8000,seed=1,permute=1")
    assert P.shape == (1024, 1024) and not _same(A, P)
    # R-MAT without permutation puts the heaviest rows at low ids; permuting spreads them.
    assert np.argmax(np.diff(A.indptr)) < 64


def test_many_chunks_still_give_a_canonical_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synthetic_module, "CHUNK_ENTRIES", 500)
    for kind in SYNTHETIC_KINDS:
        A = synthetic(kind, rows=1024, nnz=12000, seed=9)
        _canonical(A)
        assert abs(A.nnz - 12000) <= 0.05 * 12000


def test_nnz_zero_and_full() -> None:
    assert synthetic("uniform", rows=10, nnz=0).nnz == 0
    full = synthetic("uniform", rows=8, cols=8, nnz=64)
    assert full.nnz >= 40  # dense rows are drawn cell by cell, so few are lost


def test_from_string_number_forms() -> None:
    A = synthetic_from_string("uniform:rows=2k,cols=1e3,nnz=2^12,seed=7")
    assert A.shape == (2000, 1000)
    assert _same(A, synthetic("uniform", rows=2000, cols=1000, nnz=4096, seed=7))
    B = synthetic_from_string(" emptyrows : rows=1000 , nnz=1.5e4, empty_fraction=0.25 ")
    assert np.count_nonzero(np.diff(B.indptr) == 0) == 250
    assert synthetic_from_string("banded:rows=100,nnz=500,dtype=f32").dtype == np.float32


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("blobs:rows=10,nnz=10", "valid kinds: uniform, banded, rmat, longrows, emptyrows"),
        ("uniform:rows=10,nnz=10,width=3", "valid keys: rows, cols, nnz, seed, dtype"),
        (
            "banded:rows=10,nnz=10,fraction=0.5",
            "valid keys: rows, cols, nnz, seed, dtype, bandwidth",
        ),
        ("uniform:rows=ten,nnz=10", "not a number"),
        ("uniform:rows=10.5,nnz=10", "not an integer"),
        ("uniform:rows=10", "nnz=... is required"),
        ("uniform:nnz=10", "rows=... is required"),
        ("uniform:rows=10,nnz=1000", "exceeds"),
        ("uniform:rows=0,nnz=0", "at least 1"),
        ("uniform:rows=10,nnz=10,rows=11", "given twice"),
        ("uniform:rows=10,nnz", "not key=value"),
        ("uniform:rows=10,nnz=10,dtype=int8", "valid dtypes: float32 (f32) or float64 (f64)"),
        ("uniform:rows=10,nnz=10,dtype=xyz", "dtype 'xyz' is not valid"),
        ("uniform:rows=10,nnz=10,dtype=float", "valid dtypes"),
        ("uniform:rows=9^99999999,nnz=1", "rows='9^99999999' is too large (at most 2^62)"),
        ("uniform:rows=2**99999999999999999999999,nnz=1", "too large"),
        ("uniform:rows=" + "9" * 5000 + ",nnz=1", "(5000 characters) is too large"),
        ("uniform:rows=1e400,nnz=1", "too large"),
        ("uniform:rows=5000000T,nnz=1", "too large"),
        ("uniform:rows=10,nnz=nan", "nnz='nan' is not a number"),
        ("uniform:rows=10,nnz=--5", "not a number"),
        ("uniform:rows=10,nnz=5,seed=-1", "seed=-1 must be at least 0"),
        ("uniform:rows=10,nnz=5,seed=2^63", "too large"),
        ("emptyrows:rows=10,nnz=10,empty_fraction=nan", "not a number"),
        ("longrows:rows=10,nnz=10,fraction=1e400", "too large"),
        ("rmat:rows=2^32,nnz=10", "rows=4294967296 must be at most 2147483648"),
        ("rmat:scale=40,nnz=10", "scale=40 must be at most 31"),
        ("emptyrows:rows=10,nnz=10,empty_fraction=1.5", "[0, 1]"),
        ("rmat:rows=16,nnz=10,a=0.9", "a+b+c+d must be 1"),
        ("rmat:rows=16,cols=8,nnz=10", "square"),
        ("rmat:rows=16,nnz=10,permute=maybe", "boolean"),
        ("longrows:rows=3,nnz=5,long_rows=5", "exceeds rows"),
    ],
)
def test_from_string_errors_say_what_is_valid(text: str, words: str) -> None:
    with pytest.raises(MatrixError) as err:
        synthetic_from_string(text)
    assert words in err.value.message


def test_sizes_that_cannot_fit_in_memory_are_refused_before_anything_is_drawn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits, "available_memory", lambda: 1 << 30)
    for text in ("uniform:rows=2^40,nnz=2^40", "banded:rows=2^26,nnz=10,bandwidth=1000",
                 "rmat:rows=2^31,nnz=2^31", "uniform:rows=2^30,nnz=0"):
        with pytest.raises(MatrixError, match=r"needs about .* of memory, more than the 1.0 GiB available"):
            synthetic_from_string(text)


def test_api_dtype_and_seed_checks() -> None:
    assert synthetic("uniform", rows=10, nnz=5, dtype=np.float32).dtype == np.float32
    assert synthetic("uniform", rows=10, nnz=5, dtype=np.dtype("float64")).dtype == np.float64
    for bad in ("xyz", np.int8, np.dtype("int8"), None, [1, 2]):
        with pytest.raises(MatrixError, match="valid dtypes"):
            synthetic("uniform", rows=10, nnz=5, dtype=bad)
    for seed in (-1, 2**62 + 1, 1.5, True):
        with pytest.raises(MatrixError, match="seed"):
            synthetic("uniform", rows=10, nnz=5, seed=seed)


def test_keyword_errors() -> None:
    with pytest.raises(MatrixError, match="unknown option"):
        synthetic("uniform", rows=10, nnz=10, bandwidth=2)
    with pytest.raises(MatrixError, match="unknown synthetic matrix kind"):
        synthetic("nope", rows=10, nnz=10)
    with pytest.raises(MatrixError, match="contradicts"):
        synthetic("rmat", rows=100, nnz=10, scale=3)
