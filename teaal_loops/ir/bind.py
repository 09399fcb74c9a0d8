"""Resolve a schedule's sizes for one matrix on one device.

Documented defaults for parameters the user did not bind (``--param`` or ``x-teaal-loops.params``):

* row-tile sizes (``uniform_shape`` on the tile rank): one row per worker, as loops does. Let
  ``L`` be the lowest tile level bound to space; sizes of levels ``<= L`` default to 1 and sizes
  above ``L`` to ``rows`` (rounded up to a multiple of the next bound size below, so that sizes
  nest), so the level-``L`` digit enumerates the rows and every other level has extent 1. With
  no space level at all (a spec that maps everything to time) all sizes default to ``rows``:
  one worker runs the whole matrix, exactly as the spec says. Bound sizes must nest.
* ``nway_shape`` part counts: the same rule, expressed as a number of parts.
* group size (``uniform_occupancy`` on the atom rank): 32, one warp per group.
* atoms per thread (work-oriented) and merge items per thread (merge-path): 8, as loops'
  merge_path_flat uses for f32. Measured on an H200, 8 beat "just enough chunks to fill the
  GPU" by up to 6.8x (banded, 40M nonzeros: 0.20 ms against 1.36 ms): short chunks keep each
  thread's loads in flight and its search short. Merge-path past 2M merge items takes 16: its
  staged kernel searches once per block, and larger shares halve those searches (longrows,
  134M nonzeros: 953 us at 8, 551 us at 32); 16 is the most a float64 tile stages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teaal_loops.errors import ParameterError
from teaal_loops.ir.model import (
    BoundSchedule,
    DeviceInfo,
    Launch,
    MatrixShape,
    RowTiling,
    Schedule,
    ScheduleKind,
)

INT32_MAX = 2**31 - 1
DEFAULT_ITEMS_PER_THREAD = 8
DEFAULT_MERGE_ITEMS_LARGE = 16  # merge-path past MERGE_LARGE_ITEMS merge items (rows + nnz)
MERGE_LARGE_ITEMS = 2_000_000
DEFAULT_GROUP_SIZE = 32


def index_bits(rows: int, nnz: int) -> int:
    """64 when an offset or a merge-path item index could exceed int32, else 32."""
    return 64 if nnz > INT32_MAX or rows + nnz > INT32_MAX else 32


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def tile_extents(widths: list[int] | tuple[int, ...], rows: int) -> list[int]:
    """Extents ``E_n .. E_0`` (top-down) of the tile levels for widths ``S_n .. S_1``."""
    if not widths:
        return [max(rows, 0)]
    n = len(widths)
    ext = [ceil_div(rows, widths[0])]
    for j in range(1, n):
        ext.append(ceil_div(widths[j - 1], widths[j]))
    ext.append(widths[n - 1])
    return ext


def resolve_tile_widths(tiling: RowTiling, given: list[int | None], rows: int) -> list[int]:
    """Tile widths ``S_n .. S_1`` (top-down) from the bound parameter values (None: default).

    Defaults give one row per worker (module docstring) and are chosen so that the widths nest.
    Bound widths must nest too: each ``S_{j+1}`` a multiple of ``S_j``. Only then do TeAAL's
    readings of a split (by position inside the parent tile, or by absolute coordinate) and the
    kernel's digit arithmetic agree on who owns a row, so anything else is refused.
    """
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
                f"tile sizes must nest: {_name(outer)} = {widths[i]} is not a multiple of "
                f"{_name(inner)} = {widths[i + 1]} (otherwise TeAAL's positional and coordinate "
                "readings of the split give rows different owners)"
            )
    return widths


def bind(
    schedule: Schedule,
    shape: MatrixShape,
    device: DeviceInfo | None = None,
    params: Mapping[str, int] | None = None,
) -> BoundSchedule:
    """Resolve every size of ``schedule`` for a matrix of ``shape`` on ``device``."""
    device = device or DeviceInfo.h100()
    values: dict[str, int | None] = dict(schedule.params)
    for name, value in (params or {}).items():
        if name not in values:
            raise ParameterError(
                f"--param {name}: not a parameter of this schedule "
                f"(its parameters: {', '.join(sorted(values)) or 'none'})"
            )
        values[name] = value
    rows, nnz = shape.rows, shape.nnz
    bits = index_bits(rows, nnz)
    threads = schedule.block_threads
    resolved: dict[str, int] = {}

    def value_of(size: int | str | None, default: int) -> int:
        if size is None:
            return default
        if isinstance(size, int):
            return size
        v = values.get(size)
        if v is None:
            v = default
        resolved[size] = v
        return v

    kind = schedule.kind
    if kind in (ScheduleKind.THREAD_MAPPED, ScheduleKind.GROUP_MAPPED):
        tiling = schedule.tiling
        assert tiling is not None
        given = [_given(schedule, s, values) for s in tiling.sizes]
        widths = resolve_tile_widths(tiling, given, rows)
        for size, width, is_nway in zip(
            tiling.sizes, widths, tiling.nway or (False,) * tiling.depth, strict=True
        ):
            if isinstance(size, str):
                resolved[size] = values.get(size) or (ceil_div(rows, width) if is_nway else width)
        extents = tile_extents(widths, rows)
        n = tiling.depth
        workers = 1
        for level in tiling.space_levels:
            workers *= extents[n - level]
        group = 1
        if kind == ScheduleKind.GROUP_MAPPED:
            group = value_of(schedule.group_size, DEFAULT_GROUP_SIZE)
            if group < 1 or group > 1024 or group & (group - 1):
                raise ParameterError(
                    f"group size {_name(schedule.group_size)} must be a power of two in "
                    f"[1, 1024], got {group}"
                )
        total = workers * group
        tpb = group if group > threads else threads
        launch = Launch(blocks=ceil_div(total, tpb) if total else 0, threads_per_block=tpb)
        _check_thread_count(schedule, workers * group, f"{workers} workers x {group} lanes")
        return BoundSchedule(
            schedule=schedule,
            matrix=shape,
            params=resolved,
            launch=launch,
            workers=workers,
            sizes=tuple(widths),
            group_size=group,
            index_bits=bits,
        )

    merge = kind == ScheduleKind.MERGE_PATH
    work = rows + nnz if merge else nnz
    default = DEFAULT_ITEMS_PER_THREAD
    if merge and work > MERGE_LARGE_ITEMS:
        default = DEFAULT_MERGE_ITEMS_LARGE
    per_thread = value_of(schedule.work_per_thread, default)
    if per_thread < 1:
        raise ParameterError(f"{_name(schedule.work_per_thread)} must be positive")
    workers = ceil_div(work, per_thread)
    _check_thread_count(schedule, workers, f"{workers} chunks of {per_thread}")
    return BoundSchedule(
        schedule=schedule,
        matrix=shape,
        params=resolved,
        launch=Launch(blocks=ceil_div(workers, threads), threads_per_block=threads),
        workers=workers,
        work_per_thread=per_thread,
        index_bits=bits,
    )


def _check_thread_count(schedule: Schedule, threads: int, what: str) -> None:
    """Thread ids are 32-bit in the kernels: refuse a launch they cannot number."""
    if threads > INT32_MAX:
        names = ", ".join(sorted(schedule.params)) or "the schedule's sizes"
        raise ParameterError(
            f"{what} is {threads} GPU threads, more than a 32-bit thread id can number "
            f"(2**31 - 1); bind larger tiles or chunks ({names})"
        )


def _given(schedule: Schedule, size: int | str, values: Mapping[str, int | None]) -> int | None:
    return size if isinstance(size, int) else values.get(size)


def _name(size: int | str | None) -> str:
    return size if isinstance(size, str) else str(size)


def row_digits(rows_idx: Any, widths: tuple[int, ...] | list[int]) -> list[Any]:
    """Digits ``d_n .. d_0`` (top-down) of row indices (ints or NumPy arrays) for widths S."""
    if not widths:
        return [rows_idx]
    n = len(widths)
    digits = [rows_idx // widths[0]]
    for j in range(1, n):
        digits.append((rows_idx % widths[j - 1]) // widths[j])
    digits.append(rows_idx % widths[n - 1])
    return digits


def describe_sizes(bound: BoundSchedule) -> dict[str, int]:
    """Every resolved size by name, for headers, explain and JSON."""
    out = dict(bound.params)
    if bound.kind in (ScheduleKind.WORK_ORIENTED, ScheduleKind.MERGE_PATH):
        out.setdefault("work_per_thread", bound.work_per_thread)
    out["workers"] = bound.workers
    out["blocks"] = bound.launch.blocks
    out["threads_per_block"] = bound.launch.threads_per_block
    return out


