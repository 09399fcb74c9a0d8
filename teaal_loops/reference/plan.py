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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from teaal_loops.errors import ParameterError, UnsupportedMappingError
from teaal_loops.spec.expressions import expr_accesses
from teaal_loops.spec.model import (
    Einsum,
    ExprNode,
    Intersect,
    PartitionFn,
    ScalarRef,
    Spec,
    TensorAccess,
    Union,
)

# --------------------------------------------------------------------------------------------
# Plan objects
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StaticChain:
    """``R: [uniform_shape(S_n), ...]``: ``produces`` top-down, ``steps[i]`` is the Python
    expression of the width of ``produces[i]``'s partitions (the bottom rank has width 1)."""

    source: str
    produces: tuple[str, ...]
    steps: tuple[str, ...]
    texts: tuple[str, ...]


@dataclass(frozen=True)
class DynamicSplit:
    """``R: [uniform_occupancy(L.S)]`` or ``MK: [x_merge_path(L.S)]``: two ranks (upper,
    lower) cut at the leader's positions."""

    source: str
    produces: tuple[str, str]
    kind: str
    size: str
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
        """The name of the loop variable holding the coordinate of original rank ``rank`` in
        the innermost body: the lowest rank it was split into (coordinates stay absolute)."""
        chain = self.chains.get(rank)
        if chain is not None:
            rank = chain.produces[-1]
        dyn = self.dynamic.get(rank)
        if dyn is not None:
            rank = dyn.produces[-1]
        return rank


# --------------------------------------------------------------------------------------------
# Building the plan
# --------------------------------------------------------------------------------------------

SUPPORTED = (
    "einsums of tensor accesses with plain indices, products (*), sums (+/-) of two tensors, "
    "take(); partitioning by uniform_shape, top-level nway_shape, one uniform_occupancy per "
    "rank, flatten() and x_merge_path on a flattened (M, K) rank"
)


def _refuse(einsum: Einsum, message: str, key_path: str | None = None) -> UnsupportedMappingError:
    return UnsupportedMappingError(
        f"HiFiber reference: {message}",
        location=einsum.location,
        key_path=key_path,
        expected=f"what the reference supports: {SUPPORTED}",
    )


def bind_params(spec: Spec, params: Mapping[str, int]) -> dict[str, int]:
    """Every parameter of the spec bound to a positive int (spec defaults, then ``params``)."""
    values: dict[str, int] = {}
    if spec.extensions is not None:
        values.update(spec.extensions.params)
    values.update(params)
    missing = [p for p in spec.parameters if p not in values]
    if missing:
        raise ParameterError(
            f"the HiFiber reference needs a value for {', '.join(missing)} "
            f"(give --param {missing[0]}=VALUE)"
        )
    for name in spec.parameters:
        value = values[name]
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ParameterError(f"parameter {name} must be a positive integer, got {value!r}")
    return {p: values[p] for p in spec.parameters}


def plan_spec(spec: Spec) -> list[EinsumPlan]:
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
    _check_names(spec, plans)
    return plans


def _size_expr(fn: PartitionFn) -> str:
    return str(fn.size)


def _plan_einsum(spec: Spec, e: Einsum, produced: set[str]) -> EinsumPlan:
    out = e.name
    _check_expr(e, e.expr, top=True)
    accesses = expr_accesses(e.expr)
    scalars = tuple(dict.fromkeys(_scalars(e.expr)))

    # ---- tensors and their ranks -----------------------------------------------------------
    def rank_order(name: str) -> tuple[str, ...]:
        return tuple(spec.mapping.rank_order.get(name, spec.declaration[name]))

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
        if acc.tensor == out:
            raise _refuse(e, f"{out} is read by the einsum that writes it")
        if acc.tensor in seen:
            raise _refuse(e, f"{acc.tensor} appears twice in one einsum")
        seen.append(acc.tensor)
        if not spec.declaration[acc.tensor]:
            raise _refuse(e, f"{acc.tensor} is a rank-0 tensor input (use a bare scalar name)")

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
    index_vars = tuple(dict.fromkeys(out_vars + in_vars))
    reduction = any(v not in out_vars for v in in_vars)
    ranks = {v.upper() for v in index_vars}

    # ---- partitioning ------------------------------------------------------------------------
    chains: dict[str, StaticChain] = {}
    dynamic: dict[str, DynamicSplit] = {}
    flat_parts: list[tuple[str, tuple[str, ...]]] = []
    key = f"mapping.partitioning.{out}"
    for part in spec.partitioning_of(out):
        fns = part.functions
        kinds = [f.kind for f in fns]
        if "follow" in kinds:
            raise _refuse(e, f"follow() on {part.name} (TeAAL uses it for index arithmetic)", key)
        if len(part.ranks) > 1:
            if kinds != ["flatten"]:
                raise _refuse(e, f"{part.name}: a rank tuple takes exactly [flatten()]", key)
            flat_parts.append((part.name, part.ranks))
            continue
        src = part.ranks[0]
        if "flatten" in kinds:
            raise _refuse(e, f"flatten() on the single rank {src}", key)
        if all(k in ("uniform_shape", "nway_shape") for k in kinds):
            for lvl, fn in enumerate(fns):
                if fn.kind == "nway_shape" and lvl > 0:
                    raise _refuse(e, f"{src}: nway_shape below another split ({fn.text})", key)
            steps = [
                f"STEP_{part.produces[lvl]}" if fn.kind == "nway_shape" else _size_expr(fn)
                for lvl, fn in enumerate(fns)
            ]
            chains[src] = StaticChain(
                src, tuple(part.produces), tuple(steps), tuple(f.text for f in fns)
            )
            continue
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
        dynamic[src] = DynamicSplit(
            src,
            (part.produces[0], part.produces[1]),
            fn.kind,
            _size_expr(fn),
            fn.leader,
            fn.text,
        )

    def root_of(rank: str) -> str:
        for c in chains.values():
            if rank in c.produces:
                return c.source
        return rank

    flattens: dict[str, Flatten] = {}
    for name, comps in flat_parts:
        dyn = dynamic.get(name)
        if dyn is not None:
            leader = dyn.leader
        else:
            holders = [
                a.tensor
                for a in accesses
                if all(root_of(c) in spec.declaration[a.tensor] for c in comps)
            ]
            if not holders:
                raise _refuse(e, f"no input holds all of {', '.join(comps)} to flatten", key)
            leader = holders[0]
        if not all(root_of(c) in spec.declaration[leader] for c in comps):
            raise _refuse(
                e, f"{leader}, the tensor to flatten, does not hold all of {', '.join(comps)}", key
            )
        flattens[name] = Flatten(comps, name, leader)

    # sources must exist; combinations we support
    finals_of_chains = {r for c in chains.values() for r in c.produces}
    for src, dyn in dynamic.items():
        if src in flattens:
            continue
        if src in chains:
            raise _refuse(e, f"{src} is split both by shape and by occupancy", key)
        if src not in ranks:
            raise _refuse(e, f"{dyn.text} splits {src}, which is not a rank of {e.text}", key)
        if dyn.kind == "x_merge_path":
            raise _refuse(e, f"{dyn.text}: x_merge_path needs a flattened (M, K) rank", key)
    for src, dyn in dynamic.items():
        if src in flattens and dyn.kind == "x_merge_path":
            if len(flattens[src].components) != 2:
                raise _refuse(e, f"{dyn.text}: x_merge_path needs two flattened ranks", key)
            if dyn.leader != flattens[src].leader:
                raise _refuse(e, f"{dyn.text}: the leader must be the flattened tensor", key)
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

    loop_order = tuple(spec.loop_order_of(out))
    plan = EinsumPlan(
        einsum=e,
        output=TensorPlan(out, rank_order(out), [], True, tuple(spec.declaration[out])),
        inputs=[
            TensorPlan(a.tensor, rank_order(a.tensor), [], False, tuple(spec.declaration[a.tensor]))
            for a in accesses
        ],
        loop_order=loop_order,
        chains=chains,
        dynamic=dynamic,
        flattens=flattens,
        space=(),
        time=(),
        index_vars=index_vars,
        reduction=reduction,
        scalars=scalars,
    )
    _check_loop_order(plan)
    for t in [plan.output, *plan.inputs]:
        t.slots = _slots(plan, t)
    _check_coverage(plan)
    st = spec.spacetime_of(out)
    if st is None:
        plan.space, plan.time = (), tuple((r, "pos") for r in loop_order)
    else:
        plan.space = tuple((r.rank, r.style) for r in st.space)
        plan.time = tuple((r.rank, r.style) for r in st.time)
        for r, _ in plan.space + plan.time:
            if r not in loop_order:
                raise _refuse(e, f"spacetime names {r}, which is not a loop rank", key)
    plan.formats = {t.name: _formats(spec, t, t.name in produced) for t in plan.inputs}
    return plan


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


def _check_loop_order(plan: EinsumPlan) -> None:
    e = plan.einsum
    pos = {r: i for i, r in enumerate(plan.loop_order)}
    groups = [c.produces for c in plan.chains.values()] + [
        d.produces for d in plan.dynamic.values()
    ]
    for group in groups:
        idx = [pos[r] for r in group if r in pos]
        if idx != sorted(idx):
            raise _refuse(
                e,
                f"loop order puts {', '.join(group)} out of top-down order",
                f"mapping.loop-order.{e.name}",
            )


def _root_rank(plan: EinsumPlan, rank: str) -> str:
    hit = plan.chain_of(rank)
    return hit[0].source if hit else rank


def _slots(plan: EinsumPlan, t: TensorPlan) -> list[str]:
    """``t``'s ranks in loop order: static chains expanded, a dynamic source kept as one
    placeholder (the output gets its final ranks at once), flatten components kept apart."""
    entries: list[tuple[int, int, str]] = []
    for rank in t.rank_order:
        expanded: list[str]
        chain = plan.chains.get(rank)
        expanded = list(chain.produces) if chain else [rank]
        for r in expanded:
            flat = plan.flatten_of_component(r)
            if flat is not None:
                finals = plan.flat_final_ranks(flat)
                lead = not t.is_output and t.name == flat.leader
                at = plan.loop_pos(finals[0] if lead else finals[-1])
                entries.append((at, flat.components.index(r), r))
                continue
            dyn = plan.dynamic.get(r)
            if dyn is not None:
                if t.is_output:
                    entries.append((plan.loop_pos(dyn.produces[0]), 0, dyn.produces[0]))
                    entries.append((plan.loop_pos(dyn.produces[1]), 0, dyn.produces[1]))
                else:
                    entries.append((plan.loop_pos(dyn.produces[0]), 0, r))
                continue
            if r not in plan.loop_order:
                raise _refuse(plan.einsum, f"rank {r} of {t.name} is in no loop")
            entries.append((plan.loop_pos(r), 0, r))
    entries.sort()
    return [r for _, _, r in entries]


def _check_coverage(plan: EinsumPlan) -> None:
    """Every loop rank must be iterated by some input (the output alone cannot drive it)."""
    driven: set[str] = set()
    for t in plan.inputs:
        for r in t.slots:
            dyn = plan.dynamic.get(r)
            flat = plan.flatten_of_component(r)
            if dyn is not None:
                driven.update(dyn.produces)
            elif flat is not None:
                if t.name == flat.leader:
                    driven.update(plan.flat_final_ranks(flat))
            else:
                driven.add(r)
    for r in plan.loop_order:
        if r not in driven:
            raise _refuse(plan.einsum, f"no input iterates loop rank {r}")


def _formats(spec: Spec, t: TensorPlan, intermediate: bool) -> dict[str, str]:
    """U/C per rank name of ``t``: the spec's format (the one named default, else the first),
    or the default: for an input, the first rank uncompressed and the others compressed
    (CSR-like; a vector is dense); for a tensor computed by an earlier einsum, all compressed."""
    fmts = spec.formats.get(t.name, ())
    chosen = next((f for f in fmts if f.name == "default"), fmts[0] if fmts else None)
    out = {r: ("U" if i == 0 and not intermediate else "C") for i, r in enumerate(t.rank_order)}
    if chosen is not None:
        for rf in chosen.ranks:
            out[rf.rank] = rf.format
    return out


def _check_names(spec: Spec, plans: list[EinsumPlan]) -> None:
    """Generated variable names (``a_k``, ``A_MK``) must not collide."""
    lower: dict[str, str] = {}
    for t in spec.declaration:
        if t.lower() in lower:
            raise _refuse(
                plans[0].einsum, f"tensors {lower[t.lower()]} and {t} differ only in case"
            )
        lower[t.lower()] = t
    for p in plans:
        ranks = set(p.loop_order) | {r for t in [p.output, *p.inputs] for r in t.slots}
        names = [f"{t.name.lower()}_{r.lower()}" for t in [p.output, *p.inputs] for r in ranks]
        if len(set(names)) != len(names):
            raise _refuse(p.einsum, "tensor and rank names whose generated names collide")
