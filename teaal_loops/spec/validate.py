"""Semantic checks of a parsed spec and the derived rank names (TeAAL's rules).

Input is the :class:`~teaal_loops.spec.parse.Draft` (structure already checked); output is the
immutable :class:`~teaal_loops.spec.model.Spec` with ``final_ranks``, ``parameters`` and every
partitioning's ``produces`` filled in. Each check mirrors a rule of the TeAAL compiler (noted
where TeAAL itself would crash or silently mis-compile, we give a located error instead).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import NoReturn

from teaal_loops.errors import Location, SpecError
from teaal_loops.spec.expressions import expr_accesses, expr_to_str
from teaal_loops.spec.model import (
    Einsum,
    Mapping_,
    PartitionFn,
    RankPartitioning,
    SpaceTime,
    Spec,
    TensorAccess,
)
from teaal_loops.spec.parse import Context, Draft
from teaal_loops.spec.ranks import (
    apply_partitioning,
    build_graph,
    einsum_ranks,
    is_static,
    split_names,
    term_rank_sets,
)


def _fail(
    message: str, location: Location | None, key_path: str | None, expected: str | None = None
) -> NoReturn:
    raise SpecError(message, location=location, key_path=key_path, expected=expected)


def _suggest(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _names(items: Iterable[str]) -> str:
    return ", ".join(items) or "none"


def build_spec(draft: Draft, ctx: Context) -> Spec:
    _check_declaration(draft)
    _check_rank_order(draft)
    for i, einsum in enumerate(draft.einsums):
        _check_einsum(draft, einsum, draft.einsum_paths[i])
    outputs = _check_outputs(draft)

    for section, locs in (
        ("partitioning", draft.partitioning_loc),
        ("loop-order", draft.loop_order_loc),
        ("spacetime", draft.spacetime_loc),
    ):
        for name, entry in locs.items():
            if name not in outputs:
                _fail(
                    f"{name} is not the output of any einsum{_suggest(name, outputs)}",
                    entry.key_location,
                    f"mapping.{section}.{name}",
                    expected=f"one of the einsum outputs ({_names(outputs)})",
                )

    final_ranks: dict[str, tuple[str, ...]] = {}
    partitioning: dict[str, tuple[RankPartitioning, ...]] = {}
    for einsum in draft.einsums:
        out = einsum.name
        parts, final = _partition(draft, einsum)
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
        _check_loop_order(draft, out, final)
        _check_spacetime(draft, out, final, ctx)

    _check_formats(draft, ctx, partitioning)
    for name, entry in draft.bindings_loc.items():
        if name not in outputs:
            ctx.warn(
                f"bindings for {name}, which is not the output of any einsum"
                f"{_suggest(name, outputs)}",
                entry.key_location,
                f"bindings.{name}",
            )

    parameters = _parameters(partitioning)
    if draft.extensions is not None:
        for name in draft.extensions.params:
            if name not in parameters:
                ctx.warn(
                    f"default for {name}, which no partitioning uses "
                    f"(parameters: {_names(parameters)}){_suggest(name, parameters)}",
                    draft.extensions.location,
                    f"x-teaal-loops.params.{name}",
                )

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
    )


# ------------------------------------------------------------------------------------------
# Declaration, rank orders, einsums
# ------------------------------------------------------------------------------------------


def _check_declaration(draft: Draft) -> None:
    for tensor, ranks in draft.declaration.items():
        for rank in ranks:
            if rank != rank.upper():
                _fail(
                    f"rank {rank} of {tensor} is not upper-case (index variable "
                    f"{rank.lower()} belongs to rank {rank.upper()})",
                    draft.declaration_loc[tensor].key_location,
                    f"einsum.declaration.{tensor}",
                    expected="upper-case rank names such as M, K",
                )


def _check_rank_order(draft: Draft) -> None:
    for tensor, order in draft.rank_order.items():
        entry = draft.rank_order_loc[tensor]
        path = f"mapping.rank-order.{tensor}"
        if tensor not in draft.declaration:
            _fail(
                f"{tensor} is not a declared tensor{_suggest(tensor, draft.declaration)}",
                entry.key_location,
                path,
                expected=f"a declared tensor ({_names(draft.declaration)})",
            )
        declared = draft.declaration[tensor]
        if sorted(order) != sorted(declared):
            _fail(
                f"[{', '.join(order)}] is not an order of {tensor}'s declared ranks "
                f"[{', '.join(declared)}]",
                entry.key_location,
                path,
                expected=f"a permutation of [{', '.join(declared)}]",
            )


def _tensor_ranks(draft: Draft, tensor: str) -> tuple[str, ...]:
    return draft.rank_order.get(tensor, draft.declaration.get(tensor, ()))


def _check_einsum(draft: Draft, einsum: Einsum, path: str) -> None:
    accesses = [einsum.output, *expr_accesses(einsum.expr)]
    seen: dict[str, TensorAccess] = {}
    for access in accesses:
        name = access.tensor
        if name not in draft.declaration:
            _fail(
                f"tensor {name} is not declared{_suggest(name, draft.declaration)}",
                access.location,
                path,
                expected=f"a tensor of einsum.declaration ({_names(draft.declaration)})",
            )
        if name in seen:
            _fail(
                f"tensor {name} appears twice in {einsum.text!r} (TeAAL allows each tensor once "
                "per einsum)",
                access.location,
                path,
            )
        seen[name] = access
        declared = draft.declaration[name]
        if len(access.indices) != len(declared):
            _fail(
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
                _fail(
                    f"index {var} of {name} belongs to rank {var.upper()}, but {name}'s rank "
                    f"there is {rank} (declared [{', '.join(declared)}])",
                    access.location,
                    path,
                    expected=f"index {rank.lower()} (indices follow the declaration order)",
                )
    terms = term_rank_sets(einsum)
    first = set(terms[0][1])
    for term, ranks in terms[1:]:
        if set(ranks) != first:
            where = expr_accesses(term)
            _fail(
                f"malformed einsum {einsum.text!r}: every term must iterate over the same ranks "
                f"(first term: {_names(terms[0][1])}; {expr_to_str(term)}: {_names(ranks)})",
                where[0].location if where else einsum.location,
                path,
            )


def _check_outputs(draft: Draft) -> list[str]:
    """The einsum outputs, each once. TeAAL allows several einsums to write one tensor (its
    example7); they then share that output's mapping."""
    outputs: list[str] = []
    for einsum in draft.einsums:
        if einsum.name not in outputs:
            outputs.append(einsum.name)
    return outputs


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


# ------------------------------------------------------------------------------------------
# Partitioning and the final ranks
# ------------------------------------------------------------------------------------------


def _partition(
    draft: Draft, einsum: Einsum
) -> tuple[tuple[RankPartitioning, ...], tuple[str, ...]]:
    out = einsum.name
    base = f"mapping.partitioning.{out}"
    entries = draft.partitioning.get(out, [])
    tensors = [einsum.output.tensor, *(a.tensor for a in expr_accesses(einsum.expr))]
    loop_ranks = einsum_ranks(einsum)
    original: list[str] = []
    for t in tensors:
        original.extend(r for r in _tensor_ranks(draft, t) if r not in original)
    original.extend(r for r in loop_ranks if r not in original)
    index_math = _index_math_vars(draft, einsum)

    by_key = {p.ranks: p for p in entries}
    singles = {p.ranks[0]: p for p in entries if len(p.ranks) == 1 and p.functions}

    def path_of(p: RankPartitioning) -> str:
        return f"{base}.{p.name if len(p.ranks) == 1 else '(' + ', '.join(p.ranks) + ')'}"

    # Effective functions (follow replaced by the leader's) and per-entry structural rules.
    effective: dict[tuple[str, ...], tuple[PartitionFn, ...]] = {}
    for p in entries:
        path = path_of(p)
        fns = p.functions
        kinds = [f.kind for f in fns]
        if not fns:
            effective[p.ranks] = ()
            continue
        if "flatten" in kinds:
            if len(fns) > 1:
                _fail(
                    f"flatten() combined with other functions on {_key_text(p.ranks)}",
                    p.location,
                    path,
                    expected="flatten() alone; split the flattened rank in its own entry",
                )
            if len(p.ranks) < 2:
                _fail(
                    f"flatten() must combine at least two ranks; only {p.ranks[0]} given",
                    p.location,
                    path,
                    expected="a tuple key such as (M, K)",
                )
        elif len(p.ranks) != 1:
            _fail(
                f"{', '.join(kinds)} can only be applied to one rank, not {_key_text(p.ranks)}",
                p.location,
                path,
                expected=f"{_key_text(p.ranks)}: [flatten()]",
            )
        for f in fns:
            if f.kind in ("uniform_occupancy", "x_merge_path") and f.leader not in tensors:
                _fail(
                    f"{f.text}: the leader {f.leader} is not a tensor of {einsum.text!r}"
                    f"{_suggest(f.leader or '', tensors)}",
                    f.location,
                    path,
                    expected=f"one of {_names(tensors)}",
                )
        if "follow" in kinds:
            if len(fns) > 1:
                _fail("follow() must be the only function of its rank", p.location, path)
            target = fns[0].target or ""
            leader = singles.get(target)
            if target == p.name:
                _fail(
                    f"{fns[0].text}: a rank cannot follow itself",
                    fns[0].location,
                    path,
                    expected="follow(R) naming another partitioned rank",
                )
            if leader is None or any(f.kind == "follow" for f in leader.functions):
                _fail(
                    f"{fns[0].text}: rank {target} has no partitioning of its own to follow",
                    fns[0].location,
                    path,
                    expected=f"a rank partitioned in {base} ({_names(singles)})",
                )
            fns = leader.functions
        dynamic = False
        for f in fns:
            if not is_static(f) and f.kind != "flatten":
                dynamic = True
            elif f.kind == "nway_shape" and dynamic:
                _fail(
                    f"{f.text}: n-way partitioning after dynamic partitioning on {p.name}",
                    f.location,
                    path,
                    expected="nway_shape before any occupancy-based function",
                )
        if "x_merge_path" in kinds and len(fns) > 1:
            _fail("x_merge_path() must be the only function of its rank", p.location, path)
        effective[p.ranks] = fns

    # Which names exist: the original ranks plus everything a partitioning creates.
    produced: dict[str, tuple[str, ...]] = {}
    for p in entries:
        fns = effective[p.ranks]
        if not fns:
            continue
        if len(p.ranks) > 1:
            names = ["".join(p.ranks)]
        else:
            leaves, inters = split_names(p.ranks[0], fns)
            names = leaves + inters
        for n in names:
            if n in original:
                _fail(
                    f"partitioning {_key_text(p.ranks)} creates rank {n}, which already exists",
                    p.location,
                    path_of(p),
                    expected="rank names that do not collide with the einsum's ranks",
                )
            if n in produced and produced[n] != p.ranks:
                _fail(
                    f"rank {n} would be created by both {_key_text(produced[n])} and "
                    f"{_key_text(p.ranks)}",
                    p.location,
                    path_of(p),
                )
            produced[n] = p.ranks
    flattened = {"".join(p.ranks) for p in entries if len(p.ranks) > 1 and effective[p.ranks]}

    consumed: dict[str, tuple[str, ...]] = {}
    for p in entries:
        path = path_of(p)
        fns = effective[p.ranks]
        for r in p.ranks:
            if r not in original and r not in produced:
                _fail(
                    f"rank {r} is not a rank of {einsum.text!r}"
                    f"{_suggest(r, [*original, *produced])}",
                    p.location,
                    path,
                    expected=f"one of {_names(original)}"
                    + (f" or a partitioned rank ({_names(produced)})" if produced else ""),
                )
            if not fns:
                continue
            if r in consumed:
                _fail(
                    f"rank {r} is partitioned by both {_key_text(consumed[r])} and "
                    f"{_key_text(p.ranks)}",
                    p.location,
                    path,
                    expected="each rank partitioned by one entry",
                )
            consumed[r] = p.ranks
        if not fns:
            continue
        if len(p.ranks) > 1:
            for r in p.ranks:
                if r.lower() in index_math:
                    _fail(
                        f"cannot flatten rank {r} because it is used in index math",
                        p.location,
                        path,
                    )
                if (r,) in by_key and by_key[(r,)].functions:
                    _fail(
                        f"cannot flatten rank {r} because it is also partitioned on its own",
                        p.location,
                        path,
                    )
                if r not in original:
                    if r in flattened:
                        _fail(
                            f"cannot flatten rank {r} because it is a flattened rank",
                            p.location,
                            path,
                        )
                    if r[:-1] not in original or not r.endswith("0"):
                        _fail(
                            f"cannot flatten rank {r} because it will have multiple partitionings",
                            p.location,
                            path,
                            expected="original ranks, or the bottom rank (R0) of a split",
                        )
            continue
        source = p.ranks[0]
        for f in fns:
            if is_static(f) and source not in original:
                _fail(
                    f"{f.text}: shape-based partitioning of {source}, which is "
                    + ("a flattened rank" if source in flattened else "not an original rank"),
                    f.location,
                    path,
                    expected="uniform_occupancy(...) on a flattened or derived rank",
                )
            if f.kind == "x_merge_path" and source not in flattened:
                _fail(
                    f"{f.text}: x_merge_path partitions a flattened rank (such as MK from "
                    f"(M, K): [flatten()]), and {source} is not one",
                    f.location,
                    path,
                    expected="x_merge_path on a flattened rank",
                )

    graph = build_graph((p.ranks, effective[p.ranks]) for p in entries)
    parts: list[tuple[str, ...]] = [p.ranks for p in entries if effective[p.ranks]]
    final = tuple(apply_partitioning(loop_ranks, parts, graph))

    completed: list[RankPartitioning] = []
    for p in entries:
        fns = effective[p.ranks]
        if not fns:
            completed.append(p)
        elif len(p.ranks) > 1:
            completed.append(dataclasses.replace(p, produces=("".join(p.ranks),)))
        else:
            leaves, inters = split_names(p.ranks[0], fns)
            completed.append(
                dataclasses.replace(p, produces=tuple(leaves), intermediates=tuple(inters))
            )
    return tuple(completed), final


def _key_text(ranks: Sequence[str]) -> str:
    return ranks[0] if len(ranks) == 1 else f"({', '.join(ranks)})"


def _parameters(partitioning: dict[str, tuple[RankPartitioning, ...]]) -> tuple[str, ...]:
    out: list[str] = []
    for parts in partitioning.values():
        for p in parts:
            for f in p.functions:
                if f.parameter is not None and f.parameter not in out:
                    out.append(f.parameter)
    return tuple(out)


# ------------------------------------------------------------------------------------------
# Loop order, spacetime, formats
# ------------------------------------------------------------------------------------------


def _check_loop_order(draft: Draft, out: str, final: tuple[str, ...]) -> None:
    order = draft.loop_order.get(out)
    if order is None:
        return
    entry = draft.loop_order_loc[out]
    path = f"mapping.loop-order.{out}"
    unknown = [r for r in order if r not in final]
    missing = [r for r in final if r not in order]
    if unknown:
        r = unknown[0]
        _fail(
            f"{r} is not a final rank of {out}{_suggest(r, final)}",
            entry.key_location,
            path,
            expected=f"a permutation of the final ranks [{', '.join(final)}]",
        )
    if missing:
        _fail(
            f"the loop order [{', '.join(order)}] leaves out {_names(missing)}",
            entry.key_location,
            path,
            expected=f"every final rank once: a permutation of [{', '.join(final)}]",
        )


def _check_spacetime(draft: Draft, out: str, final: tuple[str, ...], ctx: Context) -> None:
    st: SpaceTime | None = draft.spacetime.get(out)
    if st is None:
        return
    entry = draft.spacetime_loc[out]
    seen: dict[str, str] = {}
    for stamp, ranks in (("space", st.space), ("time", st.time)):
        path = f"mapping.spacetime.{out}.{stamp}"
        for r in ranks:
            if r.rank not in final:
                _fail(
                    f"{r.rank} is not a final rank of {out}{_suggest(r.rank, final)}",
                    entry.key_location,
                    path,
                    expected=f"ranks from [{', '.join(final)}]",
                )
            if r.rank in seen:
                _fail(
                    f"{r.rank} is listed twice (in {seen[r.rank]} and {stamp})",
                    entry.key_location,
                    path,
                    expected="each final rank in space or time, once",
                )
            seen[r.rank] = stamp
    missing = [r for r in final if r not in seen]
    if missing:
        ctx.warn(
            f"spacetime of {out} does not place {_names(missing)} in space or time "
            "(TeAAL allows it; teaal-loops cannot lower it)",
            entry.key_location,
            f"mapping.spacetime.{out}",
        )


def _check_formats(
    draft: Draft, ctx: Context, partitioning: dict[str, tuple[RankPartitioning, ...]]
) -> None:
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
                f"{_suggest(tensor, draft.declaration)}",
                entry.key_location,
                f"format.{tensor}",
            )
            continue
        known = set(draft.declaration[tensor]) | derived
        for fmt in draft.formats.get(tensor, ()):
            unknown = [r for r in fmt.rank_order if r not in known]
            if unknown:
                ctx.warn(
                    f"rank-order names {_names(unknown)}, which {tensor} neither declares nor "
                    f"gets from any partitioning{_suggest(unknown[0], known)}",
                    fmt.location,
                    f"format.{tensor}.{fmt.name}.rank-order",
                )
