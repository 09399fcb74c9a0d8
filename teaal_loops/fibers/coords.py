"""Coordinates as the fibers use them: ints, or tuples of ints for a flattened rank."""

from __future__ import annotations

from typing import Any

from teaal_loops.fibers.payload import Payload

Coord = Any  # an int, or a tuple of ints for a flattened rank
Elem = tuple[Coord, Any]
Part = tuple[Coord, list[Coord], list[Any], tuple[Any, Any]]  # coord, coords, payloads, active


def inf_like(coord: Coord) -> Any:
    """fibertree's ``_transCoord(coord, lambda c: inf)``: +inf of the coordinate's shape."""
    if isinstance(coord, tuple):
        return tuple(inf_like(c) for c in coord)
    return float("inf")


def zero_like(coord: Coord) -> Any:
    if isinstance(coord, tuple):
        return tuple(zero_like(c) for c in coord)
    return 0


def is_fiber(value: Any) -> bool:
    """A fiber (of this package or a subclass), told apart from a payload without importing
    the Fiber class: the split and merge helpers are imported by it."""
    return hasattr(value, "coords") and hasattr(value, "payloads") and hasattr(value, "_make")


def is_empty_payload(payload: Any, default: Any) -> bool:
    """An empty fiber, or a value equal to the fiber's default."""
    if is_fiber(payload):
        return bool(payload.isEmpty())
    return bool(Payload.get(payload) == default)
