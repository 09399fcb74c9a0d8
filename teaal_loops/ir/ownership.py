"""Which GPU thread owns an atom: from the IR's binding of space ranks to threads.

The HiFiber reference records, for every multiply, the (position, coordinate) of each space rank
in the spec's space order. This module maps such a stamp to the global thread id that the IR
binds it to, so the reference, the CPU simulation and the CUDA trace can be compared atom by
atom.

* Tile-rank levels (``uniform_shape`` splits of ``M``) are mapped through their *coordinates*:
  the coordinate of a level-``j`` element is the first row of its tile and has the same digits
  at levels ``>= j`` as every row inside it, so the digit formula of :class:`RowTiling` applies.
* The lane rank ``K0`` and the chunk rank ``MK1`` are mapped through their *positions*: the
  position within an occupancy chunk is the lane, the position of a chunk is its index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from teaal_loops.errors import ValidationError
from teaal_loops.ir.bind import row_digits, tile_extents
from teaal_loops.ir.model import BoundSchedule, GpuLevel, ScheduleKind


def space_ranks(bound: BoundSchedule) -> list[str]:
    """The spec's space ranks in space order."""
    ranks = [r for r in bound.schedule.ranks if r.space_index is not None]
    return [r.name for r in sorted(ranks, key=lambda r: r.space_index or 0)]


def thread_of_space_stamp(bound: BoundSchedule, space: Sequence[tuple[int, Any]]) -> int:
    """Global thread id bound to a space stamp ``[(pos, coord), ...]`` (space order)."""
    names = space_ranks(bound)
    if len(space) != len(names):
        raise ValidationError(
            f"space stamp {tuple(space)} has {len(space)} entries, the spec's space has "
            f"{len(names)} ({', '.join(names)})"
        )
    sched = bound.schedule
    if sched.kind in (ScheduleKind.WORK_ORIENTED, ScheduleKind.MERGE_PATH):
        return int(space[0][0])
    tiling = sched.tiling
    assert tiling is not None
    n = tiling.depth
    extents = tile_extents(bound.sizes, bound.matrix.rows)
    by_name = {r.name: r for r in sched.ranks}
    worker = 0
    lane = 0
    for name, (pos, coord) in zip(names, space, strict=True):
        binding = by_name[name]
        if binding.level == GpuLevel.LANE:
            lane = int(pos)
            continue
        level = int(name[len(sched.tile_rank):]) if n else 0
        row = int(coord[0] if isinstance(coord, tuple) else coord)
        digit = int(row_digits(row, bound.sizes)[n - level])
        worker = worker * extents[n - level] + digit
    return worker * bound.group_size + lane
