"""Resolve a schedule's sizes for one matrix on one device (:func:`bind`).

Parameters the user did not bind (``--param`` or ``x-teaal-loops.params``) take the defaults
each schedule definition documents. What every schedule shares is checked here: ``--param``
names, the index width (64-bit offsets when nnz or rows + nnz exceed 2**31 - 1) and the launch
size (thread ids are 32-bit in the kernels).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from teaal_loops.errors import ParameterError
from teaal_loops.ir.dense import reduce_lanes
from teaal_loops.ir.model import BoundSchedule, DenseRank, Schedule
from teaal_loops.schedules.registry import schedule_definition
from teaal_loops.types import INT32_MAX, DeviceInfo, Launch, MatrixShape, ceil_div, index_bits

DEFAULT_DENSE_SIZE = 8  # a free dense rank's size where no operand gives it (explain, generate)
# S of a contiguous dense placement (N1 in space, N0 in time) left unbound: 16 bytes of
# float32 a thread, one vector load (teaal_loops/ir/dense.py)
DEFAULT_CONTIGUOUS = 4


def bind(
    schedule: Schedule,
    shape: MatrixShape,
    device: DeviceInfo | None = None,
    params: Mapping[str, int] | None = None,
    dense_size: int | None = None,
) -> BoundSchedule:
    """Resolve every size of ``schedule`` for a matrix (or a layout's tiles) of ``shape``.

    ``device`` is accepted for defaults that depend on the GPU; the built-in schedules'
    defaults depend on the matrix alone. ``dense_size`` is the size of the dense rank
    (SpMM's N, SDDMM's K; default :data:`DEFAULT_DENSE_SIZE`; ignored for SpMV)."""
    values: dict[str, int | None] = dict(schedule.params)
    for name, value in (params or {}).items():
        if name not in values:
            raise ParameterError(
                f"--param {name}: not a parameter of this schedule "
                f"(its parameters: {', '.join(sorted(values)) or 'none'})"
            )
        values[name] = value
    bound = schedule_definition(schedule.kind).bind(schedule, shape, values)
    bound = dataclasses.replace(bound, index_bits=index_bits(shape.rows, shape.nnz))
    bound = _bind_dense(bound, values, dense_size)
    threads = bound.threads
    if threads > INT32_MAX:
        names = ", ".join(sorted(schedule.params)) or "the schedule's sizes"
        raise ParameterError(
            f"{bound.workers} workers x {bound.dense_space} dense slots x {bound.group_size} "
            f"lanes is {threads} GPU threads, more than a 32-bit thread id can number "
            f"(2**31 - 1); bind larger tiles or chunks ({names})"
        )
    return bound


def _bind_dense(
    bound: BoundSchedule, values: Mapping[str, int | None], dense_size: int | None
) -> BoundSchedule:
    """The dense rank's extents (:class:`teaal_loops.ir.model.DenseRank`), and a launch that
    gives each worker ``DS`` threads (times its lanes): all of the rank unsplit, ``min(S, size)``
    for ``N0`` of ``uniform_shape(S)`` in space, ``ceil(size / S)`` (each ``DT = min(S, size)``
    neighbouring elements) for ``N1`` in space. SDDMM's summed ``K`` in space has ``DS = S``
    (:func:`teaal_loops.ir.dense.reduce_lanes`: compiled in, checked here)."""
    dense = bound.schedule.form.dense
    if dense is None:
        return bound
    size = DEFAULT_DENSE_SIZE if dense_size is None else int(dense_size)
    if size < 1:
        raise ParameterError(f"the dense rank {dense.name} has size {size}; it must be >= 1")
    params = dict(bound.params)
    split = dense.split if isinstance(dense.split, int) else (
        values.get(dense.split) if dense.split is not None else None)
    lanes = 0
    if dense.reduce and dense.space is not None and dense.split is not None:
        # SDDMM's K in space: S threads reduce by shuffles, S compiled into the kernel (split
        # twice, the split is the runs' step, not S)
        lanes = reduce_lanes(bound.schedule, bound.group_size, values)
        split = lanes if dense.run is None else split
    elif split is None and dense.split is not None:
        # contiguous: a vector's worth a thread; else one tile, all of N in space (or in time)
        split = DEFAULT_CONTIGUOUS if dense.contiguous else (size if dense.space else 1)
    if split is not None and split < 1:
        raise ParameterError(f"{dense.split} = {split}: must be positive")
    if isinstance(dense.split, str) and dense.run is None and split is not None:
        params[dense.split] = split
    space, time = _dense_extents(dense, size, split, lanes)
    old = bound.launch
    threads_per_block = old.threads_per_block
    total = bound.workers * space * bound.group_size
    launch = Launch(
        blocks=ceil_div(total, threads_per_block) if bound.workers else 0,
        threads_per_block=threads_per_block,
    )
    if space == 1:
        launch = old  # the schedule's own launch (flat schedules size it by chunks)
    return dataclasses.replace(
        bound, params=params, dense_size=size, dense_space=space, dense_time=time,
        launch=launch,
    )


def _dense_extents(dense: DenseRank, size: int, split: int | None,
                   lanes: int) -> tuple[int, int]:
    """(DS, DT) of a dense rank of ``size`` split by ``split`` (None: unsplit); ``lanes``: the
    compiled threads of a summed rank in space."""
    if lanes:
        return lanes, ceil_div(size, lanes)
    if split is None:  # unsplit: all in space, one element a thread, or all in time
        space = size if dense.space else 1
        return space, ceil_div(size, space)
    if dense.contiguous:  # N1 in space, N0 in time: S neighbouring elements a thread
        time = min(split, size)
        return ceil_div(size, time), time
    if dense.space is None:  # both digits in time: every n in turn
        return 1, size
    # A tile wider than the rank keeps one thread per element (DS = min(S, size)): the threads
    # past it would own no n, and n mod DS = n mod S for every n < size, so the owners are the
    # split's.
    space = min(split, size)
    return space, ceil_div(size, space)


def describe_sizes(bound: BoundSchedule) -> dict[str, int]:
    """Every resolved size by name, for headers, explain and JSON."""
    out = dict(bound.params)
    for name, value in schedule_definition(bound.kind).default_sizes(bound).items():
        out.setdefault(name, value)
    out["workers"] = bound.workers
    out["blocks"] = bound.launch.blocks
    out["threads_per_block"] = bound.launch.threads_per_block
    return out
