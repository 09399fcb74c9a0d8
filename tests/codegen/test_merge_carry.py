"""Merge-path's prepared partition and its carries of rows split across blocks, on the CPU.

The emulator runs the partition kernel first (as ``Kernel.prepare`` does), then the product
with ``y`` full of NaN: SpMV with staged tiles must write every row itself, including rows
whose nonzeros span many blocks (pieces carried to the last of their blocks), so a missing
or doubled piece shows. Blocks run one after another here; on the GPU the last block to hand
in a piece may be any of them (tests/gpu/test_merge_carry_gpu.py)."""

from __future__ import annotations

import dataclasses
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.codegen.config import make_config
from teaal_loops.codegen.render import render
from teaal_loops.lowering import simulate
from teaal_loops.schedules import bind, schedule_definition
from teaal_loops.schedules.merge_path import build_options, staged_items
from teaal_loops.types import MatrixShape
from tests.codegen import hand_schedules as hs
from tests.codegen import host_emulation as emu
from tests.codegen.merge_partition import merge_partition

pytestmark = pytest.mark.skipif(emu.CXX is None, reason="no C++ compiler (g++/clang++) found")


def _brute_partition(indptr: np.ndarray, block_items: int, staged: bool) -> np.ndarray:
    rows = len(indptr) - 1
    ends = [int(indptr[r + 1]) + r for r in range(rows)]
    items = rows + int(indptr[-1])
    out = []
    for first in range(0, items, block_items):
        end = min(first + block_items, items)
        out += [sum(e < first for e in ends), sum(e < (end if staged else end - 1) for e in ends)]
    return np.array(out, dtype=np.int64)


@pytest.mark.parametrize("staged", [True, False])
@pytest.mark.parametrize("block_items", [1, 3, 8, 640])
def test_the_partition_counts_the_rows_ending_before_each_block(
    staged: bool, block_items: int
) -> None:
    lengths = np.array([0, 0, 5, 1, 0, 30, 2, 0, 0, 9, 1, 0])
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    got = merge_partition(indptr, block_items, staged)
    np.testing.assert_array_equal(got, _brute_partition(indptr, block_items, staged))


def _long_rows(seed: int, cols: int = 900) -> sp.csr_matrix:
    """Rows of up to 850 nonzeros between short and empty ones: at 1 or 2 items a thread
    (blocks of 128 or 256 items) a long row spans up to 8 blocks, and blocks start inside,
    at the end of, and just after rows."""
    rng = np.random.default_rng(seed)
    lengths = rng.choice([0, 1, 2, 127, 128, 129, 255, 256, 850], size=60)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths])
    return sp.csr_matrix((rng.uniform(-1, 1, len(indices)), indices, indptr),
                         shape=(len(lengths), cols))


@pytest.mark.parametrize(("dtype", "sized"), [
    ("float32", False), ("float64", False), ("float32", True),
], ids=["float32", "float64", "float32-sized"])
@pytest.mark.parametrize("items", [1, 2, 3])
def test_rows_split_across_blocks_are_carried_without_zeroing(
    dtype: str, items: int, sized: bool
) -> None:
    """Also built as the runtime builds it (``sized``: the tile sized for the chunk,
    merge_path.build_options), which changes the tile's capacity, not whose atoms are whose."""
    schedule = hs.merge_path()
    definition = schedule_definition("merge_path")
    for seed in (1, 2):
        A = _long_rows(seed)
        bound = bind(schedule, MatrixShape(rows=A.shape[0], cols=A.shape[1], nnz=A.nnz), None,
                     {"ITEMS_PER_THREAD": items})
        value_bytes = np.dtype(dtype).itemsize
        assert not definition.zeroes_output(bound, value_bytes)
        assert definition.scratch_bytes(bound, value_bytes) > 0
        block_items = bound.launch.threads_per_block * items
        spans = [(A.indptr[r] + r) // block_items != (A.indptr[r + 1] + r - 1) // block_items
                 for r in range(A.shape[0]) if A.indptr[r + 1] > A.indptr[r]]
        assert sum(spans) >= 3, "the matrix must have rows split across blocks"
        widest = max((A.indptr[r + 1] + r - 1) // block_items - (A.indptr[r] + r) // block_items
                     for r in range(A.shape[0]) if A.indptr[r + 1] > A.indptr[r])
        assert widest + 1 >= (8 if items == 1 else 3)  # one row's pieces in that many blocks
        x = np.random.default_rng(seed).uniform(-1, 1, A.shape[1])
        cfg = make_config(schedule, dtype=dtype, bound=bound)
        options = build_options(bound, value_bytes) if sized else ()
        assert (f"-DTEAAL_TILE_ITEMS={items}" in options) == sized
        result = emu.run(cfg, bound, A, x, options=options)
        assert not np.isnan(result.y).any(), "a row was never stored"
        tol = 1e-4 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(result.y, A @ x, rtol=tol, atol=tol)
        np.testing.assert_array_equal(result.owner, simulate(bound, A, x).owner)
        # every published piece was taken and its words cleared: the scratch is zero again,
        # and a third launch over it stores the same bits
        assert len(result.scratch) == definition.scratch_bytes(bound, value_bytes)
        assert not any(result.scratch), "a carried piece was left in the scratch"
        again = emu.run(cfg, bound, A, x, launches=3, options=options)
        np.testing.assert_array_equal(again.y, result.y)
        assert not any(again.scratch)


def test_carried_pieces_are_added_in_block_order() -> None:
    """The block holding a row's last nonzero adds the pieces in block order, the first
    block's first, so every launch gives the same bits whichever block finished first. Row 1
    spans 9 blocks; each block's piece is exact (one nonzero product in it, the rest zero) and
    the pieces are chosen so that any other order of adding them gives another float32."""
    schedule = hs.merge_path()
    cols = 1200
    lengths = np.array([3, 1100, 0, 2])
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.arange(n) for n in lengths])
    values = np.zeros(indptr[-1], np.float32)
    values[indptr[3]:] = 1.0
    bound = bind(schedule, MatrixShape(rows=len(lengths), cols=cols, nnz=len(values)), None,
                 {"ITEMS_PER_THREAD": 1})
    block_items = bound.launch.threads_per_block
    nonzeros = np.arange(indptr[1], indptr[2])
    blocks = (nonzeros + 1) // block_items  # merge item of nonzero a of row 1: a + 1
    pieces = np.array([2.0**24, 1, -(2.0**24), 1, 3, -3, 0.5, 0.25, 0.125], np.float32)
    assert sorted(set(blocks.tolist())) == list(range(len(pieces)))
    for b, piece in enumerate(pieces):
        values[nonzeros[blocks == b][0]] = piece
    A = sp.csr_matrix((values, indices, indptr), shape=(len(lengths), cols))
    x = np.ones(cols, np.float32)
    result = emu.run(make_config(schedule, dtype="float32", bound=bound), bound, A, x)
    in_order = np.float32(0)
    for piece in pieces:
        in_order = np.float32(in_order + piece)
    reversed_order = np.float32(0)
    for piece in pieces[::-1]:
        reversed_order = np.float32(reversed_order + piece)
    assert in_order != reversed_order  # the pieces tell the orders apart
    assert result.y[1] == in_order


def test_spmm_and_long_chunks_keep_atomics_into_a_zeroed_output() -> None:
    definition = schedule_definition("merge_path")
    A = _long_rows(3)
    shape = MatrixShape(rows=A.shape[0], cols=A.shape[1], nnz=A.nnz)
    direct = bind(hs.merge_path(), shape, None, {"ITEMS_PER_THREAD": 33})
    assert definition.zeroes_output(direct, 4) and definition.scratch_bytes(direct, 4) == 0
    staged64 = bind(hs.merge_path(), shape, None, {"ITEMS_PER_THREAD": 17})
    assert definition.zeroes_output(staged64, 8) and not definition.zeroes_output(staged64, 4)


@pytest.mark.parametrize(("dtype", "bits", "threads"), [
    ("float32", 32, 128), ("float64", 32, 128), ("float32", 64, 128), ("float32", 32, 512),
    ("float64", 64, 256), ("float32", 32, 32),
])
def test_staged_items_is_the_template_constant(dtype: str, bits: int, threads: int) -> None:
    """The runtime decides zeroing and scratch from staged_items: it must be the kernel's own
    TEAAL_STAGED_IPT, checked by compiling a static_assert against the rendered source."""
    schedule = dataclasses.replace(hs.merge_path(), block_threads=threads)
    bound = bind(schedule, MatrixShape(rows=10, cols=10, nnz=10), None, {})
    cfg = make_config(schedule, dtype=dtype, bound=bound)
    cfg = dataclasses.replace(cfg, index_bits=bits)
    expected = staged_items(np.dtype(dtype).itemsize, bits // 8, threads)
    source = render(cfg) + (
        f"\nstatic_assert(TEAAL_STAGED_IPT == {expected}, \"staged items\");\n"
        f"static_assert(TEAAL_BLOCK_THREADS == {threads}, \"threads\");\n"
    )
    assert emu.CXX is not None
    done = subprocess.run(
        [emu.CXX, *emu.CXXFLAGS, "-fsyntax-only", "-include", str(emu.SHIM), "-x", "c++", "-"],
        input=source, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize(("dtype", "items"), [
    ("float32", 1), ("float32", 8), ("float32", 16), ("float32", 32), ("float64", 4),
    ("float64", 16),
])
def test_a_sized_build_stages_its_chunk_and_no_more(dtype: str, items: int) -> None:
    """build_options' tile holds exactly the bound chunk a thread (so the kernel and the
    runtime's is_staged still agree), in a shared buffer of that size, and a float32 tile of
    9 to 16 items asks for 12 blocks a SM with 8 loads a step."""
    bound = bind(hs.merge_path(), MatrixShape(rows=10, cols=10, nnz=10), None,
                 {"ITEMS_PER_THREAD": items})
    cfg = make_config(hs.merge_path(), dtype=dtype, bound=bound)
    slot = max(np.dtype(dtype).itemsize, 4)
    more = dtype == "float32" and 8 < items <= 16
    source = render(cfg) + (
        f"\nstatic_assert(TEAAL_STAGED_IPT == {items}, \"staged items\");\n"
        f"static_assert(TEAAL_TILE_BYTES == {items * slot * 128}, \"tile bytes\");\n"
        f"static_assert(TEAAL_STAGE_UNROLL == {min(items, 8 if more else 16)}, \"unroll\");\n"
        f"static_assert(TEAAL_MIN_BLOCKS == {12 if more else 8}, \"blocks\");\n"
    )
    assert emu.CXX is not None
    done = subprocess.run(
        [emu.CXX, *emu.CXXFLAGS, *build_options(bound, np.dtype(dtype).itemsize),
         "-fsyntax-only", "-include", str(emu.SHIM), "-x", "c++", "-"],
        input=source, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_tile_past_the_default_does_not_build() -> None:
    bound = bind(hs.merge_path(), MatrixShape(rows=10, cols=10, nnz=10), None,
                 {"ITEMS_PER_THREAD": 8})
    source = render(make_config(hs.merge_path(), dtype="float64", bound=bound))
    assert emu.CXX is not None
    done = subprocess.run(
        [emu.CXX, *emu.CXXFLAGS, "-DTEAAL_TILE_ITEMS=17", "-fsyntax-only", "-include",
         str(emu.SHIM), "-x", "c++", "-"],
        input=source, capture_output=True, text=True, check=False,
    )
    assert done.returncode != 0 and "at most the default" in done.stderr


def test_past_carry_max_blocks_split_rows_are_added_atomically(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Launches of many blocks pass a null scratch and zero y: the same kernel then adds
    split rows atomically (CARRY_MAX_BLOCKS lowered so that a small matrix takes that path)."""
    import teaal_loops.schedules.merge_path as mp

    monkeypatch.setattr(mp, "CARRY_MAX_BLOCKS", 2)
    schedule = hs.merge_path()
    definition = schedule_definition("merge_path")
    A = _long_rows(4)
    bound = bind(schedule, MatrixShape(rows=A.shape[0], cols=A.shape[1], nnz=A.nnz), None,
                 {"ITEMS_PER_THREAD": 1})
    assert bound.launch.blocks > 2
    assert definition.zeroes_output(bound, 8) and definition.scratch_bytes(bound, 8) == 0
    x = np.random.default_rng(4).uniform(-1, 1, A.shape[1])
    result = emu.run(make_config(schedule, dtype="float64", bound=bound), bound, A, x)
    np.testing.assert_allclose(result.y, A @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(result.owner, simulate(bound, A, x).owner)
