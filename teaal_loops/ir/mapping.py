"""A spec's mapping of one einsum, read the way every schedule definition reads it.

Lowering orients the SpMV roles to the chosen layout (tiles along ``tile_rank``, atoms along
``atom_rank``: rows and nonzeros for CSR, columns and nonzeros for CSC) and collects the
partitioning, loop order and spacetime of the output into one :class:`MappingContext`. Each
schedule definition (:mod:`teaal_loops.schedules`) then decides from it whether the mapping is
its own and lowers it; :func:`unsupported` builds the error every refusal raises, carrying the
key path of the offending spec value so that the error can point at it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from teaal_loops.errors import Location, UnsupportedMappingError
from teaal_loops.ir.einsum import EinsumShape
from teaal_loops.spec.model import RankPartitioning, SpaceTime, SpaceTimeRank, Spec


def unsupported(
    spec: Spec, message: str, *, key_path: str | None = None
) -> UnsupportedMappingError:
    """The refusal of a mapping the generator cannot honour (never approximated); lowering
    adds the list of the mappings the registered schedules support."""
    location = spec.location_of(key_path) if key_path else None
    if location is None and spec.source:
        location = Location(spec.source)
    return UnsupportedMappingError(
        message, location=location, key_path=key_path
    )


@dataclass(frozen=True)
class MappingContext:
    """The output's mapping with the ranks oriented to the layout (module docstring)."""

    spec: Spec
    shape: EinsumShape
    layout: str
    tile_rank: str
    atom_rank: str
    scatter: bool  # the layout's tiles are not output rows: every update is atomic
    parts: Mapping[str, RankPartitioning]  # splits of one rank, by rank name
    flat_parts: tuple[RankPartitioning, ...]  # flattenings such as (M, K)
    space: tuple[str, ...]
    time: tuple[str, ...]
    styles: Mapping[str, str]  # spacetime style (pos or coord) of each rank
    layout_key: str | None = None  # the spec value that chose the layout (None: an argument)

    @property
    def output(self) -> str:
        return self.shape.output

    @property
    def matrix(self) -> str:
        return self.shape.matrix

    @property
    def flat_name(self) -> str:
        return self.tile_rank + self.atom_rank

    def key(self, *parts: str) -> str:
        """A key path under the output's mapping: ``key("spacetime", "space")``."""
        section, *rest = parts
        return ".".join(["mapping", section, self.output, *rest])

    def refuse(self, message: str, *, key_path: str | None = None) -> UnsupportedMappingError:
        return unsupported(self.spec, message, key_path=key_path)


def mapping_context(
    spec: Spec, shape: EinsumShape, layout: str, tile_rank: str, atom_rank: str, scatter: bool
) -> MappingContext:
    out = shape.output
    # Splits of one rank by name; a flatten ``(M, K)`` is kept apart, since its name ``MK`` is
    # also the name of the rank its own splits (``MK: [...]``) apply to.
    partitioning = spec.partitioning_of(out)
    parts = {p.name: p for p in partitioning if len(p.ranks) == 1}
    flat_parts = tuple(p for p in partitioning if len(p.ranks) > 1)
    spacetime = spec.spacetime_of(out) or _all_time(spec, out)
    return MappingContext(
        spec=spec,
        shape=shape,
        layout=layout,
        tile_rank=tile_rank,
        atom_rank=atom_rank,
        scatter=scatter,
        parts=parts,
        flat_parts=flat_parts,
        space=tuple(r.rank for r in spacetime.space),
        time=tuple(r.rank for r in spacetime.time),
        styles={r.rank: r.style for r in (*spacetime.space, *spacetime.time)},
    )


def _all_time(spec: Spec, out: str) -> SpaceTime:
    """No spacetime: TeAAL runs everything in time, i.e. one sequential worker."""
    return SpaceTime(space=(), time=tuple(SpaceTimeRank(r) for r in spec.loop_order_of(out)))
