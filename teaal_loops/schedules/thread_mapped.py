"""Thread-mapped: one tile per thread (the space levels of the tile rank pick the thread), its
atoms a sequential loop, the result stored once (added atomically on a scattering layout).

Recognised from a spec whose tile rank is split by ``uniform_shape``/``nway_shape`` (or not
split) and whose atom rank is not split and lies in ``time``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from teaal_loops.ir.mapping import MappingContext
from teaal_loops.ir.model import BoundSchedule, Combine, GpuLevel, RankBinding, Schedule
from teaal_loops.schedules.definition import IntArray, Lowered, atom_tiles
from teaal_loops.schedules.registry import register_schedule
from teaal_loops.schedules.row_tiling import RowTiledSchedule, lower_tiling
from teaal_loops.types import Launch, MatrixShape, ceil_div


class ThreadMapped(RowTiledSchedule):
    kind = "thread_mapped"
    template = "schedules/thread_mapped.cu.j2"
    kernel_name = "teaal_spmv_thread_mapped"
    mapping_text = "thread-mapped (M: [uniform_shape(..)...], space: tile levels, time: [..., K])"
    worker_word = "thread"
    combine_text = "plain store: every row has one owning thread"
    walks_whole_tiles = True

    def claims(self, ctx: MappingContext) -> bool:
        return not ctx.flat_parts and ctx.atom_rank not in ctx.parts

    def lower(self, ctx: MappingContext) -> Lowered:
        tiling, ranks, roles = lower_tiling(ctx)
        atom = ctx.atom_rank
        if atom in ctx.space:
            raise ctx.refuse(
                f"rank {atom} (the nonzeros of a row) is in space without a partitioning, which "
                "would need a reduction across arbitrary threads",
                key_path=ctx.key("spacetime", "space"),
            )
        loop = RankBinding(
            atom, atom, GpuLevel.LOOP, "row length",
            time_index=ctx.time.index(atom) if atom in ctx.time else None,
            style=ctx.styles.get(atom, "pos"),
        )
        combine = Combine.ATOMIC if ctx.scatter else Combine.STORE
        return Lowered(ranks=(*ranks, loop), combine=combine, roles=roles, tiling=tiling)

    def bind(
        self, schedule: Schedule, shape: MatrixShape, values: Mapping[str, int | None]
    ) -> BoundSchedule:
        widths, workers, resolved = self.bind_tiling(schedule, shape.rows, values)
        threads = schedule.block_threads
        launch = Launch(blocks=ceil_div(workers, threads) if workers else 0,
                        threads_per_block=threads)
        return BoundSchedule(
            schedule=schedule, matrix=shape, params=resolved, launch=launch, workers=workers,
            sizes=tuple(widths),
        )

    def owners(self, bound: BoundSchedule, tile_ptr: IntArray) -> IntArray:
        rows = len(tile_ptr) - 1
        tile = atom_tiles(tile_ptr)
        return self.tile_workers(bound, rows)[tile]

    def thread_of_stamp(
        self, bound: BoundSchedule, names: Sequence[str], stamp: Sequence[tuple[int, Any]]
    ) -> int:
        worker, _ = self.worker_of_stamp(bound, names, stamp)
        return worker


DEFINITION = register_schedule(ThreadMapped())
