"""Layouts: exact round trips, documented array orders, padding guards, the registry."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from teaal_loops import layouts
from teaal_loops.errors import DeviceError, LayoutError


@st.composite
def small_csr(draw: st.DrawFn) -> sp.csr_matrix:
    """Random small matrices: empty rows, zero-sized shapes, nnz = 0, explicit zeros."""
    rows = draw(st.integers(0, 9))
    cols = draw(st.integers(0, 9))
    cells = [(r, c) for r in range(rows) for c in range(cols)]
    chosen = draw(st.lists(st.sampled_from(cells), unique=True, max_size=30)) if cells else []
    values = draw(
        st.lists(
            st.sampled_from([0.0, 1.0, -2.5, 0.125, 3.0]),
            min_size=len(chosen),
            max_size=len(chosen),
        )
    )
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    r = np.array([p[0] for p in chosen], dtype=np.int64)
    c = np.array([p[1] for p in chosen], dtype=np.int64)
    A = sp.csr_matrix((np.array(values, dtype=dtype), (r, c)), shape=(rows, cols))
    A.sort_indices()
    return A


def _assert_same(A: sp.csr_matrix, B: sp.csr_matrix) -> None:
    assert A.shape == B.shape
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_array_equal(A.data, B.data)
    assert A.dtype == B.dtype


def _without_zeros(A: sp.csr_matrix) -> sp.csr_matrix:
    B = A.copy()
    B.eliminate_zeros()
    return B


@settings(max_examples=60, deadline=None)
@given(small_csr(), st.sampled_from(["col", "row"]))
def test_exact_round_trips(A: sp.csr_matrix, order: str) -> None:
    for name in ("csr", "csc", "coo", "ell"):
        options: dict[str, Any] = {"order": order, "padding_limit": None} if name == "ell" else {}
        layout = layouts.convert(A, name, **options)
        assert layout.shape == A.shape and layout.nnz == A.nnz
        assert layout.nbytes == sum(a.nbytes for a in layout.arrays().values())
        _assert_same(layout.to_csr(), A)  # stored zeros survive


@settings(max_examples=60, deadline=None)
@given(small_csr(), st.sampled_from([(2, 2), (4, 4), (3, 2), (1, 5)]))
def test_blocked_and_diagonal_round_trips_keep_every_nonzero(
    A: sp.csr_matrix, block: tuple[int, int]
) -> None:
    bcsr = layouts.convert(A, "bcsr", block=block, padding_limit=None)
    assert bcsr.blocks.shape[1:] == block
    _assert_same(bcsr.to_csr(), _without_zeros(A))
    dia = layouts.convert(A, "dia", padding_limit=None)
    _assert_same(dia.to_csr(), _without_zeros(A))


def test_ell_arrays_follow_the_documented_orders() -> None:
    A = sp.csr_matrix(np.array([[0, 7.0, 0, 8], [0, 0, 0, 0], [9, 0, 0, 0]]))
    col = layouts.convert(A, "ell")
    assert col.width == 2 and col.order == "col"
    # slot s of row r at s * rows + r
    np.testing.assert_array_equal(col.columns, [1, -1, 0, 3, -1, -1])
    np.testing.assert_array_equal(col.values, [7, 0, 9, 8, 0, 0])
    row = layouts.convert(A, "ell", order="row")
    np.testing.assert_array_equal(row.columns, [1, 3, -1, -1, 0, -1])
    assert col.stored == 6 and col.nnz == 3


def test_bcsr_blocks_and_dia_rows_hold_the_documented_entries() -> None:
    dense = np.arange(1.0, 31.0).reshape(5, 6) * (np.arange(30).reshape(5, 6) % 4 == 0)
    A = sp.csr_matrix(dense)
    b = layouts.convert(A, "bcsr", block=(2, 3))
    for block_row in range(len(b.indptr) - 1):
        for k in range(b.indptr[block_row], b.indptr[block_row + 1]):
            r0, c0 = 2 * block_row, 3 * int(b.indices[k])
            window = np.zeros((2, 3))
            part = dense[r0 : r0 + 2, c0 : c0 + 3]
            window[: part.shape[0], : part.shape[1]] = part
            np.testing.assert_array_equal(b.blocks[k], window)
    d = layouts.convert(A, "dia")
    for i, offset in enumerate(d.offsets):
        for r in range(5):
            expected = dense[r, r + offset] if 0 <= r + offset < 6 else 0.0
            assert d.data[i, r] == expected
    assert list(d.offsets) == sorted(set(np.nonzero(dense)[1] - np.nonzero(dense)[0]))


def test_padding_guards_refuse_and_can_be_overridden() -> None:
    n = 2000
    rows = np.concatenate((np.zeros(n, dtype=np.int64), np.arange(1, n)))
    cols = np.concatenate((np.arange(n), np.zeros(n - 1, dtype=np.int64)))
    one_long_row = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    with pytest.raises(LayoutError, match="ell layout .*SKIP_TOO_LARGE"):
        layouts.convert(one_long_row, "ell")
    assert layouts.convert(one_long_row, "ell", padding_limit=None).width == n
    with pytest.raises(LayoutError, match="dia layout"):
        layouts.convert(one_long_row, "dia")
    rng = np.random.default_rng(0)
    scattered = sp.csr_matrix(
        (np.ones(n), (rng.integers(0, n, n), rng.integers(0, n, n))), shape=(n, n)
    )
    with pytest.raises(LayoutError, match="bcsr layout"):
        layouts.convert(scattered, "bcsr", block=8)
    banded = sp.diags([1.0, 2.0, 3.0], [-1, 0, 1], shape=(n, n), format="csr")
    assert layouts.convert(banded, "dia").data.shape == (3, n)
    assert layouts.convert(banded, "ell").width == 3
    with pytest.raises(LayoutError, match="limit is 0.5x"):
        layouts.convert(banded, "dia", padding_limit=0.5)  # DIA is 0.6x CSR here


def test_check_fits_device() -> None:
    layouts.check_fits_device(100, 100)
    with pytest.raises(DeviceError, match="SKIP_TOO_LARGE.*5.0 GiB.*1.0 GiB"):
        layouts.check_fits_device(5 * 2**30, 2**30, what="the ell layout")


def test_unknown_layout_and_options() -> None:
    A = sp.csr_matrix(np.eye(3))
    with pytest.raises(LayoutError, match="supported layouts: bcsr, coo, csc, csr, dia, ell"):
        layouts.convert(A, "hyb")
    with pytest.raises(LayoutError, match="unknown option"):
        layouts.convert(A, "csr", block=2)
    with pytest.raises(LayoutError, match="order"):
        layouts.convert(A, "ell", order="diagonal")
    with pytest.raises(LayoutError, match="block 0x0 must have"):
        layouts.convert(A, "bcsr", block=0)
    with pytest.raises(LayoutError, match="block=True must be"):
        layouts.convert(A, "bcsr", block=True)
    assert layouts.convert(A, "bcsr:3x1").blocks.shape[1:] == (3, 1)  # the name's option
    assert layouts.convert(A, "BCSR", block=4).blocks.shape == (1, 4, 4)


