"""Semantic checks of a parsed spec and the derived rank names (TeAAL's rules).

Input is the :class:`~teaal_loops.spec.draft.Draft` (structure already checked); output is the
immutable :class:`~teaal_loops.spec.model.Spec` with ``final_ranks``, ``parameters`` and every
partitioning's ``produces`` filled in. This module checks declarations, rank orders, einsums and
formats; :mod:`~teaal_loops.spec.check_partitioning` the partitioning and
:mod:`~teaal_loops.spec.check_order` loop orders and spacetime. Where TeAAL itself would crash
or silently mis-compile, the spec gets a located error instead.
"""

from __future__ import annotations

from types import MappingProxyType

from teaal_loops.spec.check_order import check_loop_order, check_spacetime
from teaal_loops.spec.check_partitioning import fail, hint, names, partition
from teaal_loops.spec.context import Context
from teaal_loops.spec.draft import Draft
from teaal_loops.spec.expressions import expr_accesses, expr_to_str
from teaal_loops.spec.key_paths import item
from teaal_loops.spec.model import Einsum, Mapping_, RankPartitioning, Spec, TensorAccess
from teaal_loops.spec.ranks import term_rank_sets
from teaal_loops.spec.yaml_positions import quote

Partitioning = dict[str, tuple[RankPartitioning, ...]]


def build_spec(draft: Draft, ctx: Context) -> Spec:
    _check_declaration(draft)
    _check_rank_order(draft)
    for i, einsum in enumerate(draft.einsums):
        _check_einsum(draft, einsum, draft.einsum_paths[i])
    outputs = _check_outputs(draft)
    final_ranks, partitioning = _final_ranks(draft, ctx)
    _check_formats(draft, ctx, partitioning)
    for name, entry in draft.bindings_loc.items():
        if name not in outputs:
            ctx.warn(
                f"bindings for {name}, which is not the output of any einsum{hint(name, outputs)}",
                entry.key_location,
                f"bindings.{name}",
            )
    parameters = _parameters(draft, ctx, partitioning)
    rank_order = {t: draft.rank_order.get(t, ranks) for t, ranks in draft.declaration.items()}
    mapping = Mapping_(
        rank_order=MappingProxyType(rank_order),
        partitioning=MappingProxyType(partitioning),
        loop_order=MappingProxyType(dict(draft.loop_order)),
        spacetime=MappingProxyType(dict(draft.spacetime)),
    )
    return Spec(
        source=draft.source,
        declaration=MappingProxyType(dict(draft.declaration)),
        einsums=tuple(draft.einsums),
        mapping=mapping,
        formats=MappingProxyType(dict(draft.formats)),
        architecture=draft.architecture,
        bindings=draft.bindings,
        extensions=draft.extensions,
        final_ranks=MappingProxyType(final_ranks),
        parameters=parameters,
        warnings=tuple(ctx.warnings),
        key_locations=MappingProxyType(draft.locations),
    )


def _final_ranks(draft: Draft, ctx: Context) -> tuple[dict[str, tuple[str, ...]], Partitioning]:
    """Partition every einsum; check its loop order and spacetime against its final ranks."""
    final_ranks: dict[str, tuple[str, ...]] = {}
    partitioning: Partitioning = {}
    for einsum in draft.einsums:
        out = einsum.name
        parts, final = partition(draft, einsum)
        if out in draft.partitioning:
            partitioning[out] = parts
        if out in final_ranks and final_ranks[out] != final:
            ctx.warn(
                f"einsums writing {out} have different final ranks ([{', '.join(final_ranks[out])}]"
                f" and [{', '.join(final)}]); final_ranks reports the first",
                einsum.location,
                "einsum.expressions",
            )
        final_ranks.setdefault(out, final)
        check_loop_order(draft, out, final)
        check_spacetime(draft, out, final)
    return final_ranks, partitioning


# ------------------------------------------------------------------------------------------
# Declaration, rank orders, einsums
# ------------------------------------------------------------------------------------------


def _check_declaration(draft: Draft) -> None:
    for tensor, ranks in draft.declaration.items():
        for i, rank in enumerate(ranks):
            if rank != rank.upper():
                path = f"einsum.declaration.{tensor}"
                fail(
                    f"rank {rank} of {tensor} is not upper-case (index variable "
                    f"{rank.lower()} belongs to rank {rank.upper()})",
                    draft.location_of(item(path, i)),
                    path,
                    expected="upper-case rank names such as M, K",
                )


def _check_rank_order(draft: Draft) -> None:
    for tensor, order in draft.rank_order.items():
        entry = draft.rank_order_loc[tensor]
        path = f"mapping.rank-order.{tensor}"
        if tensor not in draft.declaration:
            fail(
                f"{tensor} is not a declared tensor{hint(tensor, list(draft.declaration))}",
                entry.key_location,
                path,
                expected=f"a declared tensor ({names(draft.declaration)})",
            )
        declared = draft.declaration[tensor]
        if sorted(order) != sorted(declared):
            fail(
                f"[{', '.join(order)}] is not an order of {tensor}'s declared ranks "
                f"[{', '.join(declared)}]",
                draft.location_of(path),
                path,
                expected=f"a permutation of [{', '.join(declared)}]",
            )


def _check_einsum(draft: Draft, einsum: Einsum, path: str) -> None:
    seen: set[str] = set()
    for access in [einsum.output, *expr_accesses(einsum.expr)]:
        _check_access(draft, einsum, access, path, seen)
    terms = term_rank_sets(einsum)
    first = set(terms[0][1])
    for term, ranks in terms[1:]:
        if set(ranks) != first:
            where = expr_accesses(term)
            fail(
                f"malformed einsum {quote(einsum.text)}: every term must iterate over the same "
                "ranks "
                f"(first term: {names(terms[0][1])}; {expr_to_str(term)}: {names(ranks)})",
                where[0].location if where else einsum.location,
                path,
            )


def _check_access(
    draft: Draft, einsum: Einsum, access: TensorAccess, path: str, seen: set[str]
) -> None:
    """One tensor of an einsum: declared, used once, indexed by its declared ranks."""
    name = access.tensor
    if name not in draft.declaration:
        fail(
            f"tensor {name} is not declared{hint(name, list(draft.declaration))}",
            access.location,
            path,
            expected=f"a tensor of einsum.declaration ({names(draft.declaration)})",
        )
    if name in seen:
        fail(
            f"tensor {name} appears twice in {quote(einsum.text)} (TeAAL allows each tensor once "
            "per einsum)",
            access.location,
            path,
        )
    seen.add(name)
    declared = draft.declaration[name]
    if len(access.indices) != len(declared):
        fail(
            f"{name} is declared with {len(declared)} rank{'s' if len(declared) != 1 else ''} "
            f"[{', '.join(declared)}] but indexed with {len(access.indices)} in "
            f"{expr_to_str(access)}",
            access.location,
            path,
            expected=f"{len(declared)} indices",
        )
    for rank, index in zip(declared, access.indices, strict=True):
        if index.is_plain and index.terms[0][1].upper() != rank:
            var = index.terms[0][1]
            fail(
                f"index {var} of {name} belongs to rank {var.upper()}, but {name}'s rank "
                f"there is {rank} (declared [{', '.join(declared)}])",
                access.location,
                path,
                expected=f"index {rank.lower()} (indices follow the declaration order)",
            )


def _check_outputs(draft: Draft) -> list[str]:
    """The einsum outputs, each once, and no mapping entry for anything else. TeAAL allows
    several einsums to write one tensor (its example7); they then share that output's
    mapping."""
    outputs: list[str] = []
    for einsum in draft.einsums:
        if einsum.name not in outputs:
            outputs.append(einsum.name)
    for section, locs in (
        ("partitioning", draft.partitioning_loc),
        ("loop-order", draft.loop_order_loc),
        ("spacetime", draft.spacetime_loc),
    ):
        for name, entry in locs.items():
            if name not in outputs:
                fail(
                    f"{name} is not the output of any einsum{hint(name, outputs)}",
                    entry.key_location,
                    f"mapping.{section}.{name}",
                    expected=f"one of the einsum outputs ({names(outputs)})",
                )
    return outputs


def _parameters(draft: Draft, ctx: Context, partitioning: Partitioning) -> tuple[str, ...]:
    """The size parameters, in order of appearance; warn about defaults nothing uses."""
    out: list[str] = []
    for parts in partitioning.values():
        for p in parts:
            for f in p.functions:
                if f.parameter is not None and f.parameter not in out:
                    out.append(f.parameter)
    for name in draft.extensions.params if draft.extensions else ():
        if name not in out:
            path = f"x-teaal-loops.params.{name}"
            ctx.warn(
                f"default for {name}, which no partitioning uses "
                f"(parameters: {names(out)}){hint(name, out)}",
                draft.location_of(path),
                path,
            )
    return tuple(out)


# ------------------------------------------------------------------------------------------
# Formats
# ------------------------------------------------------------------------------------------


def _check_formats(draft: Draft, ctx: Context, partitioning: Partitioning) -> None:
    """Formats of undeclared tensors, and format ranks that no einsum can produce, are
    ignored by TeAAL (a format is only used when its rank order matches the loop order); we
    say so."""
    derived: set[str] = set()
    for parts in partitioning.values():
        for p in parts:
            derived.update(p.produces)
            derived.update(p.intermediates)
    for tensor, entry in draft.formats_loc.items():
        if tensor not in draft.declaration:
            ctx.warn(
                f"format for {tensor}, which is not a declared tensor"
                f"{hint(tensor, list(draft.declaration))}",
                entry.key_location,
                f"format.{tensor}",
            )
            continue
        known = set(draft.declaration[tensor]) | derived
        for fmt in draft.formats.get(tensor, ()):
            unknown = [r for r in fmt.rank_order if r not in known]
            if unknown:
                path = f"format.{tensor}.{fmt.name}.rank-order"
                ctx.warn(
                    f"rank-order names {names(unknown)}, which {tensor} neither declares nor "
                    f"gets from any partitioning{hint(unknown[0], sorted(known))}",
                    draft.location_of(path),
                    path,
                )
