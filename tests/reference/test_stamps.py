"""Spacetime stamps of the four SpMV schedules, against formulas written from the schedules'
ownership rules (who owns which row or chunk) and fibertree's split rules, independently of the
generator."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teaal_loops.reference import RankStamp, run_reference
from teaal_loops.spec import load_spec
from tests.conftest import REPO
from tests.reference.helpers import atoms, dense_vector, random_csr


def run(name, a, params):
    spec = load_spec(REPO / "specs" / f"{name}.yaml")
    x = dense_vector(a.shape[1], 0)
    result = run_reference(spec, {"A": a, "B": x}, params=params, engine="builtin")
    by_atom = {}
    for s in result.stamps:
        m, k = s.indices["m"], s.indices["k"]
        row = a.indices[a.indptr[m] : a.indptr[m + 1]]
        by_atom[int(a.indptr[m] + np.searchsorted(row, k))] = s
    assert len(by_atom) == len(result.stamps) == a.nnz
    return by_atom


matrices = st.builds(
    random_csr,
    rows=st.integers(1, 25),
    cols=st.integers(1, 12),
    density=st.sampled_from([0.1, 0.3, 0.8]),
    seed=st.integers(0, 10_000),
    empty_rows=st.integers(0, 4),
)


@settings(max_examples=25, deadline=None)
@given(matrices, st.integers(1, 6), st.integers(1, 3))
def test_thread_mapped(a, threads, tiles_per) -> None:
    s1, s2 = threads, threads * tiles_per
    stamps = run("thread_mapped", a, {"NUM_TILES": s2, "NUM_THREADS": s1})
    for idx, r, k, j in atoms(a):
        s = stamps[idx]
        assert s.einsum == "Z" and dict(s.indices) == {"m": r, "k": k}
        assert s.space == (RankStamp("M0", r % s1, r),)
        assert s.time == (
            RankStamp("M2", r // s2, r // s2 * s2),
            RankStamp("M1", (r % s2) // s1, r // s1 * s1),
            RankStamp("K", j, k),
        )


@settings(max_examples=25, deadline=None)
@given(matrices, st.integers(1, 7), st.integers(1, 7))
def test_thread_mapped_sizes_that_do_not_divide(a, s1, s2) -> None:
    """fibertree tiles every level at absolute multiples of its size: with NUM_TILES=10 and
    NUM_THREADS=4, rows 10..19 fall into sub-tiles [10,12), [12,16), [16,20)."""
    stamps = run("thread_mapped", a, {"NUM_TILES": s2, "NUM_THREADS": s1})
    for idx, r, _, _ in atoms(a):
        tile, sub = r // s2 * s2, r // s1 * s1
        s = stamps[idx]
        assert s.time[1] == RankStamp("M1", sub // s1 - tile // s1, sub)
        assert s.space[0] == RankStamp("M0", r - max(tile, sub), r)


@settings(max_examples=25, deadline=None)
@given(matrices, st.integers(1, 5), st.sampled_from([1, 2, 3, 4, 32]))
def test_group_mapped(a, grid, group) -> None:
    tiles = grid * 2
    stamps = run("group_mapped", a, {"NUM_TILES": tiles, "GRID_SIZE": grid, "BLOCK_SIZE": group})
    for idx, r, k, j in atoms(a):
        s = stamps[idx]
        chunk = j // group
        first = 0 if chunk == 0 else int(a.indices[a.indptr[r] + chunk * group])
        assert s.space == (RankStamp("M0", r % grid, r), RankStamp("K0", j % group, k))
        assert s.time == (
            RankStamp("M2", r // tiles, r // tiles * tiles),
            RankStamp("M1", (r % tiles) // grid, r // grid * grid),
            RankStamp("K1", chunk, first),
        )


def coord_of(a, idx):
    r = int(np.searchsorted(a.indptr, idx, side="right") - 1)
    return (r, int(a.indices[idx]))


@settings(max_examples=25, deadline=None)
@given(matrices, st.integers(1, 9))
def test_work_oriented(a, wpt) -> None:
    stamps = run("work_oriented", a, {"WORK_PER_THREAD": wpt})
    for idx, r, k, _ in atoms(a):
        chunk = idx // wpt
        start = (0, 0) if chunk == 0 else coord_of(a, chunk * wpt)
        assert stamps[idx].space == (RankStamp("MK1", chunk, start),)
        assert stamps[idx].time == (RankStamp("MK0", idx % wpt, (r, k)),)


@settings(max_examples=40, deadline=None)
@given(matrices, st.integers(1, 9))
def test_merge_path(a, ipt) -> None:
    """Share of atom a of row r: item (a + r) // IPT; the position inside the share counts the
    share's nonzeros only; a share's coordinate is its first nonzero (the first share: (0, 0))."""
    stamps = run("merge_path", a, {"ITEMS_PER_THREAD": ipt})
    first_of_share: dict[int, int] = {}
    for idx, r, _, _ in atoms(a):
        first_of_share.setdefault((idx + r) // ipt, idx)
    first_share = min(first_of_share) if first_of_share else None
    for idx, r, k, _ in atoms(a):
        share = (idx + r) // ipt
        first = first_of_share[share]
        start = (0, 0) if share == first_share else coord_of(a, first)
        assert stamps[idx].space == (RankStamp("MK1", share, start),)
        assert stamps[idx].time == (RankStamp("MK0", idx - first, (r, k)),)


def test_merge_path_shares_of_empty_rows_keep_their_index() -> None:
    """Rows 1..6 empty: shares made only of row ends exist in merge order, so the share index
    of later nonzeros is not shifted by them."""
    import scipy.sparse as sp

    dense = np.zeros((8, 3))
    dense[0] = [1, 2, 0]
    dense[7] = [0, 3, 4]
    a = sp.csr_matrix(dense)
    stamps = run("merge_path", a, {"ITEMS_PER_THREAD": 2})
    # items: nz0 nz1 end0 end1..end6 nz2 nz3 end7 -> nz2 is item 2 + 7 = 9 -> share 4
    assert [stamps[i].space[0].pos for i in range(4)] == [0, 0, 4, 5]


@pytest.mark.parametrize("name", ["thread_mapped", "group_mapped", "work_oriented", "merge_path"])
def test_stamps_follow_time_order_within_each_space_slot(name) -> None:
    """Within one space slot, multiplies happen in increasing time-stamp order (time is
    sequential) — true of the loop nests for all four schedules."""
    spec = load_spec(REPO / "specs" / f"{name}.yaml")
    a = random_csr(30, 20, 0.2, 3, empty_rows=4)
    params = {p: 3 for p in spec.parameters}
    result = run_reference(
        spec, {"A": a, "B": dense_vector(20, 3)}, params=params, engine="builtin"
    )
    last: dict[tuple, tuple] = {}
    for s in result.stamps:
        key = tuple(r.pos for r in s.space)
        t = tuple(r.pos for r in s.time)
        assert key not in last or last[key] < t
        last[key] = t
