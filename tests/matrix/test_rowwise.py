"""Counter-based row-wise families (``--device-synthetic``): any row range made alone equals
the same rows of the whole matrix, rows are sorted and distinct by construction, the families
have the shapes they promise, and the text is checked before anything is made."""

from __future__ import annotations

import numpy as np
import pytest

from teaal_loops.errors import MatrixError
from teaal_loops.matrix import rowwise
from teaal_loops.matrix.csr_arrays import CsrArrays

FAMILIES = [
    "banded:rows=2000,nnz=30000,seed=1",
    "banded:rows=7,nnz=1000",  # the band wider than the matrix: full rows
    "powerlaw:rows=6000,nnz=90000,seed=4",
    "powerlaw:rows=3000,cols=400,nnz=30000,alpha=1.1,skew=0.9,seed=2",  # rows hit the cap
    "powerlaw:rows=500,cols=100000,nnz=4000,skew=0",
]


def _sorted_and_distinct(A: object) -> bool:
    indptr, indices = A.indptr, A.indices.astype(np.int64)  # type: ignore[attr-defined]
    step = np.diff(indices)
    inside = np.ones(len(step), dtype=bool)
    starts = indptr[1:-1]
    inside[starts[(starts > 0) & (starts <= len(step))] - 1] = False
    return bool(np.all(step[inside] > 0))


@pytest.mark.parametrize("text", FAMILIES)
def test_rows_are_sorted_distinct_and_in_range(text: str) -> None:
    family = rowwise.parse_family(text)
    A = rowwise.whole_matrix(family, np.float32)
    assert A.shape == (family.rows, family.cols)
    assert _sorted_and_distinct(A)
    assert A.nnz == 0 or (A.indices.min() >= 0 and A.indices.max() < family.cols)
    assert np.array_equal(np.diff(A.indptr), family.lengths(np, 0, family.rows))
    assert np.all(np.abs(A.data) <= 1.0)


@pytest.mark.parametrize("text", FAMILIES)
def test_any_row_range_equals_those_rows_of_the_whole(text: str) -> None:
    family = rowwise.parse_family(text)
    A = rowwise.whole_matrix(family, np.float64)
    rng = np.random.default_rng(0)
    for _ in range(5):
        lo, hi = sorted(int(v) for v in rng.integers(0, family.rows + 1, 2))
        indptr, indices, data = rowwise.generate_rows(family, lo, hi, np.float64)
        start, stop = A.indptr[lo], A.indptr[hi]
        assert np.array_equal(indptr, A.indptr[lo : hi + 1] - start)
        assert np.array_equal(indices, A.indices[start:stop])
        assert np.array_equal(data, A.data[start:stop])


def test_banded_holds_the_band() -> None:
    family = rowwise.parse_family("banded:rows=100,nnz=2100")
    assert family.half_width == 10
    A = rowwise.whole_matrix(family).toarray() != 0
    i, j = np.indices(A.shape)
    assert np.array_equal(A, np.abs(i - j) <= 10)


def test_powerlaw_has_a_heavy_tail_and_hot_columns() -> None:
    family = rowwise.parse_family("powerlaw:rows=200000,nnz=3.2e6,seed=9")
    lengths = family.lengths(np, 0, family.rows)
    assert 0.9 * 3.2e6 < lengths.sum() < 1.1 * 3.2e6  # the mean it was asked for
    assert lengths.max() > 100 * lengths.mean()  # a Pareto tail: rows far above the mean
    A = rowwise.whole_matrix(family)
    per_column = np.bincount(A.indices, minlength=family.cols)
    hot = per_column[: family.cols // 100].sum() / A.nnz
    assert hot > 0.05  # the first 1% of the columns take several times their share


def test_operand_and_values_depend_on_the_seed_only() -> None:
    a = rowwise.operand(np, 3, 10, 20, np.float32)
    assert np.array_equal(a, rowwise.operand(np, 3, 0, 30, np.float32)[10:20])
    assert not np.array_equal(a, rowwise.operand(np, 4, 10, 20, np.float32))
    one = rowwise.whole_matrix(rowwise.parse_family("powerlaw:rows=300,nnz=3000,seed=1"))
    two = rowwise.whole_matrix(rowwise.parse_family("powerlaw:rows=300,nnz=3000,seed=2"))
    assert (one != two).nnz > 0


def test_csr_arrays_convert_to_scipy() -> None:
    indptr, indices, data = rowwise.generate_rows(rowwise.parse_family("banded:rows=50,nnz=150"),
                                                  0, 50)
    csr = CsrArrays(indptr, indices, data, (50, 50))
    assert csr.nnz == len(indices) and csr.dtype == np.float64
    assert np.array_equal(csr.to_scipy().indptr, indptr)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cube:rows=5,nnz=5", "unknown kind"),
        ("banded:rows=5", "nnz=... is required"),
        ("banded:nnz=5", "rows=... is required"),
        ("banded:rows=0,nnz=5", "rows=0 must be at least 1"),
        ("banded:rows=5,nnz=5,cols=7", "unknown key 'cols'"),
        ("banded:rows=5,nnz=5,rows=6", "given twice"),
        ("banded:rows=5;import os,nnz=5", "is not a number"),
        ("banded:rows=9^99999999,nnz=5", "is not a number"),
        ("banded:rows=3e9,nnz=5", "rows=3000000000 must be at most"),
        ("banded:rows=5.5,nnz=5", "is not an integer"),
        ("powerlaw:rows=5,nnz=5,alpha=1", "alpha=1 must lie in"),
        ("powerlaw:rows=5,nnz=5,alpha=nan", "is not a number"),
        ("powerlaw:rows=5,nnz=5,alpha=17", "alpha=17 must lie in"),
        ("powerlaw:rows=5,nnz=5,skew=1", "skew=1 must lie in"),
        ("powerlaw:rows=5,cols=2,nnz=50", "more than rows x cols"),
        ("powerlaw:rows=5,nnz=5,seed=-1", "seed=-1 must be at least 0"),
    ],
)
def test_bad_text_is_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(MatrixError) as info:
        rowwise.parse_family(text)
    line = str(info.value)
    assert message in line and "\n" not in line and line.startswith("--device-synthetic")
