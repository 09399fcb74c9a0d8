"""Merge-path SpMV on the GPU: the prepared partition and the carries of rows split across
blocks (no zeroing of y, no atomics on it). On the device any block may be the last to hand
in its piece, so these check what the CPU emulation cannot: the same bits at every launch,
the counters left at zero for the next launch, one scratch per stream, graph replays, and
the partition kernel against the host's."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import teaal_loops.pipeline as pipeline
from tests.codegen.merge_partition import merge_partition
from tests.conftest import REPO

pytestmark = pytest.mark.gpu


def _long_rows(rows: int = 4000, seed: int = 3) -> sp.csr_matrix:
    """Mostly short rows and a few of 3,000 to 60,000 nonzeros, each spanning many blocks."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 12, rows)
    lengths[rng.choice(rows, 12, replace=False)] = rng.integers(3000, 60000, 12)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = rng.integers(0, 5000, int(indptr[-1]))
    return sp.csr_matrix((rng.uniform(-1, 1, len(indices)), indices, indptr),
                         shape=(rows, 5000))


def _assert_within_bound(got: np.ndarray, A: sp.csr_matrix, x: np.ndarray, dtype: str) -> None:
    """|got - A x| <= n eps (|A| |x|) per row, n the longest row (Wilkinson's bound)."""
    ref = A.astype(np.float64) @ x.astype(np.float64)
    bound = abs(A).astype(np.float64) @ abs(x).astype(np.float64)
    longest = int(np.diff(A.indptr).max())
    assert np.all(np.abs(got - ref) <= 1.01 * longest * np.finfo(dtype).eps * bound + 1e-30)


def _kernel(dtype: str, items: int) -> object:
    return pipeline.compile(REPO / "specs" / "merge_path.yaml", dtype=dtype,
                            params={"ITEMS_PER_THREAD": items})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("items", [1, 4, 16])
def test_split_rows_are_carried_the_same_at_every_launch(dtype: str, items: int) -> None:
    import cupy

    A = _long_rows()
    k = _kernel(dtype, items)
    prepared = k.prepare(A)
    assert not prepared.accumulates and prepared.scratch is not None
    block_items = prepared.block[0] * items
    expected = merge_partition(A.indptr, block_items, True)
    np.testing.assert_array_equal(prepared.leading_args[-1].get(), expected)  # block_rows
    x = cupy.asarray(np.random.default_rng(1).uniform(-1, 1, A.shape[1]).astype(dtype))
    first = k(prepared, x).get()
    y = cupy.full(A.shape[0], np.nan, dtype=dtype)  # launch_into does not zero it
    for _ in range(20):
        k.launch_into(prepared, x, y)
        np.testing.assert_array_equal(y.get(), first)
    _assert_within_bound(first, A, x.get(), dtype)


def test_each_stream_has_its_own_scratch_and_graphs_replay() -> None:
    import cupy

    A = _long_rows(seed=5)
    k = _kernel("float32", 2)
    prepared = k.prepare(A)
    x = cupy.asarray(np.random.default_rng(2).uniform(-1, 1, A.shape[1]).astype(np.float32))
    want = k(prepared, x).get()
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(3)]
    outs = [cupy.full(A.shape[0], np.nan, dtype=np.float32) for _ in streams]
    for _ in range(30):  # launches on three streams overlap: each must use its own counters
        for s, y in zip(streams, outs, strict=True):
            with s:
                k.launch_into(prepared, x, y)
    for s, y in zip(streams, outs, strict=True):
        s.synchronize()
        np.testing.assert_array_equal(y.get(), want)
    assert prepared.scratch.streams >= 4  # the current stream's and the three
    y = cupy.full(A.shape[0], np.nan, dtype=np.float32)
    graph = k.capture(prepared, x, y)
    for _ in range(5):
        graph.launch()
    cupy.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(y.get(), want)


def test_matrices_with_empty_rows_and_no_nonzeros() -> None:
    import cupy

    k = _kernel("float64", 1)
    for A in (sp.csr_matrix((500, 7)), sp.csr_matrix(np.eye(300)),
              sp.random(3000, 40, density=0.001, format="csr", random_state=1)):
        x = cupy.asarray(np.random.default_rng(0).uniform(-1, 1, A.shape[1]))
        np.testing.assert_allclose(k(A, x).get(), A @ x.get(), rtol=1e-12, atol=1e-12)


def test_launches_of_many_blocks_add_split_rows_atomically(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cupy

    import teaal_loops.schedules.merge_path as mp

    monkeypatch.setattr(mp, "CARRY_MAX_BLOCKS", 0)
    A = _long_rows(seed=8)
    k = _kernel("float32", 2)
    prepared = k.prepare(A)
    assert prepared.accumulates and prepared.scratch.nbytes == 0
    x = cupy.asarray(np.random.default_rng(3).uniform(-1, 1, A.shape[1]).astype(np.float32))
    for got in (k(prepared, x), k(A, x)):
        _assert_within_bound(got.get(), A, x.get(), "float32")
