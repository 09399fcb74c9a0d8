"""Merge-path: equal shares of *merge items* (tile ends plus atoms) per thread, as in
merge-based SpMV. Atom ``a`` of tile ``t`` is merge item ``a + t``; thread ``c`` owns items
``c*I .. c*I + I - 1``, so a long tile is cut into equal pieces and many short tiles share one
thread. Split tiles are combined inside the block by a segmented sum.

Every block's first and last rows are found once per prepared matrix, by the partition kernel
of the same source (:data:`PARTITION_KERNEL`, into ``block_rows``), as cuSPARSE's
``cusparseSpMV_preprocess`` does: a launch reads two numbers where it searched before (on an
H100, rmat-s23 1,613 -> 1,447 us and longrows 579 -> 532 us at 8 and 32 items a thread). In
SpMV with staged tiles in at most :data:`CARRY_MAX_BLOCKS` blocks a row that crosses a block
boundary is *carried*: its pieces are published in the launch stream's scratch, each half
of a value beside a ready flag in one 64-bit word, and the block holding the row's last
nonzero waits for them and adds them in block order (no atomics and no fences, so ``y`` needs
no zeroing, which cost a second launch of 5 to 6 us on small matrices, and every launch gives
the same bits; an earlier protocol, where the last block to count itself in with a fence and an
atomic added them, cost 1.2 to 2.5 us a launch on small graphs, H100). Larger
launches, SpMM and the direct walk of long chunks add split rows atomically into a zeroed
output.

Recognised from ``(M, K): [flatten()]``, ``MK: [x_merge_path(A.I)]`` (our extension to
TeAAL), ``space: [MK1]``, ``time: [MK0]``. ``I`` defaults to 8 items a thread, and to 16 past
2M merge items, where larger shares measured faster (H200, longrows, 134M nonzeros: 953 us at
8, 551 us at 32, when every block still searched its rows); 16 is the most a float64 tile
stages.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from teaal_loops.ir.model import BoundSchedule, Schedule
from teaal_loops.schedules.definition import IntArray, PreparedArray, SplitCost, atom_tiles
from teaal_loops.schedules.flat import DEFAULT_ITEMS_PER_THREAD, FlatSchedule
from teaal_loops.schedules.registry import register_schedule
from teaal_loops.types import KernelParam, MatrixShape

DEFAULT_MERGE_ITEMS_LARGE = 16  # past MERGE_LARGE_ITEMS merge items (rows + nnz)
MERGE_LARGE_ITEMS = 2_000_000
PARTITION_KERNEL = "teaal_merge_partition"  # fills block_rows once per prepared matrix
BLOCK_ROWS = KernelParam(
    "block_rows", "offset_t* __restrict__",
    "per block: rows ending before its first item, and before its end (staged tiles) or "
    "its last item (prepared once by the partition kernel)",
)
SCRATCH = KernelParam(
    "teaal_scratch", "unsigned char* __restrict__",
    "the launch stream's scratch for rows split across blocks (zero between launches)",
)
# SpMV carries split rows across blocks up to this many blocks (two waves of 128-thread blocks
# on an H100): when each carry made a block wait on a fence and an atomic that returns (the
# first protocol), across 40,000 blocks that cost more than zeroing y (H100, float32, best
# merge-path, two suite runs in BENCHMARKS.md: rmat-s23 1,568 us carried, 1,441 us with
# atomics; banded 1,318 against 1,213), while below it the zeroing's second launch dominates.
# With the present protocol (a piece is one store, the row's last block waits for the pieces)
# carrying every launch was still slower on the large classes, as blocks waiting on blocks
# still running hold their SM slots: banded 1,110 -> 1,351 us, longrows 541 -> 582 us,
# rmat-s23 1,448 -> 1,443 us (H100, float32, 8 items a thread, same run; BENCHMARKS.md).
CARRY_MAX_BLOCKS = 4096
STAGED_TILE_MAX_BYTES = 40960  # templates/schedules/merge_path.cu.j2: TEAAL_TILE_BYTES' cap
STAGED_MAX_ITEMS = 32


def staged_items(value_bytes: int, offset_bytes: int, block_threads: int) -> int:
    """``TEAAL_STAGED_IPT`` of the template: the most items a thread whose block stages its
    tile in shared memory (128 bytes of slots a thread, 40 KB a block at most; a slot is the
    larger of a value and an offset; between 1 and 32)."""
    tile_bytes = min(128 * block_threads, STAGED_TILE_MAX_BYTES)
    per_thread = tile_bytes // (max(value_bytes, offset_bytes) * block_threads)
    return max(1, min(STAGED_MAX_ITEMS, per_thread))


def offset_bytes(bound: BoundSchedule) -> int:
    """Bytes of an offset (a tile bound) in this binding's kernel."""
    return 8 if bound.index_bits == 64 else 4


def is_staged(bound: BoundSchedule, value_bytes: int) -> bool:
    """Whether the kernel stages this binding's tiles (else it walks the layout directly)."""
    return bound.work_per_thread <= staged_items(
        value_bytes, offset_bytes(bound), bound.launch.threads_per_block
    )


# SpMV builds with the staged tile sized for the bound chunk (BENCHMARKS.md, "merge-path's
# tile sized for its chunk"; probes on an H100 and an H200, 10 matrices, float32 and float64):
# the default tile holds 32 float32 items a thread whatever the chunk, and its shared memory is
# taken from L1, which caches x's gathers. Sized for 4 or 8 items, float32 rmat-s23 at its best
# chunk went from 0.92-0.93x to 1.02-1.03x the best cuSPARSE and soc-Slashdot0902 from
# 0.89-0.91x to 0.99-1.01x. Float32 tiles of 9 to 16 items also take MORE_BLOCKS_THREADS
# resident threads a SM (registers capped, so 8 loads a step in flight): at 16 items longrows
# 0.88-0.91x -> 0.96-0.97x and ego-Twitter 0.82x -> 0.96-0.97x, the other large classes within
# 1.5%; float64 tiles of 16 items ran up to 1.9x slower that way (the same registers hold half
# as many values), so they keep the default.
MORE_BLOCKS_THREADS = 1536
MORE_BLOCKS_STAGE_UNROLL = 8


def build_options(bound: BoundSchedule, value_bytes: int) -> tuple[str, ...]:
    """The build of a merge-path SpMV launch (see above); none for SpMM or the direct walk."""
    if bound.schedule.form.kind != "spmv" or not is_staged(bound, value_bytes):
        return ()
    items = bound.work_per_thread
    options: tuple[str, ...] = (f"-DTEAAL_TILE_ITEMS={items}",)
    if max(value_bytes, offset_bytes(bound)) == 4 and 8 < items <= 16:  # 4-byte slots
        blocks = max(1, MORE_BLOCKS_THREADS // bound.launch.threads_per_block)
        options += (f"-DTEAAL_MIN_BLOCKS={blocks}",
                    f"-DTEAAL_STAGE_UNROLL_MAX={MORE_BLOCKS_STAGE_UNROLL}")
    return options


class MergePath(FlatSchedule):
    kind = "merge_path"
    template = "schedules/merge_path.cu.j2"
    kernel_name = "teaal_spmv_merge_path"
    mapping_text = (
        "merge-path ((M, K): [flatten()], MK: [x_merge_path(A.I)], space: [MK1], time: [MK0])"
    )
    worker_word = "thread (one chunk of merge items each)"
    split_function = "x_merge_path"
    unit = "merge items (rows + nonzeros)"
    role = "items_per_thread"
    argument = "items_per_thread"
    argument_doc = "merge items per chunk (IPT)"
    workers_doc = "chunks = ceil((rows + nnz) / IPT)"
    combine_text = (
        "rows inside a block are stored (pieces split across its chunks summed in the block); "
        "SpMV with staged tiles: rows split across blocks carried to the last of their blocks, "
        "which stores them (no zeroing); otherwise the output is zeroed first and each block's "
        "(or long chunk's) piece of a split row is one atomicAdd"
    )

    def work_items(self, shape: MatrixShape) -> int:
        return shape.rows + shape.nnz

    def extent_text(self, size: int | str) -> str:
        return f"ceil((rows+nnz)/{size})"

    def default_chunk(self, shape: MatrixShape) -> int:
        if self.work_items(shape) > MERGE_LARGE_ITEMS:
            return DEFAULT_MERGE_ITEMS_LARGE
        return DEFAULT_ITEMS_PER_THREAD

    # The SpMV and SpMM kernels read a prepared partition; SDDMM's (one output per atom, no
    # rows to combine) has its own template and searches nothing across blocks.
    def _partitioned(self, schedule: Schedule) -> bool:
        return schedule.form.kind != "sddmm"

    def kernel_params(self, schedule: Schedule) -> tuple[KernelParam, ...]:
        own = (BLOCK_ROWS,) if self._partitioned(schedule) else ()
        return super().kernel_params(schedule) + own

    def template_context(self, schedule: Schedule, value_type: str) -> dict[str, Any]:
        return {"partition_name": PARTITION_KERNEL}

    def build_options(self, bound: BoundSchedule, value_bytes: int) -> tuple[str, ...]:
        return build_options(bound, value_bytes)

    def prepared_arrays(self, bound: BoundSchedule) -> tuple[PreparedArray, ...]:
        if not self._partitioned(bound.schedule):
            return ()
        return (PreparedArray(BLOCK_ROWS.name, 2 * bound.launch.blocks, PARTITION_KERNEL),)

    def trailing_params(self, schedule: Schedule) -> tuple[KernelParam, ...]:
        return (SCRATCH,) if schedule.form.kind == "spmv" else ()

    def _carries(self, bound: BoundSchedule, value_bytes: int) -> bool:
        """SpMV with staged tiles in at most CARRY_MAX_BLOCKS blocks carries split rows
        between blocks (module docstring); its launches pass a scratch."""
        return (bound.schedule.form.kind == "spmv" and is_staged(bound, value_bytes)
                and bound.launch.blocks <= CARRY_MAX_BLOCKS)

    def scratch_bytes(self, bound: BoundSchedule, value_bytes: int) -> int:
        if not self._carries(bound, value_bytes):
            return 0
        # TeaalCarry: a tail and a head piece a block, each a 64-bit word per 32-bit half
        return 2 * bound.launch.blocks * (value_bytes // 4) * 8

    def zeroes_output(self, bound: BoundSchedule, value_bytes: int) -> bool:
        return not self._carries(bound, value_bytes)

    def owners(self, bound: BoundSchedule, tile_ptr: IntArray) -> IntArray:
        tile = atom_tiles(tile_ptr)
        return (np.arange(len(tile), dtype=np.int64) + tile) // bound.work_per_thread

    def split_cost(self, bound: BoundSchedule, tile_ptr: IntArray, owner: IntArray) -> SplitCost:
        if not len(owner):
            return SplitCost()
        nonempty = np.flatnonzero(np.diff(tile_ptr) > 0)
        first = owner[tile_ptr[nonempty]]
        last = owner[tile_ptr[nonempty + 1] - 1]
        # A tile is split when its tile-end item lies in a later chunk than its first item.
        end_chunk = (tile_ptr[nonempty + 1] + nonempty) // bound.work_per_thread
        is_split = end_chunk != first
        return SplitCost(
            split_tiles=int(np.count_nonzero(is_split)),
            atomics=int(np.sum((last - first + 1)[is_split])),
        )


DEFINITION = register_schedule(MergePath())
