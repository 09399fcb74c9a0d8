"""The plan of one einsum's HiFiber program: what to split, flatten, swizzle and co-iterate.

Built by :func:`teaal_loops.reference.plan.plan_spec`, read by the emitter. Every name here
(tensors, ranks, parameters) has been checked to be an identifier; sizes are positive ints or
parameter names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from teaal_loops.errors import UnsupportedMappingError
from teaal_loops.reference.names import comment
from teaal_loops.spec.model import Einsum

SUPPORTED = (
    "einsums of tensor accesses with plain indices, products (*), sums (+/-) of two tensors, "
    "take(); partitioning by uniform_shape, top-level nway_shape, one uniform_occupancy per "
    "rank, flatten() and x_merge_path on a flattened (M, K) rank"
)


def refuse(einsum: Einsum, message: str, key_path: str | None = None) -> UnsupportedMappingError:
    """The error for what the reference does not support, naming what it does (on one line:
    ``message`` may quote spec text)."""
    return UnsupportedMappingError(
        f"HiFiber reference: {comment(message)}",
        location=einsum.location,
        key_path=key_path,
        expected=f"what the reference supports: {SUPPORTED}",
    )


Size = int | str  # a positive int, or the name of a parameter


@dataclass(frozen=True)
class Width:
    """The width of the partitions of one level of a static split: ``size`` for
    ``uniform_shape(size)``; for ``nway_shape(size)`` (``nway`` true) the rank's shape cut into
    ``size`` tiles of equal width, ``(shape - 1) // size + 1``."""

    size: Size
    nway: bool = False


@dataclass(frozen=True)
class StaticChain:
    """``R: [uniform_shape(S_n), ...]``: ``produces`` top-down, ``widths[i]`` the width of
    ``produces[i]``'s partitions (the bottom rank has width 1 and no entry)."""

    source: str
    produces: tuple[str, ...]
    widths: tuple[Width, ...]
    texts: tuple[str, ...]  # the partitioning functions as written (for comments)


@dataclass(frozen=True)
class DynamicSplit:
    """``R: [uniform_occupancy(L.S)]`` or ``MK: [x_merge_path(L.S)]``: two ranks (upper,
    lower) cut at the leader's positions."""

    source: str
    produces: tuple[str, str]
    kind: str
    size: Size
    leader: str
    text: str


@dataclass(frozen=True)
class Flatten:
    """``(M, K): [flatten()]``: the components become one rank named ``name``."""

    components: tuple[str, ...]
    name: str
    leader: str


@dataclass
class TensorPlan:
    """One tensor of an einsum: its stored rank order and its ranks in loop order."""

    name: str
    rank_order: tuple[str, ...]
    slots: list[str]  # final, component and dynamic-source ranks, sorted into loop order
    is_output: bool
    declared: tuple[str, ...] = ()


@dataclass
class EinsumPlan:
    einsum: Einsum
    output: TensorPlan
    inputs: list[TensorPlan]
    loop_order: tuple[str, ...]
    chains: dict[str, StaticChain]
    dynamic: dict[str, DynamicSplit]  # by source rank
    flattens: dict[str, Flatten]  # by flattened name
    space: tuple[tuple[str, str], ...]  # (rank, style)
    time: tuple[tuple[str, str], ...]
    index_vars: tuple[str, ...]  # output's indices first, then the expression's new ones
    reduction: bool
    scalars: tuple[str, ...]
    formats: dict[str, dict[str, str]] = field(default_factory=dict)  # tensor -> rank -> U/C

    # ---- derived lookups --------------------------------------------------------------------

    def tensor(self, name: str) -> TensorPlan:
        if name == self.output.name:
            return self.output
        for t in self.inputs:
            if t.name == name:
                return t
        raise KeyError(name)

    def loop_pos(self, rank: str) -> int:
        return self.loop_order.index(rank)

    def flatten_of_component(self, rank: str) -> Flatten | None:
        for f in self.flattens.values():
            if rank in f.components:
                return f
        return None

    def flat_final_ranks(self, flat: Flatten) -> tuple[str, ...]:
        """The loop ranks a flattened rank finally becomes (top-down)."""
        dyn = self.dynamic.get(flat.name)
        return dyn.produces if dyn is not None else (flat.name,)

    def chain_of(self, rank: str) -> tuple[StaticChain, int] | None:
        for chain in self.chains.values():
            if rank in chain.produces:
                return chain, chain.produces.index(rank)
        return None

    def dynamic_of(self, rank: str) -> DynamicSplit | None:
        for d in self.dynamic.values():
            if rank in d.produces:
                return d
        return None

    def coord_rank(self, rank: str) -> str:
        """The loop rank whose coordinate is original rank ``rank``'s in the innermost body:
        the lowest rank it was split into (coordinates stay absolute)."""
        chain = self.chains.get(rank)
        if chain is not None:
            rank = chain.produces[-1]
        dyn = self.dynamic.get(rank)
        if dyn is not None:
            rank = dyn.produces[-1]
        return rank
