"""What thread-mapped and group-mapped share: the uniform tiling of the tile rank.

``M: [uniform_shape(S_n), ..., uniform_shape(S_1)]`` (or ``nway_shape``) splits the tile rank
into final ranks ``M_n ... M_0`` (``M`` alone when unsplit). A tile ``m`` has digits
``d_n = m // S_n``, ``d_j = (m mod S_{j+1}) // S_j`` and ``d_0 = m mod S_1``; level ``j`` has
extent ``E_n = ceil(tiles / S_n)``, ``E_j = ceil(S_{j+1} / S_j)``, ``E_0 = S_1``. The levels in
the spec's ``space`` pick the worker (the mixed-radix number of their digits, most significant
first, in the space order); the others are loops of the owning worker.

Default sizes give one tile per worker, as loops does. Let ``L`` be the lowest tile level bound
to space; sizes of levels ``<= L`` default to 1 and sizes above ``L`` to ``tiles`` (rounded up
to a multiple of the next bound size below, so that sizes nest); with no space level at all
every size defaults to ``tiles``: one worker runs the whole matrix, exactly as the spec says.
``nway_shape`` part counts follow the same rule, expressed as a number of parts. Bound sizes
must nest (each ``S_{j+1}`` a multiple of ``S_j``): only then do TeAAL's readings of a split
(by position inside the parent tile, or by absolute coordinate) and the kernel's digit
arithmetic agree on who owns a tile, so anything else is refused.

A reference stamp names tile levels by their *coordinates*: the coordinate of a level-``j``
element is the first tile of its part and has the same digits at levels ``>= j`` as every
tile inside it, so the digit formula maps it to its worker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from teaal_loops.errors import ParameterError
from teaal_loops.ir.mapping import MappingContext
from teaal_loops.ir.model import BoundSchedule, GpuLevel, RankBinding, RowTiling, Schedule
from teaal_loops.schedules.definition import IntArray, ScheduleDefinition
from teaal_loops.types import KernelParam, ceil_div


def tile_rank_names(tile: str, depth: int) -> list[str]:
    """Final names of the tile rank's levels, top-down: ``M2, M1, M0`` (or ``M`` unsplit)."""
    if depth == 0:
        return [tile]
    return [f"{tile}{j}" for j in range(depth, -1, -1)]


def lower_tiling(ctx: MappingContext) -> tuple[RowTiling, list[RankBinding], dict[str, str]]:
    """The tile rank's splits, and the binding of each of its final ranks."""
    tile = ctx.tile_rank
    sizes: list[int | str] = []
    nway: list[bool] = []
    roles: dict[str, str] = {}
    part = ctx.parts.get(tile)
    key = ctx.key("partitioning", tile)
    for fn in part.functions if part is not None else ():
        if fn.kind not in ("uniform_shape", "nway_shape"):
            raise ctx.refuse(
                f"rank {tile} is split by {fn.text or fn.kind}; the tile rank of a thread- "
                "or group-mapped schedule takes uniform_shape or nway_shape",
                key_path=key,
            )
        if fn.size is None:
            raise ctx.refuse(f"{fn.text} has no size", key_path=key)
        sizes.append(fn.size)
        nway.append(fn.kind == "nway_shape")
        if isinstance(fn.size, str):
            roles[fn.size] = "row_parts" if fn.kind == "nway_shape" else "row_tile"
    depth = len(sizes)
    level_of = {name: depth - i for i, name in enumerate(tile_rank_names(tile, depth))}
    space, time = ctx.space, ctx.time
    bindings = []
    for name, level in level_of.items():
        is_space = name in space
        bindings.append(
            RankBinding(
                name=name,
                source=tile,
                level=GpuLevel.WORKER if is_space else GpuLevel.LOOP,
                extent=_tile_extent(level, depth, sizes, nway),
                space_index=space.index(name) if is_space else None,
                time_index=time.index(name) if name in time else None,
                style=ctx.styles.get(name, "pos"),
            )
        )
    tiling = RowTiling(
        tuple(sizes),
        space_levels=tuple(level_of[r] for r in space if r in level_of),
        time_levels=tuple(level_of[r] for r in time if r in level_of),
        nway=tuple(nway),
    )
    return tiling, bindings, roles


def _tile_extent(level: int, depth: int, sizes: list[int | str], nway: list[bool]) -> str:
    if depth == 0:
        return "rows"

    def width(j: int) -> str:  # S_j, the width of a level-j tile
        s = sizes[depth - j]
        if nway[depth - j]:
            parent = "rows" if j == depth else width(j + 1)
            return f"ceil({parent}/{s})"
        return str(s)

    if level == depth:
        return f"ceil(rows/{width(depth)})"
    if level == 0:
        return width(1)
    return f"ceil({width(level + 1)}/{width(level)})"


def tile_extents(widths: Sequence[int], rows: int) -> list[int]:
    """Extents ``E_n .. E_0`` (top-down) of the tile levels for widths ``S_n .. S_1``."""
    if not widths:
        return [max(rows, 0)]
    n = len(widths)
    ext = [ceil_div(rows, widths[0])]
    for j in range(1, n):
        ext.append(ceil_div(widths[j - 1], widths[j]))
    ext.append(widths[n - 1])
    return ext


def row_digits(rows_idx: Any, widths: Sequence[int]) -> list[Any]:
    """Digits ``d_n .. d_0`` (top-down) of tile indices (ints or NumPy arrays) for widths S."""
    if not widths:
        return [rows_idx]
    n = len(widths)
    digits = [rows_idx // widths[0]]
    for j in range(1, n):
        digits.append((rows_idx % widths[j - 1]) // widths[j])
    digits.append(rows_idx % widths[n - 1])
    return digits


def resolve_tile_widths(tiling: RowTiling, given: list[int | None], rows: int) -> list[int]:
    """Tile widths ``S_n .. S_1`` (top-down) from the bound parameter values (None: default,
    see the module docstring); widths that do not nest are refused."""
    n = tiling.depth
    nway = tiling.nway or (False,) * n
    lowest = min(tiling.space_levels) if tiling.space_levels else None
    widths: list[int] = []
    parent = max(rows, 1)
    for i in range(n):
        level = n - i
        value = given[i]
        if value is not None:
            width = ceil_div(parent, value) if nway[i] else value
        elif lowest is not None and level <= lowest:
            width = 1
        else:
            # the whole parent, rounded up to a multiple of the next bound width below
            below = next(
                (v for v, w in zip(given[i + 1:], nway[i + 1:], strict=True) if v and not w), 1
            )
            width = min(ceil_div(max(rows, 1), below) * below, parent if i else 1 << 62)
        widths.append(max(width, 1))
        parent = widths[-1]
    for i in range(n - 1):
        if widths[i] % widths[i + 1]:
            outer, inner = tiling.sizes[i], tiling.sizes[i + 1]
            raise ParameterError(
                f"tile sizes must nest: {outer} = {widths[i]} is not a multiple of "
                f"{inner} = {widths[i + 1]} (otherwise TeAAL's positional and coordinate "
                "readings of the split give rows different owners)"
            )
    return widths


class RowTiledSchedule(ScheduleDefinition):
    """The part of thread-mapped and group-mapped that the tile rank's tiling decides."""

    def bind_tiling(
        self, schedule: Schedule, rows: int, values: Mapping[str, int | None]
    ) -> tuple[list[int], int, dict[str, int]]:
        """(widths S_n..S_1, workers, resolved parameters) for ``rows`` tiles."""
        tiling = schedule.tiling
        assert tiling is not None
        given = [size if isinstance(size, int) else values.get(size) for size in tiling.sizes]
        widths = resolve_tile_widths(tiling, given, rows)
        resolved: dict[str, int] = {}
        for size, width, is_nway in zip(
            tiling.sizes, widths, tiling.nway or (False,) * tiling.depth, strict=True
        ):
            if isinstance(size, str):
                resolved[size] = values.get(size) or (ceil_div(rows, width) if is_nway else width)
        extents = tile_extents(widths, rows)
        workers = 1
        for level in tiling.space_levels:
            workers *= extents[tiling.depth - level]
        return widths, workers, resolved

    def tile_workers(self, bound: BoundSchedule, rows: int) -> IntArray:
        """Worker (thread or group) of every tile."""
        tiling = bound.schedule.tiling
        assert tiling is not None
        m = np.arange(rows, dtype=np.int64)
        digits = row_digits(m, bound.sizes)
        extents = tile_extents(bound.sizes, rows)
        n = tiling.depth
        worker = np.zeros(rows, dtype=np.int64)
        for level in tiling.space_levels:
            worker = worker * extents[n - level] + np.asarray(digits[n - level], dtype=np.int64)
        return worker

    def worker_of_stamp(
        self, bound: BoundSchedule, names: Sequence[str], stamp: Sequence[tuple[int, Any]]
    ) -> tuple[int, int]:
        """(worker, lane) of a reference space stamp: tile levels by coordinate, the lane
        rank (group-mapped) by position."""
        sched = bound.schedule
        tiling = sched.tiling
        assert tiling is not None
        n = tiling.depth
        extents = tile_extents(bound.sizes, bound.matrix.rows)
        by_name = {r.name: r for r in sched.ranks}
        worker, lane = 0, 0
        for name, (pos, coord) in zip(names, stamp, strict=True):
            if by_name[name].level == GpuLevel.LANE:
                lane = int(pos)
                continue
            level = int(name[len(sched.tile_rank):]) if n else 0
            row = int(coord[0] if isinstance(coord, tuple) else coord)
            digit = int(row_digits(row, bound.sizes)[n - level])
            worker = worker * extents[n - level] + digit
        return worker, lane

    def kernel_params(self, schedule: Schedule) -> tuple[KernelParam, ...]:
        n = schedule.tiling.depth if schedule.tiling is not None else 0
        sizes = tuple(
            KernelParam(f"S{j}", "offset_t", f"tiling size S_{j}") for j in range(n, 0, -1)
        )
        extents = tuple(
            KernelParam(f"E{j}", "offset_t", f"extent of level {j}") for j in range(n, -1, -1)
        )
        workers = KernelParam("workers", "offset_t", f"{self.worker_word}s")
        return sizes + extents + (workers,)

    def kernel_arguments(self, bound: BoundSchedule) -> dict[str, int]:
        sizes = tuple(bound.sizes)
        n = len(sizes)
        extents = tile_extents(list(sizes), bound.matrix.rows)
        args = {f"S{n - i}": s for i, s in enumerate(sizes)}
        args.update({f"E{n - i}": e for i, e in enumerate(extents)})
        args["workers"] = bound.workers
        return args

    def check_arguments(self, bound: BoundSchedule, args: Mapping[str, int], limit: int) -> None:
        """Tile numbers are sums of ``d_j * S_j`` that stay below ``rows + sum(S_j)``: a size
        so large that this overflows the offset type is refused rather than wrapped."""
        sizes = [int(v) for k, v in args.items() if k.startswith("S")]
        too_big = [k for k, v in args.items() if int(v) > limit]
        if too_big or bound.matrix.rows + sum(sizes) > limit:
            raise ParameterError(
                f"sizes {dict(args)} are too large for {bound.index_bits}-bit offsets on a "
                f"matrix with {bound.matrix.rows} rows: use smaller parameters"
            )

    def template_context(self, schedule: Schedule, value_type: str) -> dict[str, Any]:
        tiling = schedule.tiling
        assert tiling is not None
        return {
            "depth": tiling.depth,
            "space_levels": tuple(tiling.space_levels),
            "time_levels": tuple(tiling.time_levels),
        }

    def header_lines(self, schedule: Schedule, group: int) -> list[str]:
        tiling = schedule.tiling
        assert tiling is not None
        sizes = ", ".join(f"S{tiling.depth - i}={size}" for i, size in enumerate(tiling.sizes))
        return [
            f"row tiling: sizes [{sizes}]",
            f"            space levels {list(tiling.space_levels)} (most significant first), "
            f"time levels {list(tiling.time_levels)} (outermost first)",
        ]
