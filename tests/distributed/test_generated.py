"""Shards made from a row-wise family on the rank itself (NumPy standing in for CuPy): the
partition from row lengths, the counts pass, both exchanges' blocks, the halo counts and the
float64 check, each against what the whole matrix gives."""

from __future__ import annotations

import numpy as np
import pytest

from teaal_loops.distributed import DistributedError, partition_rows, plan_all, shard_matrix
from teaal_loops.distributed.generated import (
    ShardBuilder,
    check_rows,
    family_lengths,
    partition_family,
)
from teaal_loops.distributed.halo import HaloCounts, counts_of_all, receive_counts, volumes
from teaal_loops.distributed.model import Fabric, choose_exchange
from teaal_loops.distributed.partition import partition_lengths
from teaal_loops.distributed.shard import ALLGATHER, HALO
from teaal_loops.matrix import rowwise

FAMILIES = [
    "banded:rows=3000,nnz=40000,seed=3",
    "powerlaw:rows=4000,nnz=60000,seed=5",
    "powerlaw:rows=2500,cols=5000,nnz=30000,seed=2",
]


def _same(got: object, want: object) -> None:
    g = got.to_scipy()  # type: ignore[attr-defined]
    assert g.shape == want.shape  # type: ignore[attr-defined]
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(g, name), getattr(want, name)), name


@pytest.mark.parametrize("text", FAMILIES)
@pytest.mark.parametrize("parts", [1, 2, 3, 5])
def test_generated_shards_equal_the_whole_matrix_shards(text: str, parts: int) -> None:
    family = rowwise.parse_family(text)
    A = rowwise.whole_matrix(family, np.float32)
    group = 1 + parts % 3
    part = partition_family(np, family, parts, group_size=group, chunk=999)
    whole = partition_rows(A, parts, group_size=group)
    for name in ("row_cuts", "col_cuts", "cost", "nnz"):
        assert np.array_equal(getattr(part, name), getattr(whole, name)), name
    plans = plan_all(A, part)
    received = []
    for rank in range(parts):
        builder = ShardBuilder(np, family, part, rank, chunk=613)  # chunks cut rows anywhere
        received.append(receive_counts(builder.ghost_cols, part))
        want = shard_matrix(A, part, rank)
        for kind in (HALO, ALLGATHER):
            shard = builder.build(kind, np.float32)
            _same(shard.diag, want.diag)
            _same(shard.offd, want.offd_for(kind, part))
            assert np.array_equal(shard.offd_rows, want.offd_rows)
            assert np.array_equal(shard.ghost_cols, want.ghost_cols)
            assert shard.nnz == want.nnz and shard.ghosts == want.ghosts
            with pytest.raises(ValueError, match="was made for"):
                shard.offd_for(HALO if kind == ALLGATHER else ALLGATHER, part)
    counts = counts_of_all(received)
    for rank in range(parts):
        assert counts[rank].recv_runs() == plans[rank].recv_runs()
        assert counts[rank].send_runs() == plans[rank].send_runs()
    fabric = Fabric()
    for entry in (4, 8):  # the model chooses the same from the counts as from the lists
        by_counts = choose_exchange(counts, volumes(counts, part), entry, fabric)
        by_lists = choose_exchange(plans, volumes(plans, part), entry, fabric)
        assert by_counts == by_lists


def test_the_partition_reads_lengths_chunk_by_chunk() -> None:
    family = rowwise.parse_family("powerlaw:rows=5000,nnz=50000,seed=1")
    lengths = family_lengths(np, family, 0, family.rows, chunk=333)
    assert np.array_equal(lengths, family.lengths(np, 0, family.rows))
    part = partition_lengths(lengths, family.cols, 4, group_size=4)
    assert part.cost.sum() == (-(-lengths // 4) * 4 + 1).sum()
    assert part.nnz.sum() == lengths.sum()


@pytest.mark.parametrize("text", FAMILIES)
def test_the_float64_check_passes_right_rows_and_finds_wrong_ones(text: str) -> None:
    family = rowwise.parse_family(text)
    A = rowwise.whole_matrix(family, np.float32)
    part = partition_family(np, family, 2)
    x = rowwise.operand(np, 5, 0, family.cols, np.float32)
    for rank in range(2):
        shard = ShardBuilder(np, family, part, rank, chunk=700).build(HALO, np.float32)
        lo, hi = shard.rows
        y = (A[lo:hi] @ x).astype(np.float32)  # SciPy in float32: within the bound
        check = check_rows(np, family, shard, 5, y, np.float32, chunk=800)
        assert check.rows == hi - lo and check.overruns == 0 and check.naive_mismatches == 0
        assert check.max_abs_error < 1e-3
        wrong = y.copy()
        wrong[(hi - lo) // 2] += 0.5
        wrong[-1] = np.nan
        bad = check_rows(np, family, shard, 5, wrong, np.float32)
        assert bad.overruns == 2 and bad.naive_mismatches == 2
        other_x = check_rows(np, family, shard, 6, y, np.float32)
        assert other_x.overruns > 0  # the check regenerates x from its seed: a wrong seed fails


def test_malformed_counts_are_refused() -> None:
    with pytest.raises(DistributedError, match="malformed"):
        counts_of_all([[0, 1], [2]])
    with pytest.raises(DistributedError, match="malformed"):
        counts_of_all([[1, 0], [0, 0]])  # a rank receiving from itself
    with pytest.raises(DistributedError, match="malformed"):
        counts_of_all([[0, -1], [0, 0]])
    counts = counts_of_all([[0, 3, 1], [2, 0, 0], [0, 0, 0]])
    assert counts[0].send_runs() == [(1, 0, 2)] and counts[0].recv_runs() == [(1, 0, 3), (2, 3, 4)]
    assert isinstance(counts[2], HaloCounts) and counts[2].ghosts == 0 and counts[2].sends == 1


@pytest.mark.parametrize("width", [1, 3, 8])
def test_the_spmm_check_passes_right_rows_and_finds_wrong_elements(width: int) -> None:
    family = rowwise.parse_family("powerlaw:rows=3000,nnz=40000,seed=8")
    A = rowwise.whole_matrix(family, np.float64)
    B = rowwise.operand(np, 4, 0, family.cols, np.float64, width)
    assert B.shape == (family.cols, width)
    assert np.array_equal(B[10:20], rowwise.operand(np, 4, 10, 20, np.float64, width))
    part = partition_family(np, family, 2)
    shard = ShardBuilder(np, family, part, 1, chunk=500).build(ALLGATHER, np.float64)
    lo, hi = shard.rows
    Z = A[lo:hi] @ B
    check = check_rows(np, family, shard, 4, Z, np.float64, width=width, chunk=700)
    assert check.overruns == 0 and check.naive_mismatches == 0 and check.rows == hi - lo
    wrong = Z.copy()
    wrong[3, width - 1] += 0.5  # one element of one row: counted alone
    wrong[5, 0] = np.inf
    bad = check_rows(np, family, shard, 4, wrong, np.float64, width=width)
    assert bad.overruns == 2 and bad.naive_mismatches == 2
