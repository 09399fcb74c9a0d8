"""The compulsory-bytes formula, checked against the bytes of real arrays."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from teaal_loops.bench.roofline import compulsory_bytes, copy_bytes, gbps, roofline


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 200),
    cols=st.integers(1, 200),
    density=st.floats(0.0, 0.3),
    dtype=st.sampled_from([np.float32, np.float64]),
    offsets=st.sampled_from([np.int32, np.int64]),
)
def test_bytes_equal_one_read_of_every_array_and_one_write_of_y(
    rows: int, cols: int, density: float, dtype: type, offsets: type
) -> None:
    A = sp.random(rows, cols, density=density, format="csr", dtype=dtype, random_state=0)
    indptr = A.indptr.astype(offsets)
    indices = A.indices.astype(np.int32)
    x = np.zeros(cols, dtype=dtype)
    y = np.zeros(rows, dtype=dtype)
    moved = indptr.nbytes + indices.nbytes + A.data.nbytes + x.nbytes + y.nbytes
    got = compulsory_bytes(rows, cols, A.nnz, dtype, offset_bytes=np.dtype(offsets).itemsize)
    assert got == moved


def test_a_gigabyte_banded_matrix() -> None:
    rows, nnz = 2**23, 32 * 2**23
    expected = nnz * 8 + (rows + 1) * 4 + rows * 4 + rows * 4
    assert compulsory_bytes(rows, rows, nnz, "float32") == expected
    assert expected > 2e9


def test_gbps_and_fraction_of_the_copy_rate() -> None:
    r = roofline(3_000_000_000, 1.0, 4000.0)
    assert r.gbps == pytest.approx(3000.0)
    assert r.copy_fraction == pytest.approx(0.75)
    assert roofline(10, 1.0, None).copy_fraction is None
    assert gbps(2_000_000, 0.001) == pytest.approx(2000.0)
    assert copy_bytes(1 << 30) == 2 << 30


@pytest.mark.parametrize(
    "call",
    [
        lambda: compulsory_bytes(-1, 1, 1),
        lambda: compulsory_bytes(1, 1, 1, offset_bytes=2),
        lambda: gbps(10, 0.0),
    ],
)
def test_nonsense_is_refused(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]
