"""Group-mapped: one tile per group of ``G`` lanes (a sub-warp, a warp or a block), lane ``l``
owning the tile's atoms ``l, l + G, l + 2G, ...``; the lanes reduce, one lane stores.

Recognised from a spec that splits the atom rank ``K: [uniform_occupancy(A.G)]`` with ``K0``
in space (last: lanes are the fastest-varying part of the thread index) and ``K1`` in time.
``G`` defaults to 32 (one warp) and is compiled into the kernel. Block groups (``G`` above the
block size) launch ``G`` threads a block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from teaal_loops.errors import ParameterError
from teaal_loops.ir.mapping import MappingContext
from teaal_loops.ir.model import BoundSchedule, Combine, GpuLevel, RankBinding, Schedule
from teaal_loops.schedules.definition import IntArray, Lowered, atom_tiles
from teaal_loops.schedules.registry import register_schedule
from teaal_loops.schedules.row_tiling import RowTiledSchedule, lower_tiling
from teaal_loops.types import Launch, MatrixShape, ceil_div

DEFAULT_GROUP_SIZE = 32
MAX_GROUP_SIZE = 1024


class GroupMapped(RowTiledSchedule):
    kind = "group_mapped"
    template = "schedules/group_mapped.cu.j2"
    kernel_name = "teaal_spmv_group_mapped"
    mapping_text = (
        "group-mapped (K: [uniform_occupancy(A.G)], space: [..tile levels.., K0], time: [..., K1])"
    )
    worker_word = "group"
    combine_text = "the group's lanes reduce their partial sums, one lane stores the row"

    def template_context(self, schedule: Schedule, value_type: str) -> dict[str, Any]:
        # float64 SpMV: two steps of loads in flight, not four, and the atoms read through L1
        # (BENCHMARKS.md, "group-mapped float64"): banded 1,400 -> 1,192 us (H100) and 967 ->
        # 851 us (H200) at 8 lanes a row; float32 keeps four streaming steps (two lost 23%).
        f64_spmv = schedule.form.kind == "spmv" and value_type == "double"
        context = super().template_context(schedule, value_type)
        context["default_unroll"] = 2 if f64_spmv else 4
        if f64_spmv:
            context["atoms_through_l1"] = True
        return context

    def claims(self, ctx: MappingContext) -> bool:
        return not ctx.flat_parts and ctx.atom_rank in ctx.parts

    def lower(self, ctx: MappingContext) -> Lowered:
        tiling, ranks, roles = lower_tiling(ctx)
        atom, key = ctx.atom_rank, ctx.key("partitioning", ctx.atom_rank)
        fns = ctx.parts[atom].functions
        if len(fns) != 1 or fns[0].kind != "uniform_occupancy":
            raise ctx.refuse(
                f"rank {atom} is split by {', '.join(f.text or f.kind for f in fns)}; a "
                f"group-mapped schedule takes exactly {atom}: "
                f"[uniform_occupancy({ctx.matrix}.G)]",
                key_path=key,
            )
        fn = fns[0]
        if fn.leader not in (None, ctx.matrix):
            raise ctx.refuse(
                f"uniform_occupancy on {atom} is led by {fn.leader}; the lanes of a group share "
                f"the nonzeros of the matrix {ctx.matrix}",
                key_path=key,
            )
        hi, lo = f"{atom}1", f"{atom}0"
        self._check_spacetime(ctx, [r.name for r in ranks], hi, lo)
        size = fn.size if fn.size is not None else DEFAULT_GROUP_SIZE
        roles = dict(roles)
        if isinstance(size, str):
            roles[size] = "group_size"
        styles = ctx.styles
        lanes = (
            RankBinding(hi, atom, GpuLevel.LOOP, f"ceil(row length/{size})",
                        time_index=ctx.time.index(hi), style=styles.get(hi, "pos")),
            RankBinding(lo, atom, GpuLevel.LANE, str(size), space_index=ctx.space.index(lo),
                        style=styles.get(lo, "pos")),
        )
        return Lowered(
            ranks=(*ranks, *lanes), combine=Combine.GROUP_REDUCE, roles=roles, tiling=tiling,
            group_size=size,
        )

    def _check_spacetime(
        self, ctx: MappingContext, tile_ranks: list[str], hi: str, lo: str
    ) -> None:
        space, time = ctx.space, ctx.time
        if lo not in space or hi not in time:
            raise ctx.refuse(
                f"rank {lo} must be in space (the lane) and {hi} in time (each lane's loop over "
                f"chunks of the row); the spec has {lo} in {'space' if lo in space else 'time'} "
                f"and {hi} in {'space' if hi in space else 'time'}",
                key_path=ctx.key("spacetime"),
            )
        if space[-1] != lo:
            raise ctx.refuse(
                f"rank {lo} must be the last space rank: lanes are the fastest-varying part of "
                "the thread index, so a group's lanes are adjacent threads of one warp or block",
                key_path=ctx.key("spacetime", "space"),
            )
        # The kernel walks a tile's atoms inside the tile: the occupancy split of the atom rank
        # is taken per tile, which TeAAL means only when every tile level is outside K1.
        order = list(ctx.spec.loop_order_of(ctx.output))
        if hi in order and any(t in order and order.index(t) > order.index(hi)
                               for t in tile_ranks):
            raise ctx.refuse(
                f"rank {hi} comes before a tile rank in the loop order "
                f"[{', '.join(order)}]: a group-mapped schedule splits each tile's atoms, so "
                f"every level of {ctx.tile_rank} must be outside {hi}",
                key_path=ctx.key("loop-order"),
            )

    def bind(
        self, schedule: Schedule, shape: MatrixShape, values: Mapping[str, int | None]
    ) -> BoundSchedule:
        widths, workers, resolved = self.bind_tiling(schedule, shape.rows, values)
        group = self._group(schedule, values)
        if isinstance(schedule.group_size, str):
            resolved[schedule.group_size] = group
        threads = schedule.block_threads
        tpb = group if group > threads else threads
        total = workers * group
        launch = Launch(blocks=ceil_div(total, tpb) if total else 0, threads_per_block=tpb)
        return BoundSchedule(
            schedule=schedule, matrix=shape, params=resolved, launch=launch, workers=workers,
            sizes=tuple(widths), group_size=group,
        )

    def _group(self, schedule: Schedule, values: Mapping[str, int | None]) -> int:
        size = schedule.group_size
        group = size if isinstance(size, int) else values.get(size or "")
        group = DEFAULT_GROUP_SIZE if group is None else group
        if group < 1 or group > MAX_GROUP_SIZE or group & (group - 1):
            raise ParameterError(
                f"group size {size} must be a power of two in [1, {MAX_GROUP_SIZE}], got {group}",
                key_path=f"mapping.partitioning.{schedule.output}.{schedule.atom_rank}",
            )
        return group

    def owners(self, bound: BoundSchedule, tile_ptr: IntArray) -> IntArray:
        ptr = np.asarray(tile_ptr, dtype=np.int64)
        tile = atom_tiles(ptr)
        atom = np.arange(len(tile), dtype=np.int64)
        lane = (atom - ptr[tile]) % bound.group_size
        return self.tile_workers(bound, len(ptr) - 1)[tile] * bound.group_size + lane

    def thread_of_stamp(
        self, bound: BoundSchedule, names: Sequence[str], stamp: Sequence[tuple[int, Any]]
    ) -> int:
        worker, lane = self.worker_of_stamp(bound, names, stamp)
        return worker * bound.group_size + lane

    def compile_time_group(self, schedule: Schedule, bound: BoundSchedule | None) -> int:
        """From the binding, else the schedule's parameter, else the default (one warp)."""
        if bound is not None:
            return bound.group_size
        value = schedule.param_value(schedule.group_size)
        return DEFAULT_GROUP_SIZE if value is None else value

    def threads_per_block(self, schedule: Schedule, group: int) -> int:
        """Block groups larger than the block size launch G threads a block."""
        return max(schedule.block_threads, group)

    def check_structure(self, schedule: Schedule, group: int) -> None:
        bt = schedule.block_threads
        if group < 1 or group & (group - 1) or group > MAX_GROUP_SIZE:
            raise ParameterError(
                f"group size {group}: must be a power of two between 1 and {MAX_GROUP_SIZE}"
            )
        if group <= bt and bt % group:
            raise ParameterError(f"group size {group} does not divide block_threads={bt}")

    def header_lines(self, schedule: Schedule, group: int) -> list[str]:
        return [*super().header_lines(schedule, group), f"group size: G = {group} lanes"]

    def explain_lines(self, schedule: Schedule) -> list[str]:
        return [f"group:     {schedule.group_size} lanes"]


DEFINITION = register_schedule(GroupMapped())
