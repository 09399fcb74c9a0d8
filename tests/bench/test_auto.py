"""The auto chooser: its two regimes, on statistics built by hand and on real matrices.

Where a test names a schedule for a corpus-like matrix, it is the family that measured fastest
on an H200 (BENCHMARKS.md), not a value read off the implementation.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from teaal_loops import auto
from teaal_loops.errors import TeaalLoopsError
from teaal_loops.lowering import lower
from teaal_loops.matrix.stats import RowStats, row_stats
from teaal_loops.spec import load_spec, load_spec_string
from teaal_loops.types import DeviceInfo
from tests.conftest import REPO

H200 = DeviceInfo("H200", 132)
RESIDENT = 132 * 2048


def stats(rows: int, nnz: int, *, max_row: int | None = None, cv: float = 0.0) -> RowStats:
    mean = nnz / rows if rows else 0.0
    longest = max_row if max_row is not None else int(np.ceil(mean))
    return RowStats(rows=rows, cols=rows, nnz=nnz, mean=mean, max=longest, min=0,
                    std=cv * mean, cv=cv, empty_rows=0, p50=mean, p90=mean, p99=mean)


def group_of(choice: auto.AutoChoice) -> int:
    """Lanes a row of a group-mapped or thread-mapped choice."""
    if choice.schedule == "thread_mapped":
        return 1
    assert choice.schedule == "group_mapped"
    return int(next(iter(choice.params.values())))


def test_empty_matrix_is_thread_mapped() -> None:
    assert auto.choose(stats(100, 0)).schedule == "thread_mapped"
    assert auto.choose(stats(0, 0)).rule == "R0"


def test_large_skewed_matrices_take_merge_path_with_items_by_how_their_rows_read_x() -> None:
    # longrows: 90% of the nonzeros in 128 rows of ~1M sorted columns of 4.2M, so a typical
    # nonzero's row reads x along (a column every ~5): 16 items a thread, which amortise the
    # walk's instructions (4 items: 0.58x the best cuSPARSE, 16: 0.96x; H100 float32)
    longrows = stats(1 << 22, 1 << 27, max_row=1_000_000, cv=160.0)
    assert auto.reads_x_in_sequence(longrows, 4) and auto.reads_x_in_sequence(longrows, 8)
    for value_bytes in (4, 8):
        huge = auto.choose(longrows, H200, auto.constants(value_bytes), value_bytes=value_bytes)
        assert huge.rule == "T1" and huge.label == "merge_path[ITEMS_PER_THREAD=16]"
        assert "reads x in sequence" in huge.reason
    # R-MAT scale 23: a typical nonzero's row is ~3.4K of 8.4M columns long, a gather every
    # ~10 KB of x: 4 items a thread, whose small tiles leave L1 to x (1.03x against 0.95x)
    rmat = stats(1 << 23, 156_000_000, max_row=175_000, cv=13.5)
    assert not auto.reads_x_in_sequence(rmat, 4)
    for value_bytes in (4, 8):
        power = auto.choose(rmat, H200, auto.constants(value_bytes), value_bytes=value_bytes)
        assert power.rule == "T1" and power.label == "merge_path[ITEMS_PER_THREAD=4]"
        assert "gathers x" in power.reason


def test_reading_x_in_sequence_is_one_line_of_x_between_a_typical_rows_columns() -> None:
    """The typical nonzero's row is mean * (1 + cv^2) long; its columns are in sequence when
    they lie at most SEQUENTIAL_GAP_BYTES of x apart, which depends on the value's size."""
    gap = auto.SEQUENTIAL_GAP_BYTES
    rows = 1 << 20
    mean, cv = 16.0, 3.0
    typical = mean * (1 + cv * cv)  # 160 nonzeros
    at_edge = RowStats(rows=rows, cols=int(typical * gap / 4), nnz=int(rows * mean),
                       mean=mean, max=10_000, min=0, std=cv * mean, cv=cv, empty_rows=0,
                       p50=mean, p90=mean, p99=mean)
    assert auto.reads_x_in_sequence(at_edge, 4)  # exactly a line apart in float32
    assert not auto.reads_x_in_sequence(at_edge, 8)  # two lines apart in float64
    wider = dataclasses.replace(at_edge, cols=at_edge.cols + 1)
    assert not auto.reads_x_in_sequence(wider, 4)
    assert not auto.reads_x_in_sequence(stats(100, 0), 4)  # no nonzeros: nothing to read


def test_float64_merge_path_shares_stay_within_the_staged_tile() -> None:
    """Past 16 items a thread (float64) the staged tile cannot hold a block's share and the
    kernel walks the layout directly, measured 3.3x (H100) and 3.9x (H200) slower than 16 on
    longrows in float64 (BENCHMARKS.md); float32 keeps its 32."""
    longrows = stats(1 << 22, 1 << 27, max_row=1_000_000, cv=160.0)
    wide = auto.constants(4).replace(LARGE_ITEMS_MAX=32)  # constants that ask for 32
    assert auto.choose(longrows, H200, wide).params == {"ITEMS_PER_THREAD": 32}
    f64 = auto.choose(longrows, H200, wide, value_bytes=8)
    assert f64.params == {"ITEMS_PER_THREAD": 16} and f64.rule == "T1"
    assert "16 items a thread, the most the staged tile holds" in f64.reason
    assert auto.staged_merge_items(4) == 32 and auto.staged_merge_items(8) == 16
    assert auto.staged_merge_items(4, wide_offsets=True) == 16
    # choices below the cap are untouched, and other schedules are not merge-path's business
    # (the same constants, float64's, on both sides: only the cap differs)
    c64 = auto.constants(8)
    power = stats(1 << 23, 156_000_000, max_row=175_000, cv=13.5)
    assert auto.choose(power, H200, c64, value_bytes=8) == auto.choose(power, H200, c64)
    banded = stats(1 << 23, 32 << 23, cv=0.0)
    assert auto.choose(banded, H200, c64, value_bytes=8) == auto.choose(banded, H200, c64)


def test_large_regular_matrices_give_each_lane_a_few_nonzeros() -> None:
    banded = auto.choose(stats(1 << 23, 32 << 23, cv=0.0), H200)
    assert banded.rule == "T2" and group_of(banded) == 8  # best on the H200 (BENCHMARKS.md)
    uniform = auto.choose(stats(1 << 23, 16 << 23, max_row=40, cv=0.25), H200)
    assert group_of(uniform) == 8  # likewise
    wide = auto.choose(stats(20_000, 20_000 * 3000, max_row=3100, cv=0.01), H200)
    assert wide.spec == auto.BLOCK_SPEC and group_of(wide) in (256, 512)  # a block a row


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(2**20, 2**31 - 1), mean=st.floats(1.0, 4000.0))
def test_no_group_overflows_the_32_bit_thread_index(rows: int, mean: float) -> None:
    choice = auto.choose(stats(rows, int(rows * mean), max_row=int(mean) + 1, cv=0.1), H200)
    if choice.schedule in ("group_mapped", "thread_mapped"):
        assert rows * group_of(choice) <= auto.INT32_MAX


def test_small_matrices_use_the_measured_fastest_family() -> None:
    caida = auto.choose(stats(26_475, 106_762, max_row=2628, cv=8.3), H200)
    assert caida.schedule == "merge_path" and caida.rule == "L"
    facebook = auto.choose(stats(4039, 176_468, max_row=1045, cv=1.2), H200)
    assert facebook.spec == auto.BLOCK_SPEC  # rows of ~1000: a block a row
    road = auto.choose(stats(114_599, 239_332, max_row=6, cv=0.2), H200)
    assert group_of(road) <= 2  # many very short rows: one or two lanes a row
    fem = auto.choose(stats(2003, 83_883, max_row=95, cv=0.5), H200)
    assert group_of(fem) == 32  # few rows of ~40: a warp a row


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 200_000), mean=st.floats(1.0, 40.0), a=st.integers(1, 5000),
       b=st.integers(1, 5000))
def test_longer_rows_never_shrink_the_group(rows: int, mean: float, a: int, b: int) -> None:
    nnz = int(rows * mean)
    if nnz >= auto.constants().THROUGHPUT_WAVES * RESIDENT:
        return
    low, high = sorted((a, b))
    small = auto.choose(stats(rows, nnz, max_row=max(low, 1)), H200)
    large = auto.choose(stats(rows, nnz, max_row=max(high, 1)), H200)
    grouped = ("group_mapped", "thread_mapped")
    if small.schedule in grouped and large.schedule in grouped:
        assert group_of(large) >= group_of(small)


@settings(max_examples=60, deadline=None)
@given(max_row=st.integers(1, 4000), r1=st.integers(1, 2_000_000), r2=st.integers(1, 2_000_000))
def test_more_rows_never_grow_the_group(max_row: int, r1: int, r2: int) -> None:
    few, many = sorted((r1, r2))
    a = auto.choose(stats(few, few * 2, max_row=max_row), H200)
    b = auto.choose(stats(many, many * 2, max_row=max_row), H200)
    grouped = ("group_mapped", "thread_mapped")
    if a.schedule in grouped and b.schedule in grouped and a.rule == b.rule == "L":
        assert group_of(b) <= group_of(a)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 10**8),
    mean=st.floats(0.0, 5000.0),
    skew=st.floats(1.0, 10**5),
    cv=st.floats(0.0, 20.0),
)
def test_every_choice_is_a_library_spec_with_its_own_parameters(
    rows: int, mean: float, skew: float, cv: float
) -> None:
    nnz = int(rows * mean)
    choice = auto.choose(stats(rows, nnz, max_row=int(max(mean, 1) * skew), cv=cv), H200)
    spec = load_spec(auto.spec_path(choice))
    assert set(choice.params) <= set(spec.parameters)
    assert lower(spec, params=dict(choice.params)).kind is choice.schedule
    assert choice.reason


def test_costs_name_every_candidate_and_the_choice_is_the_cheapest() -> None:
    s = stats(30_000, 300_000, max_row=500, cv=1.3)
    table = auto.costs(s, H200)
    assert "thread_mapped" in table and "group_mapped_block[GROUP=512]" in table
    assert auto.choose(s, H200).label == min(table, key=lambda k: table[k])
    # thread-mapped is a one-lane group without the reduction
    one = auto.group_cost(1, 30_000, 500, RESIDENT)
    c = auto.constants()
    assert table["thread_mapped"] == pytest.approx(one)
    assert one == pytest.approx(c.CW * max(30_000 / RESIDENT, c.MIN_WAVES)
                                + c.CI * 500 - c.CT)


def test_label_names_the_spec_and_its_sorted_parameters() -> None:
    choice = auto.AutoChoice("group_mapped", "group_mapped", {"B": 2, "A": 1})
    assert choice.label == "group_mapped[A=1,B=2]"
    assert auto.AutoChoice("merge_path", "merge_path").label == "merge_path"


def test_statistics_of_a_real_matrix_drive_the_choice() -> None:
    rng = np.random.default_rng(0)
    lengths = np.full(2000, 3)
    lengths[:5] = 5_000  # five rows far longer than the rest
    indptr = np.concatenate(([0], np.cumsum(lengths)))
    cols = 40_000
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths])
    A = sp.csr_matrix((np.ones(indptr[-1]), indices, indptr), shape=(2000, cols))
    host = auto.matrix_stats(A)
    assert host.max == 5_000 and host.nnz == A.nnz
    # few rows, some of thousands: no lane group short enough to wait on the longest row
    choice = auto.choose(host, H200)
    assert choice.schedule == "merge_path" or group_of(choice) >= 128


def test_device_row_stats_agree_with_the_host_statistics() -> None:
    A = sp.random(300, 200, density=0.05, random_state=3, format="csr")
    mine = auto.device_row_stats(np, A.indptr, A.shape[1])
    ref = row_stats(A)
    assert (mine.rows, mine.nnz, mine.max, mine.min, mine.empty_rows) == (
        ref.rows, ref.nnz, ref.max, ref.min, ref.empty_rows)
    assert mine.mean == pytest.approx(ref.mean)
    assert mine.cv == pytest.approx(ref.cv)
    assert mine.p90 == pytest.approx(ref.p90)


def test_a_spec_asking_for_auto_resolves_to_a_library_spec() -> None:
    text = (REPO / "specs" / "thread_mapped.yaml").read_text() + "x-teaal-loops:\n  schedule: auto\n"
    spec = load_spec_string(text)
    assert auto.is_auto(spec)
    A = sp.random(500, 500, density=0.1, format="csr", random_state=1)  # ~50 a row
    path, choice = auto.resolve(spec, A)
    assert path == auto.spec_path(choice)
    assert path.is_file()


def test_resolve_refuses_a_spec_that_does_not_ask_for_auto() -> None:
    spec = load_spec(REPO / "specs" / "merge_path.yaml")
    assert not auto.is_auto(spec)
    with pytest.raises(TeaalLoopsError, match="schedule: auto"):
        auto.resolve(spec, sp.eye(4, format="csr"))


def test_latency_regime_merge_path_takes_the_schedules_default_between_its_two_sizes() -> None:
    """Past FLAT_LARGE_NNZ nonzeros merge-path keeps its own default of 8 items up to 2M
    merge items (soc-Slashdot0902: 8 beat 16 in every suite run), FLAT_WORK_LARGE past them
    (ego-Twitter); FLAT_WORK below."""
    c = auto.constants(4)
    assert c.FLAT_WORK != 8 and c.FLAT_WORK_LARGE != 8  # the three tiers are told apart

    def merge_items(rows: int, nnz: int, longest: int, cv: float) -> int:
        choice = auto.choose(stats(rows, nnz, max_row=longest, cv=cv), H200, c)
        assert choice.rule == "L" and choice.spec == "merge_path", choice
        return int(choice.params["ITEMS_PER_THREAD"])

    assert merge_items(82_168, 948_464, 2511, 3.2) == 8  # soc-Slashdot0902
    assert merge_items(81_306, 2_684_606, 3383, 2.05) == c.FLAT_WORK_LARGE  # ego-Twitter
    assert merge_items(26_475, 106_762, 2628, 8.28) == c.FLAT_WORK  # as-caida20071105
    # the boundary is merge-path's own: rows + nnz at 2M items exactly keeps the default
    assert merge_items(100_000, 1_900_000, 40_000, 6.0) == 8
    assert merge_items(100_000, 1_900_001, 40_000, 6.0) == c.FLAT_WORK_LARGE
