"""Merge-path: equal shares of *merge items* (tile ends plus atoms) per thread, as in
merge-based SpMV. Atom ``a`` of tile ``t`` is merge item ``a + t``; thread ``c`` owns items
``c*I .. c*I + I - 1``, so a long tile is cut into equal pieces and many short tiles share one
thread. Split tiles are combined inside the block (at most two atomics a block).

Recognised from ``(M, K): [flatten()]``, ``MK: [x_merge_path(A.I)]`` (our extension to
TeAAL), ``space: [MK1]``, ``time: [MK0]``. ``I`` defaults to 8 items a thread, and to 16 past
2M merge items: the staged kernel searches once per block, and larger shares halve those
searches (H200, longrows, 134M nonzeros: 953 us at 8, 551 us at 32); 16 is the most a float64
tile stages.
"""

from __future__ import annotations

import numpy as np

from teaal_loops.ir.model import BoundSchedule
from teaal_loops.schedules.definition import IntArray, SplitCost, atom_tiles
from teaal_loops.schedules.flat import DEFAULT_ITEMS_PER_THREAD, FlatSchedule
from teaal_loops.schedules.registry import register_schedule
from teaal_loops.types import MatrixShape

DEFAULT_MERGE_ITEMS_LARGE = 16  # past MERGE_LARGE_ITEMS merge items (rows + nnz)
MERGE_LARGE_ITEMS = 2_000_000


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

    def work_items(self, shape: MatrixShape) -> int:
        return shape.rows + shape.nnz

    def extent_text(self, size: int | str) -> str:
        return f"ceil((rows+nnz)/{size})"

    def default_chunk(self, shape: MatrixShape) -> int:
        if self.work_items(shape) > MERGE_LARGE_ITEMS:
            return DEFAULT_MERGE_ITEMS_LARGE
        return DEFAULT_ITEMS_PER_THREAD

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
