"""Schedule definitions: one module per loops schedule, registered in the order lowering
tries them. :mod:`teaal_loops.schedules.definition` says what a definition holds; nothing
outside this package branches on a schedule's kind.
"""

from __future__ import annotations

# The built-in schedules register themselves on import, in this order.
# isort: off
from teaal_loops.schedules import thread_mapped  # noqa: F401
from teaal_loops.schedules import group_mapped  # noqa: F401
from teaal_loops.schedules import work_oriented  # noqa: F401
from teaal_loops.schedules import merge_path  # noqa: F401
# isort: on
from teaal_loops.schedules.binding import bind, describe_sizes
from teaal_loops.schedules.definition import Lowered, ScheduleDefinition, SplitCost
from teaal_loops.schedules.registry import (
    definitions,
    register_schedule,
    schedule_definition,
    schedule_kinds,
)

__all__ = [
    "Lowered",
    "ScheduleDefinition",
    "SplitCost",
    "bind",
    "definitions",
    "describe_sizes",
    "register_schedule",
    "schedule_definition",
    "schedule_kinds",
]
