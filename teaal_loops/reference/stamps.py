"""Spacetime stamps: where and when the spec's spacetime puts each multiply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

Layout = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]  # indices, space, time


class RankStamp(NamedTuple):
    """One space or time rank of a stamp: the element's position in its fiber and its
    coordinate (an int, or a tuple for a flattened rank such as ``MK``)."""

    rank: str
    pos: int
    coord: Any


@dataclass(frozen=True)
class Stamp:
    """One multiply (one execution of the innermost statement) of an einsum.

    ``indices`` maps every index variable to its coordinate (``{'m': 3, 'k': 7}``); ``space``
    and ``time`` hold a :class:`RankStamp` per rank of the spec's spacetime, in its order (with
    no spacetime in the spec: no space, and every loop rank in time, in loop order).
    """

    einsum: str
    indices: Mapping[str, int]
    space: tuple[RankStamp, ...]
    time: tuple[RankStamp, ...]

    def space_pairs(self) -> list[tuple[int, Any]]:
        """``[(pos, coord), ...]`` in space order (what the IR maps to a thread)."""
        return [(r.pos, r.coord) for r in self.space]


class Recorder:
    """The ``record`` function bound into a HiFiber program: appends raw tuples quickly and
    builds :class:`Stamp` objects afterwards."""

    def __init__(self, layout: Mapping[str, Layout]) -> None:
        # einsum -> (index variables, space ranks, time ranks)
        self.layout = layout
        self.raw: list[tuple[str, tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]] = []

    def __call__(
        self, einsum: str, indices: tuple[Any, ...], space: tuple[Any, ...], time: tuple[Any, ...]
    ) -> None:
        self.raw.append((einsum, indices, space, time))

    def __len__(self) -> int:
        return len(self.raw)

    def stamps(self) -> tuple[Stamp, ...]:
        make = RankStamp._make
        out = []
        for einsum, indices, space, time in self.raw:
            names, space_ranks, time_ranks = self.layout[einsum]
            out.append(
                Stamp(
                    einsum,
                    dict(zip(names, indices, strict=True)),
                    tuple([make((r, p, c)) for r, (p, c) in zip(space_ranks, space, strict=True)]),
                    tuple([make((r, p, c)) for r, (p, c) in zip(time_ranks, time, strict=True)]),
                )
            )
        return tuple(out)
