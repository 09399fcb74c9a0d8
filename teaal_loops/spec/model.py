"""Typed, immutable objects for a parsed TeAAL spec.

The parser (``teaal_loops.spec.parse``) builds these; nothing downstream reads YAML again.
Sequences are tuples and maps are read-only ``Mapping`` views so that a spec cannot be changed
after validation. Every node that came from the file keeps its :class:`Location`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from teaal_loops.errors import Location, printable
from teaal_loops.spec.key_paths import lookup

# --------------------------------------------------------------------------------------------
# Einsum expressions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AffineIndex:
    """An index expression such as ``k``, ``q+s`` or ``2*e+r``: sum of coef*var plus a constant."""

    terms: tuple[tuple[int, str], ...]  # (coefficient, index variable), in source order
    constant: int = 0

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(v for _, v in self.terms)

    @property
    def is_plain(self) -> bool:
        """True for a bare variable (``k``), the only form a layout can index directly."""
        return len(self.terms) == 1 and self.terms[0][0] == 1 and self.constant == 0

    def __str__(self) -> str:
        parts = [v if c == 1 else f"{c}*{v}" for c, v in self.terms]
        if self.constant or not parts:
            parts.append(str(self.constant))
        return "+".join(parts)


@dataclass(frozen=True)
class TensorAccess:
    """``A[m, k]``: a tensor read (or the output written) with one index per rank."""

    tensor: str
    indices: tuple[AffineIndex, ...]
    location: Location | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ScalarRef:
    """A bare name in an expression: a scalar operand."""

    name: str
    location: Location | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Intersect:
    """Factors joined by ``*``: the product, over the intersection of their coordinates."""

    factors: tuple[ExprNode, ...]


@dataclass(frozen=True)
class Union:
    """Terms joined by ``+`` (or ``-``: ``negated`` marks subtracted terms): a union."""

    terms: tuple[ExprNode, ...]
    negated: tuple[bool, ...] = ()


@dataclass(frozen=True)
class Take:
    """``take(A[..], B[..], i)``: intersect the arguments and keep argument ``keep``."""

    args: tuple[ExprNode, ...]
    keep: int


ExprNode = TensorAccess | ScalarRef | Intersect | Union | Take


@dataclass(frozen=True)
class Einsum:
    """One line of ``einsum.expressions``: ``output = expr``."""

    text: str
    output: TensorAccess
    expr: ExprNode
    location: Location | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        """The output tensor's name: mapping sections are keyed by it."""
        return self.output.tensor


# --------------------------------------------------------------------------------------------
# Mapping
# --------------------------------------------------------------------------------------------

PartitionKind = Literal[
    "uniform_shape",
    "nway_shape",
    "uniform_occupancy",
    "follow",
    "flatten",
    # teaal-loops extensions (rejected in strict mode); names carry the ``x_`` prefix
    "x_merge_path",
]

TEAAL_PARTITION_KINDS: frozenset[str] = frozenset(
    {"uniform_shape", "nway_shape", "uniform_occupancy", "follow", "flatten"}
)
EXTENSION_PARTITION_KINDS: frozenset[str] = frozenset({"x_merge_path"})


@dataclass(frozen=True)
class PartitionFn:
    """One partitioning function, e.g. ``uniform_occupancy(A.BLOCK_SIZE)``.

    ``size`` is an int or a parameter name; ``leader`` is the tensor before the dot for the
    occupancy-based functions; ``target`` is the rank named by ``follow(R)``.
    """

    kind: PartitionKind
    size: int | str | None = None
    leader: str | None = None
    target: str | None = None
    text: str = ""
    location: Location | None = field(default=None, compare=False)

    @property
    def parameter(self) -> str | None:
        return self.size if isinstance(self.size, str) else None


@dataclass(frozen=True)
class RankPartitioning:
    """``M: [f1, f2]`` or ``(M, K): [flatten()]`` for one einsum.

    ``ranks`` is one rank for ordinary splits and several for a flatten. ``produces`` lists the
    rank names the functions create, top-down (``M2, M1, M0``; ``MK`` for a flatten), and
    ``intermediates`` the split-internal ranks of multi-level splits (``K1I``).
    """

    ranks: tuple[str, ...]
    functions: tuple[PartitionFn, ...]
    produces: tuple[str, ...]
    location: Location | None = field(default=None, compare=False)
    # Ranks created between levels of a multi-level split (TeAAL's ``K1I``); never final.
    intermediates: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The (possibly flattened) rank name these functions split: ``M`` or ``MK``."""
        return "".join(self.ranks)


@dataclass(frozen=True)
class SpaceTimeRank:
    rank: str
    style: Literal["pos", "coord"] = "pos"


@dataclass(frozen=True)
class SpaceTime:
    space: tuple[SpaceTimeRank, ...]
    time: tuple[SpaceTimeRank, ...]
    slip: bool = False
    location: Location | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Mapping_:
    """The ``mapping`` section. Per-einsum sections are keyed by the output tensor's name."""

    rank_order: Mapping[str, tuple[str, ...]]
    partitioning: Mapping[str, tuple[RankPartitioning, ...]]
    loop_order: Mapping[str, tuple[str, ...]]
    spacetime: Mapping[str, SpaceTime]


# --------------------------------------------------------------------------------------------
# Format, architecture, bindings: validated for structure, kept for downstream use
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RankFormat:
    rank: str
    format: Literal["U", "C"]
    layout: str | None = None  # TeAAL's optional ``layout: contiguous|interleaved``
    cbits: int | None = None
    pbits: int | None = None


@dataclass(frozen=True)
class TensorFormat:
    """``format.A.<name>``: a rank order plus per-rank U/C formats."""

    tensor: str
    name: str
    rank_order: tuple[str, ...]
    ranks: tuple[RankFormat, ...]
    location: Location | None = field(default=None, compare=False)


# --------------------------------------------------------------------------------------------
# The whole spec
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Extensions:
    """Our ``x-teaal-loops`` section (never TeAAL; rejected in strict mode).

    ``schedule`` may force a schedule (``auto`` lets the runtime choose); ``layout`` and
    ``block_threads`` set GPU choices; ``params`` gives default parameter values.
    """

    schedule: str | None = None
    layout: str | None = None
    block_threads: int | None = None
    params: Mapping[str, int] = field(default_factory=dict)
    location: Location | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Warning_:
    """A non-fatal finding (an unknown key TeAAL would silently ignore)."""

    message: str
    location: Location | None = None
    key_path: str | None = None

    def __str__(self) -> str:
        where = self.location.prefix() + ": " if self.location else ""
        path = f"{self.key_path}: " if self.key_path else ""
        return printable(f"{where}warning: {path}{self.message}")


@dataclass(frozen=True)
class Spec:
    """A parsed and validated TeAAL spec."""

    source: str | None  # file path, or None for a string
    declaration: Mapping[str, tuple[str, ...]]  # tensor -> upper-case rank names
    einsums: tuple[Einsum, ...]
    mapping: Mapping_
    formats: Mapping[str, tuple[TensorFormat, ...]]  # tensor -> its named formats
    architecture: Mapping[str, object]  # kept as plain data, structure-checked
    bindings: Mapping[str, object]  # kept as plain data, structure-checked
    extensions: Extensions | None
    final_ranks: Mapping[str, tuple[str, ...]]  # einsum output -> ranks after partitioning
    parameters: tuple[str, ...]  # identifiers used as partition sizes, in order of appearance
    warnings: tuple[Warning_, ...] = ()
    # Key path (``mapping.spacetime.Z.space[1]``) -> where that value was written.
    key_locations: Mapping[str, Location] = field(default_factory=dict, compare=False, repr=False)

    def location_of(self, key_path: str) -> Location | None:
        """Where the value at ``key_path`` was written: the path's own position, else that of
        its longest prefix written in the file (at worst the document's start); None for a
        spec built without positions. Errors carrying a ``key_path`` use this to point into
        the file (:meth:`teaal_loops.errors.TeaalLoopsError.located`)."""
        return lookup(self.key_locations, key_path)

    @property
    def name(self) -> str:
        """The file's name without folder and extension, control characters and line breaks
        escaped (``a\\nb``): it lands in generated comments, which a newline would end."""
        if self.source is None:
            return "<string>"
        return printable(os.path.splitext(os.path.basename(self.source))[0])

    def einsum(self, output: str) -> Einsum:
        for e in self.einsums:
            if e.name == output:
                return e
        raise KeyError(output)

    def partitioning_of(self, output: str) -> tuple[RankPartitioning, ...]:
        return self.mapping.partitioning.get(output, ())

    def spacetime_of(self, output: str) -> SpaceTime | None:
        return self.mapping.spacetime.get(output)

    def loop_order_of(self, output: str) -> tuple[str, ...]:
        """The loop order, defaulting (as TeAAL does) to the output's final ranks."""
        return self.mapping.loop_order.get(output, self.final_ranks[output])
