"""The draft: what the YAML says, section by section, before cross-checking."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from teaal_loops.errors import Location
from teaal_loops.spec.key_paths import lookup
from teaal_loops.spec.model import Einsum, Extensions, RankPartitioning, SpaceTime, TensorFormat
from teaal_loops.spec.yaml_positions import YEntry


@dataclass
class Draft:
    """Parsed sections, positions kept; :func:`~teaal_loops.spec.validate.build_spec` turns
    this into a :class:`~teaal_loops.spec.model.Spec`.

    ``*_loc`` maps keep each entry (key and value positions); ``locations`` maps every key path
    of the document to the position of its value.
    """

    source: str | None
    declaration: dict[str, tuple[str, ...]]
    declaration_loc: dict[str, YEntry]
    einsums: list[Einsum]
    einsum_paths: list[str]
    locations: dict[str, Location] = field(default_factory=dict)
    rank_order: dict[str, tuple[str, ...]] = field(default_factory=dict)
    rank_order_loc: dict[str, YEntry] = field(default_factory=dict)
    partitioning: dict[str, list[RankPartitioning]] = field(default_factory=dict)
    partitioning_loc: dict[str, YEntry] = field(default_factory=dict)
    loop_order: dict[str, tuple[str, ...]] = field(default_factory=dict)
    loop_order_loc: dict[str, YEntry] = field(default_factory=dict)
    spacetime: dict[str, SpaceTime] = field(default_factory=dict)
    spacetime_loc: dict[str, YEntry] = field(default_factory=dict)
    formats: dict[str, tuple[TensorFormat, ...]] = field(default_factory=dict)
    formats_loc: dict[str, YEntry] = field(default_factory=dict)
    architecture: Mapping[str, object] = field(default_factory=dict)
    bindings: Mapping[str, object] = field(default_factory=dict)
    bindings_loc: dict[str, YEntry] = field(default_factory=dict)
    extensions: Extensions | None = None

    def location_of(self, key_path: str) -> Location | None:
        """Where the value at ``key_path`` (or its longest written prefix) was written."""
        return lookup(self.locations, key_path)
