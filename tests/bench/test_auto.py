"""The auto chooser: its documented rules, on statistics built by hand and on real matrices."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from teaal_loops import auto
from teaal_loops.errors import TeaalLoopsError
from teaal_loops.ir import ScheduleKind, lower
from teaal_loops.matrix.stats import RowStats, row_stats
from teaal_loops.spec import load_spec, load_spec_string
from tests.conftest import REPO


def stats(rows: int, nnz: int, *, max_row: int | None = None, cv: float = 0.0,
          empty: int = 0) -> RowStats:
    mean = nnz / rows if rows else 0.0
    longest = max_row if max_row is not None else int(np.ceil(mean))
    return RowStats(rows=rows, cols=rows, nnz=nnz, mean=mean, max=longest, min=0,
                    std=cv * mean, cv=cv, empty_rows=empty, p50=mean, p90=mean, p99=mean)


def test_empty_matrix_is_thread_mapped() -> None:
    assert auto.choose(stats(100, 0)).schedule is ScheduleKind.THREAD_MAPPED
    assert auto.choose(stats(0, 0)).rule == "R0"


def test_a_few_huge_rows_go_to_merge_path() -> None:
    choice = auto.choose(stats(1 << 22, 1 << 27, max_row=1_000_000, cv=1.5))
    assert choice.schedule is ScheduleKind.MERGE_PATH
    assert choice.rule == "R1"
    assert "1000000" in choice.reason


def test_power_law_rows_go_to_merge_path() -> None:
    choice = auto.choose(stats(26_475, 106_762, max_row=2628, cv=8.3))  # as-caida-like
    assert choice.schedule is ScheduleKind.MERGE_PATH
    assert choice.rule == "R2"


def test_long_rows_everywhere_take_a_block_per_row() -> None:
    choice = auto.choose(stats(1000, 4_000_000, max_row=4100, cv=0.05))
    assert choice.spec == auto.BLOCK_SPEC
    assert choice.params == {auto.BLOCK_GROUP_PARAM: auto.BLOCK_GROUP}
    assert choice.schedule is ScheduleKind.GROUP_MAPPED


def test_rows_of_dozens_take_a_warp() -> None:
    choice = auto.choose(stats(1024, 32 * 1024, max_row=32, cv=0.0))  # dnn_n1024-like
    assert choice.label == "group_mapped[BLOCK_SIZE=32]"


@pytest.mark.parametrize("mean,group", [(3.5, 2), (4.0, 4), (6.0, 4), (9.8, 8), (16.0, 16),
                                        (23.0, 16)])
def test_short_rows_take_the_power_of_two_below_the_mean(mean: float, group: int) -> None:
    rows = 10_000
    choice = auto.choose(stats(rows, int(mean * rows), cv=0.3))
    assert choice.schedule is ScheduleKind.GROUP_MAPPED
    assert choice.params == {"BLOCK_SIZE": group}


def test_very_short_rows_are_thread_mapped() -> None:
    choice = auto.choose(stats(114_599, 239_332, max_row=6, cv=0.2))  # road network
    assert choice.schedule is ScheduleKind.THREAD_MAPPED
    assert choice.params == {}


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
    choice = auto.choose(stats(rows, nnz, max_row=int(max(mean, 1) * skew), cv=cv))
    path = auto.spec_path(choice)
    assert path.is_file()
    spec = load_spec(path)
    assert set(choice.params) <= set(spec.parameters)
    for value in choice.params.values():
        assert value >= 1 and value & (value - 1) == 0  # group sizes are powers of two
    assert lower(spec, params=dict(choice.params)).kind is choice.schedule
    # rows far longer than the rest never go to a schedule that serialises a row in one thread
    if nnz and max(mean, 1) * skew >= auto.LONG_ROW and skew >= auto.SKEW:
        assert choice.schedule is ScheduleKind.MERGE_PATH


def test_label_names_the_spec_and_its_sorted_parameters() -> None:
    choice = auto.AutoChoice(ScheduleKind.GROUP_MAPPED, "group_mapped", {"B": 2, "A": 1})
    assert choice.label == "group_mapped[A=1,B=2]"
    assert auto.AutoChoice(ScheduleKind.MERGE_PATH, "merge_path").label == "merge_path"


def test_statistics_of_a_real_matrix_drive_the_choice() -> None:
    rng = np.random.default_rng(0)
    lengths = np.full(2000, 3)
    lengths[:5] = 20_000  # five rows far longer than the rest
    indptr = np.concatenate(([0], np.cumsum(lengths)))
    cols = 40_000
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths])
    A = sp.csr_matrix((np.ones(indptr[-1]), indices, indptr), shape=(2000, cols))
    choice = auto.choose(row_stats(A))
    assert choice.schedule is ScheduleKind.MERGE_PATH
    host = auto.matrix_stats(A)
    assert host.max == 20_000 and host.nnz == A.nnz


def test_device_row_stats_agree_with_the_host_statistics() -> None:
    rng = np.random.default_rng(3)
    A = sp.random(300, 200, density=0.05, random_state=rng, format="csr")
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
    assert choice.label == "group_mapped[BLOCK_SIZE=32]"


def test_resolve_refuses_a_spec_that_does_not_ask_for_auto() -> None:
    spec = load_spec(REPO / "specs" / "merge_path.yaml")
    assert not auto.is_auto(spec)
    with pytest.raises(TeaalLoopsError, match="schedule: auto"):
        auto.resolve(spec, sp.eye(4, format="csr"))
