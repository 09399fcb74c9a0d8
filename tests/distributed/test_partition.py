"""The row partition: costs by schedule, cuts balanced within a row, column ownership."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from teaal_loops import matrix
from teaal_loops.distributed import DistributedError, partition_rows, row_costs
from teaal_loops.distributed.partition import balanced_cuts, uniform_partition


def test_row_cost_is_nonzeros_plus_one_and_rounds_up_to_the_group() -> None:
    indptr = np.array([0, 0, 1, 5, 14])  # rows of 0, 1, 4 and 9 nonzeros
    assert row_costs(indptr).tolist() == [1, 2, 5, 10]
    assert row_costs(indptr, group_size=4).tolist() == [1, 5, 5, 13]
    with pytest.raises(DistributedError):
        row_costs(indptr, group_size=0)


@settings(max_examples=60, deadline=None)
@given(
    costs=st.lists(st.integers(min_value=1, max_value=50), min_size=0, max_size=60),
    parts=st.integers(min_value=1, max_value=9),
)
def test_every_part_is_within_one_row_of_its_share(costs: list[int], parts: int) -> None:
    cuts = balanced_cuts(costs, parts)
    assert len(cuts) == parts + 1 and cuts[0] == 0 and cuts[-1] == len(costs)
    assert np.all(np.diff(cuts) >= 0)
    prefix = np.concatenate(([0], np.cumsum(costs)))
    sums = np.diff(prefix[cuts])
    share = prefix[-1] / parts
    biggest = max(costs, default=0)
    assert sums.max(initial=0) <= share + biggest + 1e-9


def test_skewed_rows_are_balanced_by_cost_not_by_count() -> None:
    # the first tenth of the rows hold most of the nonzeros
    A = matrix.synthetic("longrows", rows=4000, nnz=60000, seed=3)
    part = partition_rows(A, 4)
    by_rows = uniform_partition(A.shape[0], A.shape[1], 4)
    costs = row_costs(A.indptr)
    prefix = np.concatenate(([0], np.cumsum(costs)))
    rows_only = np.diff(prefix[by_rows.row_cuts])
    assert part.imbalance < 1.05
    assert rows_only.max() / rows_only.mean() > part.imbalance
    assert int(part.nnz.sum()) == A.nnz and int(part.cost.sum()) == int(costs.sum())


def test_square_matrices_own_x_like_y_and_rectangular_ones_scale() -> None:
    A = matrix.synthetic("uniform", rows=1000, nnz=8000, seed=1)
    part = partition_rows(A, 3)
    assert part.col_cuts.tolist() == part.row_cuts.tolist()
    R = sp.random(100, 300, density=0.05, format="csr", random_state=2)
    rect = partition_rows(R, 4)
    assert rect.col_cuts[0] == 0 and rect.col_cuts[-1] == 300
    assert np.all(np.diff(rect.col_cuts) >= 0)


def test_owners_skip_empty_ranks_and_padded_positions_are_distinct() -> None:
    A = sp.csr_matrix(np.eye(2))
    part = partition_rows(A, 4)  # more ranks than rows: some own nothing
    assert int(part.row_counts.sum()) == 2 and int((part.row_counts == 0).sum()) == 2
    owners = part.owner_of_cols([0, 1])
    for col, owner in zip([0, 1], owners, strict=True):
        lo, hi = part.cols_of(int(owner))
        assert lo <= col < hi
    B = matrix.synthetic("uniform", rows=103, nnz=900, seed=5)
    p = partition_rows(B, 5)
    pos = p.padded_index(np.arange(103))
    assert len(set(pos.tolist())) == 103 and pos.max() < 5 * p.max_owned_cols


@pytest.mark.parametrize("bad", [0, -1, 5000, 2.5, True])
def test_bad_rank_counts_are_refused(bad: object) -> None:
    with pytest.raises(DistributedError):
        partition_rows(sp.csr_matrix(np.eye(3)), bad)  # type: ignore[arg-type]
