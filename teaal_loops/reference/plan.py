"""From a parsed spec to a per-einsum plan of the HiFiber program (what to split, swizzle,
flatten and co-iterate), refusing what the reference does not support with a message.

The translation follows the TeAAL compiler's (``teaal/trans``), reimplemented for the subset
we support:

* static partitioning (``uniform_shape``, top-level ``nway_shape``) happens before the loop
  nest with ``splitUniform``; the output is created with its final ranks and merged back
  (``mergeRanks(coord_style="absolute")``) afterwards;
* dynamic partitioning (one ``uniform_occupancy`` per rank, our ``x_merge_path`` on a flattened
  rank) happens inside the loop nest, just before the loop over its upper rank: the leader is
  split with ``splitEqual`` (``splitUnEqual`` at the merge-path boundaries), the other tensors
  with ``splitNonUniform`` at the leader's split points;
* ``flatten()`` flattens the leader (``flattenRanks(coord_style="tuple")``); every other
  tensor reaches the flattened coordinates with ``getPayload``/``getPayloadRef``;
* every tensor is swizzled into loop order; a flattened rank counts, for the leader, at its
  upper loop and, for the others, at its bottom loop.

Every name the program will use (tensors, ranks, index variables, scalars, parameters) is
checked to be an identifier first (:mod:`teaal_loops.reference.names`), and every size to be a
positive int or a parameter of the spec.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from teaal_loops.errors import ParameterError
from teaal_loops.reference.names import check_identifier, check_size, comment
from teaal_loops.reference.plan_model import (
    SUPPORTED,
    DynamicSplit,
    EinsumPlan,
    Flatten,
    Size,
    StaticChain,
    TensorPlan,
    Width,
    refuse,
)
from teaal_loops.reference.plan_order import (
    check_coverage,
    check_loop_order,
    rank_formats,
    slots_in_loop_order,
)
from teaal_loops.spec.expressions import expr_accesses
from teaal_loops.spec.model import (
    Einsum,
    ExprNode,
    Intersect,
    PartitionFn,
    RankPartitioning,
    ScalarRef,
    Spec,
    TensorAccess,
    Union,
)

__all__ = [
    "SUPPORTED",
    "DynamicSplit",
    "EinsumPlan",
    "Flatten",
    "StaticChain",
    "TensorPlan",
    "Width",
    "bind_params",
    "plan_spec",
]

_refuse = refuse


def bind_params(spec: Spec, params: Mapping[str, int]) -> dict[str, int]:
    """Every parameter of the spec bound to a positive int (spec defaults, then ``params``)."""
    values: dict[str, int] = {}
    if spec.extensions is not None:
        values.update(spec.extensions.params)
    values.update(params)
    for name in spec.parameters:
        check_identifier(name, "parameter")
    missing = [p for p in spec.parameters if p not in values]
    if missing:
        raise ParameterError(
            f"the HiFiber reference needs a value for {', '.join(missing)} "
            f"(give --param {missing[0]}=VALUE)"
        )
    for name in spec.parameters:
        value = values[name]
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ParameterError(
                f"parameter {name} must be a positive integer, got {comment(repr(value))}"
            )
    return {p: values[p] for p in spec.parameters}


def plan_spec(spec: Spec) -> list[EinsumPlan]:
    _check_spec_names(spec)
    outputs = [e.name for e in spec.einsums]
    if len(set(outputs)) != len(outputs):
        dup = next(o for o in outputs if outputs.count(o) > 1)
        e = spec.einsums[[x.name for x in spec.einsums].index(dup)]
        raise _refuse(e, f"{dup} is the output of two einsums (TeAAL would overwrite it)")
    plans = []
    produced: set[str] = set()
    for einsum in spec.einsums:
        plans.append(_plan_einsum(spec, einsum, produced))
        produced.add(einsum.name)
    return plans


# --------------------------------------------------------------------------------------------
# Names the program will use
# --------------------------------------------------------------------------------------------


def _spec_names(spec: Spec) -> Iterator[tuple[str, object]]:
    """(what, name) for every name of the spec that the HiFiber program may contain."""
    for tensor, ranks in spec.declaration.items():
        yield "tensor", tensor
        yield from (("rank", r) for r in ranks)
    for tensor, order in spec.mapping.rank_order.items():
        yield "tensor", tensor
        yield from (("rank", r) for r in order)
    for parts in spec.mapping.partitioning.values():
        for part in parts:
            yield from (("rank", r) for r in (*part.ranks, *part.produces))
            for fn in part.functions:
                if fn.leader is not None:
                    yield "tensor", fn.leader
                if isinstance(fn.size, str):
                    yield "parameter", fn.size
    for order in spec.mapping.loop_order.values():
        yield from (("rank", r) for r in order)
    for st in spec.mapping.spacetime.values():
        yield from (("rank", r.rank) for r in (*st.space, *st.time))
    for e in spec.einsums:
        for acc in [e.output, *expr_accesses(e.expr)]:
            yield "tensor", acc.tensor
            for idx in acc.indices:
                yield from (("index variable", v) for v in idx.variables)
        yield from (("scalar", s) for s in _scalars(e.expr))
    yield from (("parameter", p) for p in spec.parameters)


def _check_spec_names(spec: Spec) -> None:
    for what, name in _spec_names(spec):
        check_identifier(name, what)


# --------------------------------------------------------------------------------------------
# One einsum
# --------------------------------------------------------------------------------------------


def _plan_einsum(spec: Spec, e: Einsum, produced: set[str]) -> EinsumPlan:
    out = e.name
    _check_expr(e, e.expr, top=True)
    accesses = expr_accesses(e.expr)
    scalars = tuple(dict.fromkeys(_scalars(e.expr)))
    _check_accesses(spec, e, accesses)
    index_vars, reduction = _index_vars(spec, e, accesses, scalars)
    ranks = {v.upper() for v in index_vars}
    chains, dynamic, flat_parts = _partitions(spec, e, accesses)
    flattens = _flattens(spec, e, accesses, chains, dynamic, flat_parts)
    _check_partition_combinations(e, ranks, chains, dynamic, flattens)

    def rank_order(name: str) -> tuple[str, ...]:
        return tuple(spec.mapping.rank_order.get(name, spec.declaration[name]))

    def tensor(name: str, is_output: bool) -> TensorPlan:
        return TensorPlan(name, rank_order(name), [], is_output, tuple(spec.declaration[name]))

    plan = EinsumPlan(
        einsum=e,
        output=tensor(out, True),
        inputs=[tensor(a.tensor, False) for a in accesses],
        loop_order=tuple(spec.loop_order_of(out)),
        chains=chains,
        dynamic=dynamic,
        flattens=flattens,
        space=(),
        time=(),
        index_vars=index_vars,
        reduction=reduction,
        scalars=scalars,
    )
    check_loop_order(plan)
    for t in [plan.output, *plan.inputs]:
        t.slots = slots_in_loop_order(plan, t)
    check_coverage(plan)
    _set_spacetime(spec, plan)
    plan.formats = {t.name: rank_formats(spec, t, t.name in produced) for t in plan.inputs}
    return plan


def _check_accesses(spec: Spec, e: Einsum, accesses: list[TensorAccess]) -> None:
    """Plain indices that name their ranks; every input once, not the output, not rank-0."""
    for acc in [e.output, *accesses]:
        declared = spec.declaration[acc.tensor]
        for idx, rank in zip(acc.indices, declared, strict=True):
            if not idx.is_plain:
                raise _refuse(e, f"index expression {idx} of {acc.tensor} (index arithmetic)")
            if idx.variables[0].upper() != rank:
                raise _refuse(
                    e,
                    f"{acc.tensor}[{', '.join(map(str, acc.indices))}] indexes rank {rank} with "
                    f"{idx.variables[0]} (index variables must name their ranks)",
                )
        names = [i.variables[0] for i in acc.indices]
        if len(set(names)) != len(names):
            raise _refuse(e, f"{acc.tensor} is indexed twice by one variable (a diagonal)")
    seen: list[str] = []
    for acc in accesses:
        if acc.tensor == e.name:
            raise _refuse(e, f"{e.name} is read by the einsum that writes it")
        if acc.tensor in seen:
            raise _refuse(e, f"{acc.tensor} appears twice in one einsum")
        seen.append(acc.tensor)
        if not spec.declaration[acc.tensor]:
            raise _refuse(e, f"{acc.tensor} is a rank-0 tensor input (use a bare scalar name)")


def _index_vars(
    spec: Spec, e: Einsum, accesses: list[TensorAccess], scalars: tuple[str, ...]
) -> tuple[tuple[str, ...], bool]:
    """(the output's index variables, then the inputs' new ones; whether it is a reduction)."""
    out_vars = [i.variables[0] for i in e.output.indices]
    in_vars: list[str] = []
    for acc in accesses:
        for i in acc.indices:
            if i.variables[0] not in in_vars:
                in_vars.append(i.variables[0])
    for v in out_vars:
        if v not in in_vars:
            raise _refuse(e, f"output index {v} appears in no input (nothing to iterate)")
    clash = set(scalars) & (set(in_vars) | set(spec.declaration))
    if clash:
        raise _refuse(e, f"scalar {sorted(clash)[0]} has the name of an index or a tensor")
    reduction = any(v not in out_vars for v in in_vars)
    return tuple(dict.fromkeys(out_vars + in_vars)), reduction


# ---- partitioning ----------------------------------------------------------------------------


def _size(spec: Spec, e: Einsum, fn: PartitionFn, key: str) -> Size:
    """A partition size: a positive int, or a parameter the program binds."""
    if isinstance(fn.size, str):
        if fn.size not in spec.parameters:
            raise _refuse(e, f"{fn.text}: size {fn.size} is not a parameter of the spec", key)
        return fn.size
    return check_size(fn.size, f"the size of {comment(fn.text)}")


def _partitions(
    spec: Spec, e: Einsum, accesses: list[TensorAccess]
) -> tuple[dict[str, StaticChain], dict[str, DynamicSplit], list[tuple[str, tuple[str, ...]]]]:
    """The einsum's static chains and dynamic splits by source rank, and its flattens as
    (flattened name, components)."""
    chains: dict[str, StaticChain] = {}
    dynamic: dict[str, DynamicSplit] = {}
    flat_parts: list[tuple[str, tuple[str, ...]]] = []
    key = f"mapping.partitioning.{e.name}"
    for part in spec.partitioning_of(e.name):
        kinds = [f.kind for f in part.functions]
        if "follow" in kinds:
            raise _refuse(e, f"follow() on {part.name} (TeAAL uses it for index arithmetic)", key)
        if len(part.ranks) > 1:
            if kinds != ["flatten"]:
                raise _refuse(e, f"{part.name}: a rank tuple takes exactly [flatten()]", key)
            flat_parts.append((part.name, part.ranks))
        elif "flatten" in kinds:
            raise _refuse(e, f"flatten() on the single rank {part.ranks[0]}", key)
        elif all(k in ("uniform_shape", "nway_shape") for k in kinds):
            chains[part.ranks[0]] = _static_chain(spec, e, part, key)
        else:
            dynamic[part.ranks[0]] = _dynamic_split(spec, e, part, accesses, key)
    return chains, dynamic, flat_parts


def _static_chain(spec: Spec, e: Einsum, part: RankPartitioning, key: str) -> StaticChain:
    src = part.ranks[0]
    fns = part.functions
    for lvl, fn in enumerate(fns):
        if fn.kind == "nway_shape" and lvl > 0:
            raise _refuse(e, f"{src}: nway_shape below another split ({fn.text})", key)
    widths = tuple(Width(_size(spec, e, fn, key), fn.kind == "nway_shape") for fn in fns)
    return StaticChain(src, tuple(part.produces), widths, tuple(f.text for f in fns))


def _dynamic_split(
    spec: Spec, e: Einsum, part: RankPartitioning, accesses: list[TensorAccess], key: str
) -> DynamicSplit:
    src = part.ranks[0]
    fns = part.functions
    if len(fns) != 1:
        raise _refuse(
            e, f"{src}: {', '.join(f.text for f in fns)} (several levels with occupancy)", key
        )
    fn = fns[0]
    if fn.kind not in ("uniform_occupancy", "x_merge_path"):
        raise _refuse(e, f"{src}: partitioning function {fn.text}", key)
    if fn.leader is None or fn.leader not in [a.tensor for a in accesses]:
        raise _refuse(e, f"{fn.text}: leader {fn.leader} is not an input of {e.text}", key)
    assert len(part.produces) == 2
    produces = (part.produces[0], part.produces[1])
    return DynamicSplit(src, produces, fn.kind, _size(spec, e, fn, key), fn.leader, fn.text)


def _flattens(
    spec: Spec,
    e: Einsum,
    accesses: list[TensorAccess],
    chains: dict[str, StaticChain],
    dynamic: dict[str, DynamicSplit],
    flat_parts: list[tuple[str, tuple[str, ...]]],
) -> dict[str, Flatten]:
    """Each flatten with its leader: the dynamic split's leader, else the first input holding
    every component."""
    key = f"mapping.partitioning.{e.name}"

    def root_of(rank: str) -> str:
        for c in chains.values():
            if rank in c.produces:
                return c.source
        return rank

    def holds_all(tensor: str, comps: tuple[str, ...]) -> bool:
        return all(root_of(c) in spec.declaration[tensor] for c in comps)

    flattens: dict[str, Flatten] = {}
    for name, comps in flat_parts:
        dyn = dynamic.get(name)
        if dyn is not None:
            leader = dyn.leader
        else:
            holders = [a.tensor for a in accesses if holds_all(a.tensor, comps)]
            if not holders:
                raise _refuse(e, f"no input holds all of {', '.join(comps)} to flatten", key)
            leader = holders[0]
        if not holds_all(leader, comps):
            raise _refuse(
                e, f"{leader}, the tensor to flatten, does not hold all of {', '.join(comps)}", key
            )
        flattens[name] = Flatten(comps, name, leader)
    return flattens


def _check_partition_combinations(
    e: Einsum,
    ranks: set[str],
    chains: dict[str, StaticChain],
    dynamic: dict[str, DynamicSplit],
    flattens: dict[str, Flatten],
) -> None:
    """Split sources must exist; refuse the combinations the reference does not support."""
    key = f"mapping.partitioning.{e.name}"
    finals_of_chains = {r for c in chains.values() for r in c.produces}
    for src, dyn in dynamic.items():
        if src in flattens:
            if dyn.kind == "x_merge_path" and len(flattens[src].components) != 2:
                raise _refuse(e, f"{dyn.text}: x_merge_path needs two flattened ranks", key)
            if dyn.kind == "x_merge_path" and dyn.leader != flattens[src].leader:
                raise _refuse(e, f"{dyn.text}: the leader must be the flattened tensor", key)
            continue
        if src in chains:
            raise _refuse(e, f"{src} is split both by shape and by occupancy", key)
        if src not in ranks:
            raise _refuse(e, f"{dyn.text} splits {src}, which is not a rank of {e.text}", key)
        if dyn.kind == "x_merge_path":
            raise _refuse(e, f"{dyn.text}: x_merge_path needs a flattened (M, K) rank", key)
    for flat in flattens.values():
        for comp in flat.components:
            if comp in chains or comp in dynamic:
                raise _refuse(e, f"{comp} is flattened and split at once", key)
            if comp not in ranks and comp not in finals_of_chains:
                raise _refuse(e, f"flatten of {comp}, which is not a rank of {e.text}", key)
        for comp in flat.components:
            hit = [c for c in chains.values() if comp in c.produces]
            if hit and comp != hit[0].produces[-1]:
                raise _refuse(e, f"flatten of {comp}, an upper rank of a split", key)
        for other in flattens.values():
            if other is not flat and set(other.components) & set(flat.components):
                raise _refuse(e, "two flattens share a rank", key)


def _set_spacetime(spec: Spec, plan: EinsumPlan) -> None:
    """The spec's space and time ranks (no spacetime: every loop rank in time)."""
    e = plan.einsum
    st = spec.spacetime_of(e.name)
    if st is None:
        plan.space, plan.time = (), tuple((r, "pos") for r in plan.loop_order)
        return
    plan.space = tuple((r.rank, r.style) for r in st.space)
    plan.time = tuple((r.rank, r.style) for r in st.time)
    for r, _ in plan.space + plan.time:
        if r not in plan.loop_order:
            raise _refuse(
                e, f"spacetime names {r}, which is not a loop rank", f"mapping.spacetime.{e.name}"
            )


# ---- expressions ------------------------------------------------------------------------------


def _scalars(node: ExprNode) -> list[str]:
    if isinstance(node, ScalarRef):
        return [node.name]
    if isinstance(node, TensorAccess):
        return []
    kids = (
        node.factors
        if isinstance(node, Intersect)
        else (node.terms if isinstance(node, Union) else node.args)
    )
    return [s for k in kids for s in _scalars(k)]


def _check_expr(e: Einsum, node: ExprNode, top: bool = False) -> None:
    """Unions of exactly two tensor terms (each possibly scaled), at the top only."""
    if isinstance(node, (TensorAccess, ScalarRef)):
        return
    if isinstance(node, Union):
        if not top:
            raise _refuse(e, "a sum inside a product")
        tensor_terms = [t for t in node.terms if expr_accesses(t)]
        if len(node.terms) != 2 or len(tensor_terms) != 2:
            raise _refuse(e, "a sum of other than two tensor terms")
        index_sets = []
        for term in node.terms:
            accs = expr_accesses(term)
            if len(accs) != 1:
                raise _refuse(e, "a sum of products of several tensors")
            index_sets.append({i.variables[0] for i in accs[0].indices if i.variables})
            _check_expr(e, term)
        if index_sets[0] != index_sets[1]:
            raise _refuse(e, "a sum of terms over different indices")
        return
    kids = node.factors if isinstance(node, Intersect) else node.args
    for k in kids:
        if isinstance(k, Union):
            raise _refuse(e, "a sum inside a product")
        _check_expr(e, k)
