"""CPU simulation: every atom owned exactly once, y equals the dense product, and ownership
follows the spec's mapping, on adversarial random matrices for every schedule."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from teaal_loops.lowering import lower, simulate
from teaal_loops.schedules import bind
from teaal_loops.schedules.definition import atom_tiles as atom_rows
from teaal_loops.spec import load_spec
from teaal_loops.types import MatrixShape
from tests.conftest import REPO

SPECS = {
    "thread_mapped": "thread_mapped.yaml",
    "group_mapped": "group_mapped.yaml",
    "group_mapped_block": "group_mapped_block.yaml",
    "work_oriented": "work_oriented.yaml",
    "merge_path": "merge_path.yaml",
}
_SPEC_CACHE = {name: load_spec(REPO / "specs" / f) for name, f in SPECS.items()}


@st.composite
def csr_matrices(draw: st.DrawFn) -> sp.csr_matrix:
    """Random CSR with empty rows, a possible huge row, zero rows, nnz = 0, any shape."""
    rows = draw(st.integers(0, 40))
    cols = draw(st.integers(1, 60))
    lengths = draw(
        st.lists(st.sampled_from([0, 0, 1, 2, 3, 5, 8, cols]), min_size=rows, max_size=rows)
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    indptr = np.zeros(rows + 1, dtype=np.int64)
    indices = []
    for r, n in enumerate(lengths):
        n = min(n, cols)
        indices.append(np.sort(rng.choice(cols, size=n, replace=False)))
        indptr[r + 1] = indptr[r] + n
    idx = np.concatenate(indices) if indices else np.zeros(0, dtype=np.int64)
    data = rng.uniform(-1.0, 1.0, len(idx))
    return sp.csr_matrix((data, idx, indptr), shape=(rows, cols))


def _params(name: str, draw_value: int) -> dict[str, int]:
    v = draw_value
    return {
        "thread_mapped": {"NUM_TILES": 4 * v, "NUM_THREADS": v},
        "group_mapped": {"NUM_TILES": 2 * v, "GRID_SIZE": v, "BLOCK_SIZE": [1, 2, 4, 32][v % 4]},
        "group_mapped_block": {"ROWS_PER_GROUP": 1 + v % 3, "GROUP": [64, 128, 256][v % 3]},
        "work_oriented": {"WORK_PER_THREAD": v},
        "merge_path": {"ITEMS_PER_THREAD": v},
    }[name]


def _check(name: str, A: sp.csr_matrix, params: dict[str, int] | None) -> None:
    schedule = lower(_SPEC_CACHE[name], params=params)
    b = bind(schedule, MatrixShape(A.shape[0], A.shape[1], A.nnz))
    x = np.random.default_rng(1).uniform(-1, 1, A.shape[1])
    res = simulate(b, A, x)
    # y equals the dense product
    np.testing.assert_allclose(res.y, A.toarray() @ x, rtol=1e-12, atol=1e-12)
    # every atom has exactly one owner, a launched thread
    assert res.owner.shape == (A.nnz,)
    total = b.launch.total_threads
    assert np.all((res.owner >= 0) & (res.owner < max(total, 1)))
    assert np.all(res.owner < b.workers * b.group_size) or A.nnz == 0
    row = atom_rows(A.indptr)
    kind = b.kind
    if kind == "thread_mapped":
        # all atoms of a row have one owner
        for r in range(A.shape[0]):
            assert len(set(res.owner[row == r])) <= 1
    elif kind == "group_mapped":
        g = b.group_size
        j = np.arange(A.nnz) - A.indptr[row]
        assert np.array_equal(res.owner % g, j % g)  # lane = position mod group size
        for r in range(A.shape[0]):
            assert len(set(res.owner[row == r] // g)) <= 1  # one group per row
    elif kind == "work_oriented":
        counts = np.bincount(res.owner, minlength=b.workers)
        assert counts.max(initial=0) <= b.work_per_thread
        assert np.all(np.diff(res.owner) >= 0)  # chunks are contiguous runs of nonzeros
    else:
        # no thread consumes more than its share of row ends plus atoms
        ends = A.indptr[1:] + np.arange(A.shape[0])
        items = np.bincount(res.owner, minlength=b.workers)
        items += np.bincount(ends // b.work_per_thread, minlength=b.workers)[: b.workers]
        assert items.max(initial=0) <= b.work_per_thread
    if kind in ("thread_mapped", "group_mapped"):
        assert res.stats.atomics == 0 and res.stats.split_rows == 0


@pytest.mark.parametrize("name", sorted(SPECS))
@settings(max_examples=60, deadline=None)
@given(A=csr_matrices(), v=st.integers(1, 9), use_defaults=st.booleans())
def test_simulation_properties(name: str, A: sp.csr_matrix, v: int, use_defaults: bool) -> None:
    _check(name, A, None if use_defaults else _params(name, v))


def test_work_oriented_counts_split_rows_and_atomics() -> None:
    # rows of 5, 0, 3 nonzeros; chunks of 4: row 0 split over chunks 0 and 1, row 2 over 1 only
    A = sp.csr_matrix((np.ones(8), np.arange(8) % 5, [0, 5, 5, 8]), shape=(3, 5))
    b = bind(lower(_SPEC_CACHE["work_oriented"], params={"WORK_PER_THREAD": 4}),
             MatrixShape(3, 5, 8))
    res = simulate(b, A, np.ones(5))
    assert res.owner.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert res.stats.split_rows == 1 and res.stats.atomics == 2
    assert res.stats.max_atoms == 4 and res.stats.imbalance == 1.0


def test_merge_path_owner_follows_merge_items() -> None:
    # rows of 2, 0, 2 nonzeros; items: a0 a1 e0 | e1 a2 a3 | e2 (e = row end); chunks of 3
    A = sp.csr_matrix((np.ones(4), [0, 1, 0, 1], [0, 2, 2, 4]), shape=(3, 2))
    b = bind(lower(_SPEC_CACHE["merge_path"], params={"ITEMS_PER_THREAD": 3}),
             MatrixShape(3, 2, 4))
    res = simulate(b, A, np.ones(2))
    assert res.owner.tolist() == [0, 0, 1, 1]  # a2, a3 are items 4 and 5: chunk 1
    assert b.workers == 3


def test_ten_million_nonzeros_simulate_in_seconds() -> None:
    rows, per_row = 1_000_000, 10
    rng = np.random.default_rng(0)
    indptr = np.arange(0, rows * per_row + 1, per_row, dtype=np.int64)
    # distinct, sorted columns within each row: row r holds r + j * 100_003 (mod rows)
    cols = (np.arange(rows)[:, None] + np.arange(per_row)[None, :] * 100_003) % rows
    indices = np.sort(cols, axis=1).ravel().astype(np.int32)
    data = rng.uniform(-1, 1, rows * per_row)
    A = sp.csr_matrix((data, indices, indptr), shape=(rows, rows))
    A.has_sorted_indices = True
    x = rng.uniform(-1, 1, rows)
    shape = MatrixShape(rows, rows, A.nnz)
    for name in ("thread_mapped", "group_mapped", "work_oriented", "merge_path"):
        start = time.perf_counter()
        res = simulate(bind(lower(_SPEC_CACHE[name]), shape), A, x)
        elapsed = time.perf_counter() - start
        assert elapsed < 20, f"{name} took {elapsed:.1f} s"
        assert res.owner.shape == (A.nnz,)


def test_owner_block_thread_splits_the_global_thread_id_by_the_launch() -> None:
    A = sp.csr_matrix(np.ones((300, 4)))
    b = bind(lower(_SPEC_CACHE["thread_mapped"]), MatrixShape(300, 4, A.nnz))
    res = simulate(b, A, np.ones(4))
    block, thread = res.owner_block_thread()
    assert b.launch.threads_per_block == 128
    assert block[A.indptr[200]] == 1 and thread[A.indptr[200]] == 72  # row 200 = thread 200
    assert np.array_equal(block * 128 + thread, res.owner)
