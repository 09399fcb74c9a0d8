"""Shards (diagonal and off-diagonal blocks) and halo lists, checked against the whole matrix."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops import matrix
from teaal_loops.distributed import ALLGATHER, HALO, partition_rows, plan_all, shard_matrix
from teaal_loops.distributed.halo import ghost_columns, plan_by_asking, volumes

CASES = [("banded", 3), ("rmat", 4), ("emptyrows", 3), ("uniform", 5)]


def _matrix(kind: str) -> sp.csr_matrix:
    return matrix.synthetic(kind, rows=1500, nnz=12000, seed=11)


@pytest.mark.parametrize(("kind", "parts"), CASES)
def test_blocks_rebuild_the_rows_and_ghosts_lie_outside(kind: str, parts: int) -> None:
    A = _matrix(kind)
    part = partition_rows(A, parts)
    x = np.random.default_rng(0).uniform(-1, 1, A.shape[1])
    want = A @ x
    for r in range(parts):
        s = shard_matrix(A, part, r)
        lo, hi = s.rows
        clo, chi = s.cols
        assert np.all(np.diff(s.ghost_cols) > 0)
        assert not np.any((s.ghost_cols >= clo) & (s.ghost_cols < chi))
        y = s.diag @ x[clo:chi]
        y[s.offd_rows] += s.offd @ x[s.ghost_cols]
        np.testing.assert_allclose(y, want[lo:hi], rtol=1e-12, atol=1e-12)
        # the allgather form indexes the padded gather of every rank's block
        block = part.max_owned_cols
        gathered = np.zeros(parts * block)
        for q in range(parts):
            a, b = part.cols_of(q)
            gathered[q * block : q * block + (b - a)] = x[a:b]
        np.testing.assert_allclose(
            s.offd_for(ALLGATHER, part) @ gathered, s.offd @ x[s.ghost_cols], rtol=1e-12
        )
        assert s.offd_for(HALO, part) is s.offd
        assert s.diag.has_canonical_format and s.offd.has_canonical_format


@pytest.mark.parametrize(("kind", "parts"), CASES)
def test_every_send_list_is_the_peers_receive_run(kind: str, parts: int) -> None:
    A = _matrix(kind)
    part = partition_rows(A, parts)
    plans = plan_all(A, part)
    x = np.random.default_rng(1).uniform(-1, 1, A.shape[1])
    blocks = [x[slice(*part.cols_of(r))] for r in range(parts)]
    for q, plan in enumerate(plans):
        ghosts = ghost_columns(A, part, q)
        buffer = np.full(plan.ghosts, np.nan)
        for peer, a, b in plan.recv_runs():  # what the peer packs from its own block
            sender = plans[peer]
            (i,) = np.flatnonzero(sender.send_peers == q)
            index = sender.send_index[sender.send_offsets[i] : sender.send_offsets[i + 1]]
            buffer[a:b] = blocks[peer][index]
        np.testing.assert_array_equal(buffer, x[ghosts])
    v = volumes(plans, part)
    assert v.halo_total == int(v.sends.sum())  # every entry received was sent once
    assert v.allgather_recv == (parts - 1) * part.max_owned_cols


def test_asking_the_peers_gives_the_plan_of_the_whole_matrix() -> None:
    A = _matrix("rmat")
    part = partition_rows(A, 4)
    plans = plan_all(A, part)
    outgoing: dict[int, list[list[int]]] = {}

    def capture(rank: int) -> Any:  # first round: every rank's requests
        def alltoall(out: list[list[int]]) -> list[list[int]]:
            outgoing[rank] = out
            return [[] for _ in range(part.parts)]
        return alltoall

    def deliver(rank: int) -> Any:  # second round: what each peer asked of this rank
        return lambda out: [outgoing[q][rank] for q in range(part.parts)]

    for r in range(part.parts):
        plan_by_asking(r, ghost_columns(A, part, r), part, capture(r))
    for r in range(part.parts):
        asked = plan_by_asking(r, ghost_columns(A, part, r), part, deliver(r))
        assert asked.same_as(plans[r])


def test_a_banded_matrix_has_a_thin_halo() -> None:
    A = matrix.synthetic("banded", rows=4000, nnz=40000, seed=2)
    part = partition_rows(A, 4)
    v = volumes(plan_all(A, part), part)
    assert v.ghosts.max() < 50 < v.allgather_recv
    assert v.recv_peers.max() <= 2  # only the neighbours
