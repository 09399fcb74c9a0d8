"""The registered schedule definitions, in the order lowering tries them."""

from __future__ import annotations

from teaal_loops.errors import UnsupportedMappingError
from teaal_loops.schedules.definition import ScheduleDefinition

_DEFINITIONS: dict[str, ScheduleDefinition] = {}


def register_schedule(definition: ScheduleDefinition) -> ScheduleDefinition:
    """Add a schedule kind; a kind registers once."""
    if definition.kind in _DEFINITIONS:
        raise ValueError(f"schedule {definition.kind!r} is already registered")
    _DEFINITIONS[definition.kind] = definition
    return definition


def schedule_definition(kind: str) -> ScheduleDefinition:
    try:
        return _DEFINITIONS[kind]
    except KeyError:
        raise UnsupportedMappingError(
            f"unknown schedule {kind!r} (known: {', '.join(_DEFINITIONS)})"
        ) from None


def schedule_kinds() -> tuple[str, ...]:
    return tuple(_DEFINITIONS)


def definitions() -> tuple[ScheduleDefinition, ...]:
    return tuple(_DEFINITIONS.values())
