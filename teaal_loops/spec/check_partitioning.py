"""Validation of one einsum's partitioning, and the final ranks it yields (TeAAL's rules).

Each rule mirrors the TeAAL compiler's (``teaal/parse/partitioning.py`` and
``teaal/ir/partitioning.py``); where TeAAL itself would crash or silently mis-compile, the spec
gets a located error instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from teaal_loops.errors import Location, SpecError
from teaal_loops.spec.context import suggest
from teaal_loops.spec.draft import Draft
from teaal_loops.spec.expressions import expr_accesses
from teaal_loops.spec.key_paths import item
from teaal_loops.spec.model import Einsum, PartitionFn, RankPartitioning
from teaal_loops.spec.ranks import (
    apply_partitioning,
    build_graph,
    einsum_ranks,
    is_static,
    split_names,
)
from teaal_loops.spec.yaml_positions import quote

Functions = tuple[PartitionFn, ...]


def fail(
    message: str, location: Location | None, key_path: str | None, expected: str | None = None
) -> NoReturn:
    raise SpecError(message, location=location, key_path=key_path, expected=expected)


def hint(name: str, choices: Sequence[str]) -> str:
    close = suggest(name, choices)
    return f"; did you mean {close[0]}?" if close else ""


def names(items: Iterable[str]) -> str:
    return ", ".join(items) or "none"


def key_text(ranks: Sequence[str]) -> str:
    return ranks[0] if len(ranks) == 1 else f"({', '.join(ranks)})"


def tensor_ranks(draft: Draft, tensor: str) -> tuple[str, ...]:
    return draft.rank_order.get(tensor, draft.declaration.get(tensor, ()))


@dataclass
class _Scope:
    """What one einsum's partitioning entries are checked against."""

    einsum: Einsum
    base: str  # mapping.partitioning.<output>
    entries: list[RankPartitioning]
    tensors: list[str]
    original: list[str]  # the einsum's ranks before partitioning
    index_math: set[str]  # lower-case variables tied to index arithmetic

    def path_of(self, p: RankPartitioning) -> str:
        return f"{self.base}.{p.name if len(p.ranks) == 1 else key_text(p.ranks)}"


def partition(draft: Draft, einsum: Einsum) -> tuple[tuple[RankPartitioning, ...], tuple[str, ...]]:
    """Check ``einsum``'s partitioning; return the entries with ``produces`` filled in, and the
    einsum's final ranks (its default loop order)."""
    scope = _scope(draft, einsum)
    singles = {p.ranks[0]: p for p in scope.entries if len(p.ranks) == 1 and p.functions}
    effective = {p.ranks: _effective(scope, p, singles) for p in scope.entries}
    produced = _produced(scope, effective)
    flattened = {"".join(p.ranks) for p in scope.entries if len(p.ranks) > 1 and effective[p.ranks]}
    consumed: dict[str, tuple[str, ...]] = {}
    for p in scope.entries:
        _check_key_ranks(scope, p, effective[p.ranks], produced, consumed)
        if not effective[p.ranks]:
            continue
        if len(p.ranks) > 1:
            _check_flatten_sources(scope, p, flattened)
        else:
            _check_split_source(scope, p, effective[p.ranks], flattened)

    graph = build_graph((p.ranks, effective[p.ranks]) for p in scope.entries)
    parts = [p.ranks for p in scope.entries if effective[p.ranks]]
    final = tuple(apply_partitioning(einsum_ranks(einsum), parts, graph))
    return tuple(_completed(p, effective[p.ranks]) for p in scope.entries), final


def _scope(draft: Draft, einsum: Einsum) -> _Scope:
    tensors = [einsum.output.tensor, *(a.tensor for a in expr_accesses(einsum.expr))]
    original: list[str] = []
    for t in tensors:
        original.extend(r for r in tensor_ranks(draft, t) if r not in original)
    original.extend(r for r in einsum_ranks(einsum) if r not in original)
    return _Scope(
        einsum,
        f"mapping.partitioning.{einsum.name}",
        draft.partitioning.get(einsum.name, []),
        tensors,
        original,
        _index_math_vars(draft, einsum),
    )


def _index_math_vars(draft: Draft, einsum: Einsum) -> set[str]:
    """Lower-case names tied to index arithmetic, which TeAAL refuses to flatten: the
    variables of every non-plain index (``q``, ``s`` in ``I[q+s]``) and the rank that index
    addresses (``w`` when I is declared ``[W]``), as TeAAL's coordinate math relates them all.
    """
    out: set[str] = set()
    for access in [einsum.output, *expr_accesses(einsum.expr)]:
        declared = draft.declaration.get(access.tensor, ())
        for rank, index in zip(declared, access.indices, strict=False):
            if not index.is_plain:
                out.update(v.lower() for v in index.variables)
                out.add(rank.lower())
    return out


# ---- one entry at a time: its functions ------------------------------------------------------


def _effective(
    scope: _Scope, p: RankPartitioning, singles: dict[str, RankPartitioning]
) -> Functions:
    """The functions that really split ``p`` (``follow`` replaced by its leader's), after
    checking the rules that concern the entry alone."""
    if not p.functions:
        return ()
    _check_entry_shape(scope, p)
    _check_leaders(scope, p)
    fns = _follow(scope, p, singles)
    _check_function_order(scope, p, fns)
    _check_nesting(scope, p)
    return fns


def _check_entry_shape(scope: _Scope, p: RankPartitioning) -> None:
    path, fns = scope.path_of(p), p.functions
    kinds = [f.kind for f in fns]
    if "flatten" in kinds:
        if len(fns) > 1:
            fail(
                f"flatten() combined with other functions on {key_text(p.ranks)}",
                p.location,
                path,
                expected="flatten() alone; split the flattened rank in its own entry",
            )
        if len(p.ranks) < 2:
            fail(
                f"flatten() must combine at least two ranks; only {p.ranks[0]} given",
                p.location,
                path,
                expected="a tuple key such as (M, K)",
            )
    elif len(p.ranks) != 1:
        fail(
            f"{', '.join(kinds)} can only be applied to one rank, not {key_text(p.ranks)}",
            p.location,
            path,
            expected=f"{key_text(p.ranks)}: [flatten()]",
        )
    if "follow" in kinds and len(fns) > 1:
        fail("follow() must be the only function of its rank", p.location, path)
    if "x_merge_path" in kinds and len(fns) > 1:
        fail("x_merge_path() must be the only function of its rank", p.location, path)


def _check_leaders(scope: _Scope, p: RankPartitioning) -> None:
    for f in p.functions:
        if f.kind in ("uniform_occupancy", "x_merge_path") and f.leader not in scope.tensors:
            fail(
                f"{f.text}: the leader {f.leader} is not a tensor of {quote(scope.einsum.text)}"
                f"{hint(f.leader or '', scope.tensors)}",
                f.location,
                scope.path_of(p),
                expected=f"one of {names(scope.tensors)}",
            )


def _follow(scope: _Scope, p: RankPartitioning, singles: dict[str, RankPartitioning]) -> Functions:
    """``R: [follow(S)]`` splits R with S's functions; anything else splits with its own."""
    if p.functions[0].kind != "follow":
        return p.functions
    fn, path = p.functions[0], scope.path_of(p)
    target = fn.target or ""
    if target == p.name:
        fail(
            f"{fn.text}: a rank cannot follow itself",
            fn.location,
            path,
            expected="follow(R) naming another partitioned rank",
        )
    leader = singles.get(target)
    if leader is None or any(f.kind == "follow" for f in leader.functions):
        fail(
            f"{fn.text}: rank {target} has no partitioning of its own to follow",
            fn.location,
            path,
            expected=f"a rank partitioned in {scope.base} ({names(singles)})",
        )
    return leader.functions


def _check_function_order(scope: _Scope, p: RankPartitioning, fns: Functions) -> None:
    dynamic = False
    for f in fns:
        if not is_static(f) and f.kind != "flatten":
            dynamic = True
        elif f.kind == "nway_shape" and dynamic:
            fail(
                f"{f.text}: n-way partitioning after dynamic partitioning on {p.name}",
                f.location,
                scope.path_of(p),
                expected="nway_shape before any occupancy-based function",
            )


def _check_nesting(scope: _Scope, p: RankPartitioning) -> None:
    """Fixed tile sizes must nest: ``uniform_shape(6), uniform_shape(3)`` cuts tiles of 6 into
    tiles of 3; with 3 then 2, a tile of 2 would straddle two tiles of 3, which no GPU
    schedule can own. Sizes given by parameters are checked when they are bound."""
    fns = p.functions
    for i in range(1, len(fns)):
        outer, inner = fns[i - 1], fns[i]
        if not (outer.kind == inner.kind == "uniform_shape"):
            continue
        if isinstance(outer.size, int) and isinstance(inner.size, int) and outer.size % inner.size:
            fail(
                f"{inner.text} inside {outer.text}: tiles of {inner.size} do not nest in "
                f"tiles of {outer.size}",
                inner.location,
                item(scope.path_of(p), i),
                expected=f"an inner size that divides {outer.size}",
            )


# ---- all entries together: which ranks exist, and which each consumes ------------------------


def _produced(
    scope: _Scope, effective: dict[tuple[str, ...], Functions]
) -> dict[str, tuple[str, ...]]:
    """Every rank name a partitioning creates, mapped to the entry creating it."""
    produced: dict[str, tuple[str, ...]] = {}
    for p in scope.entries:
        fns = effective[p.ranks]
        if not fns:
            continue
        if len(p.ranks) > 1:
            created = ["".join(p.ranks)]
        else:
            leaves, inters = split_names(p.ranks[0], fns)
            created = leaves + inters
        for n in created:
            if n in scope.original:
                fail(
                    f"partitioning {key_text(p.ranks)} creates rank {n}, which already exists",
                    p.location,
                    scope.path_of(p),
                    expected="rank names that do not collide with the einsum's ranks",
                )
            if n in produced and produced[n] != p.ranks:
                fail(
                    f"rank {n} would be created by both {key_text(produced[n])} and "
                    f"{key_text(p.ranks)}",
                    p.location,
                    scope.path_of(p),
                )
            produced[n] = p.ranks
    return produced


def _check_key_ranks(
    scope: _Scope,
    p: RankPartitioning,
    fns: Functions,
    produced: dict[str, tuple[str, ...]],
    consumed: dict[str, tuple[str, ...]],
) -> None:
    """The ranks of ``p``'s key exist, and no other entry partitions them too."""
    path = scope.path_of(p)
    for r in p.ranks:
        if r not in scope.original and r not in produced:
            fail(
                f"rank {r} is not a rank of {quote(scope.einsum.text)}"
                f"{hint(r, [*scope.original, *produced])}",
                p.location,
                path,
                expected=f"one of {names(scope.original)}"
                + (f" or a partitioned rank ({names(produced)})" if produced else ""),
            )
        if not fns:
            continue
        if r in consumed:
            fail(
                f"rank {r} is partitioned by both {key_text(consumed[r])} and {key_text(p.ranks)}",
                p.location,
                path,
                expected="each rank partitioned by one entry",
            )
        consumed[r] = p.ranks


def _check_flatten_sources(scope: _Scope, p: RankPartitioning, flattened: set[str]) -> None:
    path = scope.path_of(p)
    split_alone = {q.ranks[0] for q in scope.entries if len(q.ranks) == 1 and q.functions}
    for r in p.ranks:
        if r.lower() in scope.index_math:
            fail(f"cannot flatten rank {r} because it is used in index math", p.location, path)
        if r in split_alone:
            fail(
                f"cannot flatten rank {r} because it is also partitioned on its own",
                p.location,
                path,
            )
        if r in scope.original:
            continue
        if r in flattened:
            fail(f"cannot flatten rank {r} because it is a flattened rank", p.location, path)
        if r[:-1] not in scope.original or not r.endswith("0"):
            fail(
                f"cannot flatten rank {r} because it will have multiple partitionings",
                p.location,
                path,
                expected="original ranks, or the bottom rank (R0) of a split",
            )


def _check_split_source(
    scope: _Scope, p: RankPartitioning, fns: Functions, flattened: set[str]
) -> None:
    source, path = p.ranks[0], scope.path_of(p)
    for f in fns:
        if is_static(f) and source not in scope.original:
            fail(
                f"{f.text}: shape-based partitioning of {source}, which is "
                + ("a flattened rank" if source in flattened else "not an original rank"),
                f.location,
                path,
                expected="uniform_occupancy(...) on a flattened or derived rank",
            )
        if f.kind == "x_merge_path" and source not in flattened:
            fail(
                f"{f.text}: x_merge_path partitions a flattened rank (such as MK from "
                f"(M, K): [flatten()]), and {source} is not one",
                f.location,
                path,
                expected="x_merge_path on a flattened rank",
            )


def _completed(p: RankPartitioning, fns: Functions) -> RankPartitioning:
    if not fns:
        return p
    if len(p.ranks) > 1:
        return dataclasses.replace(p, produces=("".join(p.ranks),))
    leaves, inters = split_names(p.ranks[0], fns)
    return dataclasses.replace(p, produces=tuple(leaves), intermediates=tuple(inters))
