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
from teaal_loops.ir.model import BoundSchedule, Schedule
from teaal_loops.schedules.registry import schedule_definition
from teaal_loops.types import INT32_MAX, DeviceInfo, MatrixShape, index_bits


def bind(
    schedule: Schedule,
    shape: MatrixShape,
    device: DeviceInfo | None = None,
    params: Mapping[str, int] | None = None,
) -> BoundSchedule:
    """Resolve every size of ``schedule`` for a matrix (or a layout's tiles) of ``shape``.

    ``device`` is accepted for defaults that depend on the GPU; the built-in schedules'
    defaults depend on the matrix alone."""
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
    threads = bound.workers * bound.group_size
    if threads > INT32_MAX:
        names = ", ".join(sorted(schedule.params)) or "the schedule's sizes"
        raise ParameterError(
            f"{bound.workers} workers x {bound.group_size} lanes is {threads} GPU threads, more "
            f"than a 32-bit thread id can number (2**31 - 1); bind larger tiles or chunks "
            f"({names})"
        )
    return bound


def describe_sizes(bound: BoundSchedule) -> dict[str, int]:
    """Every resolved size by name, for headers, explain and JSON."""
    out = dict(bound.params)
    for name, value in schedule_definition(bound.kind).default_sizes(bound).items():
        out.setdefault(name, value)
    out["workers"] = bound.workers
    out["blocks"] = bound.launch.blocks
    out["threads_per_block"] = bound.launch.threads_per_block
    return out
