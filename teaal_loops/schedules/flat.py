"""What work-oriented and merge-path share: chunks of the flattened ``(M, K)`` rank.

``(M, K): [flatten()]`` then ``MK: [split(A.W)]`` with ``MK1`` in space (one thread per chunk)
and ``MK0`` in time. A worker owns a fixed share of work rather than whole tiles, so a tile
whose atoms span several chunks is *split*: each thread holding part of it adds one atomic
partial sum (``y`` is zeroed first), and whole tiles are stored.

A reference stamp names the chunk rank by *position*: the position of a chunk is its index,
which is the owning thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from teaal_loops.errors import ParameterError
from teaal_loops.ir.mapping import MappingContext
from teaal_loops.ir.model import BoundSchedule, Combine, GpuLevel, RankBinding, Schedule
from teaal_loops.schedules.definition import Lowered, ScheduleDefinition
from teaal_loops.types import KernelParam, Launch, MatrixShape, ceil_div

DEFAULT_ITEMS_PER_THREAD = 8


class FlatSchedule(ScheduleDefinition):
    owns_chunks = True
    split_function: ClassVar[str]  # the partitioning function of MK: uniform_occupancy, ...
    unit: ClassVar[str]  # what a chunk counts, for explain
    role: ClassVar[str]  # the role of the chunk-size parameter
    argument: ClassVar[str]  # the kernel argument carrying the chunk size
    argument_doc: ClassVar[str]
    workers_doc: ClassVar[str]
    combine_text = (
        "output zeroed first; rows inside one chunk are stored, rows split across chunks get "
        "one atomicAdd per chunk"
    )

    def work_items(self, shape: MatrixShape) -> int:
        """The items chunks are cut from (atoms; merge-path adds the tile ends)."""
        return shape.nnz

    def extent_text(self, size: int | str) -> str:
        return f"ceil(nnz/{size})"

    def default_chunk(self, shape: MatrixShape) -> int:
        return DEFAULT_ITEMS_PER_THREAD

    def claims(self, ctx: MappingContext) -> bool:
        if not ctx.flat_parts:
            return False
        split = ctx.parts.get(ctx.flat_parts[0].name)
        kinds = [f.kind for f in split.functions] if split is not None else []
        return self.split_function in kinds or (
            self.split_function == "uniform_occupancy" and "x_merge_path" not in kinds
        )

    def lower(self, ctx: MappingContext) -> Lowered:
        flat = ctx.flat_parts[0]
        expected = (ctx.tile_rank, ctx.atom_rank)
        key = ctx.key("partitioning")
        if len(ctx.flat_parts) != 1 or flat.ranks != expected:
            raise ctx.refuse(
                f"flattening {flat.ranks} is not supported; a flat schedule flattens the "
                f"matrix's rank order ({', '.join(expected)}) into {''.join(expected)}",
                key_path=key,
            )
        for other in expected:
            if other in ctx.parts:
                raise ctx.refuse(
                    f"rank {other} is both split on its own and flattened",
                    key_path=ctx.key("partitioning", other),
                )
        name = flat.name
        split = ctx.parts.get(name)
        if split is None or len(split.functions) != 1 or split.functions[0].kind not in (
            "uniform_occupancy",
            "x_merge_path",
        ):
            raise ctx.refuse(
                f"the flattened rank {name} must be split by one "
                f"uniform_occupancy({ctx.matrix}.W) or x_merge_path({ctx.matrix}.I)",
                key_path=ctx.key("partitioning", name),
            )
        fn = split.functions[0]
        if fn.leader not in (None, ctx.matrix):
            raise ctx.refuse(
                f"{fn.text} is led by {fn.leader}; chunks are counted in nonzeros of "
                f"{ctx.matrix}",
                key_path=ctx.key("partitioning", name),
            )
        hi, lo = f"{name}1", f"{name}0"
        if list(ctx.space) != [hi] or lo not in ctx.time:
            raise ctx.refuse(
                f"a flat schedule needs space: [{hi}] (one thread per chunk) and {lo} in time; "
                f"the spec has space: [{', '.join(ctx.space)}]",
                key_path=ctx.key("spacetime"),
            )
        size = fn.size if fn.size is not None else DEFAULT_ITEMS_PER_THREAD
        roles = {size: self.role} if isinstance(size, str) else {}
        ranks = (
            RankBinding(hi, name, GpuLevel.WORKER, self.extent_text(size), space_index=0,
                        style=ctx.styles.get(hi, "pos")),
            RankBinding(lo, name, GpuLevel.LOOP, f"{size} {self.unit}",
                        time_index=ctx.time.index(lo), style=ctx.styles.get(lo, "pos")),
        )
        return Lowered(ranks=ranks, combine=Combine.ATOMIC, roles=roles, work_per_thread=size)

    def bind(
        self, schedule: Schedule, shape: MatrixShape, values: Mapping[str, int | None]
    ) -> BoundSchedule:
        size = schedule.work_per_thread
        per_thread = size if isinstance(size, int) else values.get(size or "")
        if per_thread is None:
            per_thread = self.default_chunk(shape)
        if per_thread < 1:
            raise ParameterError(f"{size} must be positive")
        resolved = {size: per_thread} if isinstance(size, str) else {}
        workers = ceil_div(self.work_items(shape), per_thread)
        threads = schedule.block_threads
        return BoundSchedule(
            schedule=schedule,
            matrix=shape,
            params=resolved,
            launch=Launch(blocks=ceil_div(workers, threads), threads_per_block=threads),
            workers=workers,
            work_per_thread=per_thread,
        )

    def thread_of_stamp(
        self, bound: BoundSchedule, names: Sequence[str], stamp: Sequence[tuple[int, Any]]
    ) -> int:
        return int(stamp[0][0])

    def kernel_params(self, schedule: Schedule) -> tuple[KernelParam, ...]:
        return (
            KernelParam(self.argument, "offset_t", self.argument_doc),
            KernelParam("workers", "offset_t", self.workers_doc),
        )

    def kernel_arguments(self, bound: BoundSchedule) -> dict[str, int]:
        return {self.argument: bound.work_per_thread, "workers": bound.workers}

    def header_lines(self, schedule: Schedule, group: int) -> list[str]:
        return [f"work per thread: {schedule.work_per_thread}"]

    def default_sizes(self, bound: BoundSchedule) -> dict[str, int]:
        return {"work_per_thread": bound.work_per_thread}
