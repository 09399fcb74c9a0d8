"""Rank naming after partitioning, and TeAAL's default loop order.

This reimplements the naming rules of TeAAL's partitioning graph
(``teaal/ir/partitioning.py``):

* ``R: [f_1, ..., f_n]`` creates ``R{n}, ..., R1, R0`` top-down: function ``f_i`` (0-based
  ``i``) makes ``R{n-i}``, and the last one also makes the bottom rank ``R0``.
* A dynamic (occupancy-based) function after the first one first creates the intermediate
  ``R{n-i}I`` (split off with the previous function), and the next names hang below it; so
  ``K: [uniform_occupancy(A.4), uniform_occupancy(A.2)]`` gives ``K2, K1, K0`` via ``K1I``.
* ``(M, K): [flatten()]`` creates ``MK`` (names concatenated in spec order), which its own
  entry (``MK: [...]``) may split into ``MK1, MK0``.
* ``R: [follow(S)]`` splits ``R`` with ``S``'s functions (names still start with ``R``).

The default loop order is the einsum's ranks (output ranks first, then the first term's)
with every applicable partitioning applied, repeatedly, until none applies.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from teaal_loops.spec.expressions import expr_accesses, expr_terms
from teaal_loops.spec.model import (
    AffineIndex,
    Einsum,
    ExprNode,
    PartitionFn,
    Take,
)

STATIC_KINDS = frozenset({"uniform_shape", "nway_shape"})


def is_static(fn: PartitionFn) -> bool:
    """Shape-based splits can be computed from the coordinates alone."""
    return fn.kind in STATIC_KINDS


@dataclass
class PartitionGraph:
    """Which rank each partitioning creates from which (the ``flatten`` edges separately)."""

    priority: dict[str, float] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    flattened: dict[tuple[str, ...], str] = field(default_factory=dict)
    intermediates: dict[str, list[str]] = field(default_factory=dict)

    def add(self, rank: str, priority: float) -> None:
        self.priority[rank] = priority
        self.children.setdefault(rank, [])

    def edge(self, parent: str, child: str) -> None:
        self.children.setdefault(parent, []).append(child)
        self.children.setdefault(child, [])

    def leaves(self, rank: str) -> list[str]:
        """The ranks ``rank`` finally becomes, top-down (flatten edges are not followed)."""
        out: list[str] = []
        stack = [rank]
        seen: set[str] = set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            kids = self.children.get(node, [])
            if kids:
                stack.extend(kids)
            else:
                out.append(node)
        return sorted(out, key=lambda r: -self.priority.get(r, 0))

    def partition_names(self, ranks: tuple[str, ...]) -> list[str]:
        """What a partitioning key (``M`` or ``(M, K)``) finally becomes, top-down."""
        if len(ranks) > 1:
            return self.leaves(self.flattened[ranks])
        return self.leaves(ranks[0])


def split_names(source: str, functions: Sequence[PartitionFn]) -> tuple[list[str], list[str]]:
    """Names created by splitting ``source`` with ``functions``: (final top-down, intermediates)."""
    graph = PartitionGraph()
    graph.add(source, 0)
    _add_split(graph, source, functions)
    return graph.leaves(source), graph.intermediates.get(source, [])


def _add_split(graph: PartitionGraph, source: str, functions: Sequence[PartitionFn]) -> None:
    n = len(functions)
    node = source
    for i, fn in enumerate(functions):
        j = n - i
        if not is_static(fn) and i > 0:
            inter = f"{source}{j}I"
            graph.add(inter, j)
            graph.edge(node, inter)
            graph.intermediates.setdefault(source, []).append(inter)
            node = inter
        graph.add(f"{source}{j}", j)
        graph.edge(node, f"{source}{j}")
    if functions:
        graph.add(f"{source}0", 0)
        graph.edge(node, f"{source}0")


def build_graph(
    entries: Iterable[tuple[tuple[str, ...], Sequence[PartitionFn]]],
) -> PartitionGraph:
    """The partitioning graph of one einsum from its (ranks, effective functions) entries.

    ``follow`` must already be replaced by the leader's functions; empty entries are skipped.
    """
    graph = PartitionGraph()
    for ranks, functions in entries:
        if not functions:
            continue
        if len(ranks) > 1:
            name = "".join(ranks)
            graph.flattened[ranks] = name
            graph.add(name, 0)
            continue
        source = ranks[0]
        graph.priority.setdefault(source, 0)
        _add_split(graph, source, functions)
    return graph


def apply_partitioning(
    einsum_ranks: Sequence[str], parts: Sequence[tuple[str, ...]], graph: PartitionGraph
) -> list[str]:
    """Apply every partitioning that applies, repeatedly (TeAAL's ``partition_ranks`` with
    all levels and swizzling allowed). A flatten of ranks that are adjacent and in order
    replaces them in place; otherwise its result goes to the end."""
    ranks = list(einsum_ranks)
    applied: set[tuple[str, ...]] = set()
    while True:
        used = [p for p in parts if p not in applied and all(r in ranks for r in p)]
        if not used:
            return ranks
        for part in used:
            if not all(r in ranks for r in part):
                continue
            applied.add(part)
            i = ranks.index(part[0])
            in_place = True
            for r in part:
                if i >= len(ranks) or ranks[i] != r:
                    in_place = False
                ranks.remove(r)
            if not in_place:
                i = len(ranks)
            ranks[i:i] = graph.partition_names(part)


# ---- einsum ranks (TeAAL's Equation.get_einsum_ranks) ------------------------------------------


def _index_ranks(indices: Iterable[AffineIndex]) -> list[str]:
    """Ranks named by index variables: plain variables first, then coefficient terms (the
    order TeAAL's parse-tree walk yields them), upper-cased."""
    plain = [v for idx in indices for c, v in idx.terms if c == 1]
    scaled = [v for idx in indices for c, v in idx.terms if c != 1]
    return [v.upper() for v in plain + scaled]


def _term_ranks(term: ExprNode) -> list[str]:
    out: list[str] = []
    for access in expr_accesses(term):
        for r in _index_ranks(access.indices):
            if r not in out:
                out.append(r)
    return out


def term_rank_sets(einsum: Einsum) -> list[tuple[ExprNode, list[str]]]:
    """Each unioned term with the ranks it iterates over."""
    return [(t, _term_ranks(t)) for t in expr_terms(einsum.expr)]


def einsum_ranks(einsum: Einsum) -> list[str]:
    """The unpartitioned loop ranks: the output's ranks, then the first term's new ones.

    TeAAL takes the first product term, or the first ``take`` when there is none.
    """
    out: list[str] = []
    for r in _index_ranks(einsum.output.indices):
        if r not in out:
            out.append(r)
    terms = list(expr_terms(einsum.expr))
    ordered = [t for t in terms if not isinstance(t, Take)] + [
        t for t in terms if isinstance(t, Take)
    ]
    if ordered:
        for r in _term_ranks(ordered[0]):
            if r not in out:
                out.append(r)
    return out
