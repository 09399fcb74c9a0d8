"""Rule T3 of the auto chooser: column panels for large matrices gathering at random from an x
larger than the L2 holds, from two shares of their column indices.

The shares quoted for the large classes are measured on the bench's synthetic classes
(teaal_loops/auto.py); the tests build small matrices with the same shapes of column access.
"""

from __future__ import annotations

import numpy as np
import pytest

from teaal_loops import auto
from teaal_loops.matrix.columns import ColumnStats, column_stats_of
from teaal_loops.matrix.limit_model import RESIDENT_BYTES
from teaal_loops.matrix.stats import RowStats
from teaal_loops.types import DeviceInfo

H200 = DeviceInfo("H200", 132)
COLS = 1 << 23  # x of 32 MiB in float32, 64 MiB in float64


def stats(rows: int, nnz: int) -> RowStats:
    mean = nnz / rows
    return RowStats(rows=rows, cols=COLS, nnz=nnz, mean=mean, max=int(mean) + 1, min=0,
                    std=0.0, cv=0.0, empty_rows=0, p50=mean, p90=mean, p99=mean)


LARGE = stats(1 << 23, 1 << 27)  # the uniform class: 8M rows, 16 a row
SPREAD = ColumnStats(COLS, 0.8, 0.9)


def shares(cols: np.ndarray, rows: int, width: int) -> ColumnStats:
    """The column statistics of ``rows`` rows of equal length holding ``cols``, in float64."""
    indptr = np.arange(rows + 1, dtype=np.int64) * (len(cols) // rows)
    return column_stats_of(np, indptr, cols.astype(np.int32), (rows, width), 8)


# 16M nonzeros over 4M columns (x of 32 MiB in float64): four a column, as the large classes
# have 16 (uniform) to 32 (longrows) a column at 2**23 columns.
ROWS, WIDTH, PER_ROW = 1 << 20, 1 << 22, 16


def test_random_columns_are_cold_and_far_from_the_diagonal() -> None:
    rng = np.random.default_rng(1)
    got = shares(rng.integers(0, WIDTH, ROWS * PER_ROW), ROWS, WIDTH)
    assert got.cold_share > 0.5 and got.far_share > 0.7
    assert auto.choose(LARGE, H200, value_bytes=8, columns=got).layout == "panels:2"


def test_hot_columns_are_not_cold() -> None:
    """R-MAT-like: nine in ten gathers hit half of x's hottest 8 MiB."""
    rng = np.random.default_rng(2)
    n = ROWS * PER_ROW
    hot = rng.integers(0, (RESIDENT_BYTES // 8) // 2, n)
    cols = np.where(rng.random(n) < 0.9, hot, rng.integers(0, WIDTH, n))
    got = shares(cols, ROWS, WIDTH)
    assert got.cold_share < 0.2
    assert auto.choose(LARGE, H200, value_bytes=8, columns=got).layout is None


def test_a_band_is_never_far_from_the_diagonal() -> None:
    step = WIDTH // ROWS
    band = np.repeat(np.arange(ROWS) * step, PER_ROW) + np.tile(np.arange(PER_ROW), ROWS)
    got = shares(band, ROWS, WIDTH)
    assert got.cold_share > 0.5 and got.far_share == 0.0
    assert auto.choose(LARGE, H200, value_bytes=8, columns=got).layout is None


@pytest.mark.parametrize(
    ("cold", "far", "layout"),
    [(0.49, 0.78, "panels:2"),  # the float32 power-law graph: panels paid 1.09x to 1.19x
     (0.02, 0.66, None),  # R-MAT: its hot columns stay in L2, panels lost
     (0.75, 0.00, None)],  # banded: a window of x at a time
)
def test_the_shares_measured_on_the_large_classes_decide(
    cold: float, far: float, layout: str | None
) -> None:
    columns = ColumnStats(COLS, cold, far)
    assert auto.choose(LARGE, H200, value_bytes=4, columns=columns).layout == layout


@pytest.mark.parametrize(("value_bytes", "panels"), [(4, 2), (8, 3)])
def test_x_of_32_and_64_mib_take_two_and_three_panels(value_bytes: int, panels: int) -> None:
    choice = auto.choose(LARGE, H200, value_bytes=value_bytes, columns=SPREAD)
    assert choice.rule == "T3" and choice.layout == f"panels:{panels}"
    # LARGE's mean row over 2 or 3 panels is at most 8 nonzeros a panel: 8 items a thread
    assert choice.schedule == "merge_path"
    assert choice.label == f"merge_path[ITEMS_PER_THREAD=8]@panels:{panels}"


@pytest.mark.parametrize(("mean", "value_bytes", "items"), [
    (16, 4, 8),  # uniform, power-law, many empty rows over 2 panels (float32)
    (16, 8, 8),  # ... over 3 (float64): 5.3 a panel, at least 8
    (32, 4, 16),  # 32-nonzero rows over 2 panels (longrows over its two float64 panels)
    (400, 4, 16),  # long rows: at most 16
])
def test_panels_take_about_a_mean_row_of_a_panel_a_thread(
    mean: int, value_bytes: int, items: int
) -> None:
    rows = 1 << 23
    large = stats(rows, rows * mean)
    choice = auto.choose(large, H200, value_bytes=value_bytes, columns=SPREAD)
    assert choice.rule == "T3" and choice.params == {"ITEMS_PER_THREAD": items}
    assert f"{items} items a thread" in choice.reason


def test_panels_need_an_x_past_the_limit_and_a_large_matrix() -> None:
    spread = SPREAD
    small_x = ColumnStats(auto.PANEL_X_BYTES // 4, 0.9, 0.9)  # x of exactly the limit
    assert auto.choose(LARGE, H200, value_bytes=4, columns=small_x).layout is None
    few = stats(1 << 20, 1 << 22)  # the latency regime: no layout change
    assert auto.choose(few, H200, value_bytes=4, columns=spread).layout is None
    assert auto.choose(LARGE, H200, value_bytes=4, columns=None).layout is None
    # at most PANEL_MAX panels, each at most PANEL_SLICE_BYTES of x
    huge = ColumnStats(1 << 30, 0.9, 0.9)
    assert auto.choose(LARGE, H200, value_bytes=8, columns=huge).layout == (
        f"panels:{auto.PANEL_MAX}")


def test_column_stats_are_read_only_past_the_size_test() -> None:
    import scipy.sparse as sp

    small = sp.random(100, 1000, density=0.1, format="csr", random_state=0)
    assert auto.column_stats(small, 8) is None
    wide = sp.csr_matrix((np.ones(3), ([0, 1, 2], [5, COLS - 1, 7])), shape=(3, COLS))
    got = auto.column_stats(wide, 8)
    assert got is not None and got.cols == COLS and got.cold_share == 0.0  # all 3 are hot


AUTO_SPEC = """
einsum:
  declaration: {A: [M, K], B: [K], Z: [M]}
  expressions: ["Z[m] = A[m, k] * B[k]"]
x-teaal-loops:
  schedule: auto
"""


@pytest.mark.parametrize(("given", "expected"), [(None, "panels:3"), ("csr", "csr")])
def test_an_auto_kernel_compiles_the_layout_it_chose_unless_given_one(
    monkeypatch: pytest.MonkeyPatch, given: str | None, expected: str
) -> None:
    import scipy.sparse as sp

    from teaal_loops.pipeline import compile
    from teaal_loops.spec import load_spec_string

    read: list[object] = []
    monkeypatch.setattr(auto, "matrix_stats", lambda A: LARGE)
    monkeypatch.setattr(auto, "column_stats", lambda A, vb: read.append(A) or SPREAD)
    kernel = compile(load_spec_string(AUTO_SPEC), dtype="float64", layout=given)
    A = sp.random(10, 10, density=0.3, format="csr", random_state=0)
    chosen = kernel.kernel_for(A)
    assert chosen.layout == expected
    assert chosen.kind == ("merge_path" if given is None else kernel.last_choice.schedule)
    assert (kernel.last_choice.layout is not None) == (given is None)
    assert bool(read) == (given is None)  # a given layout reads no column
