"""An einsum's loop nest: one ``for`` per loop rank over the co-iterated fibers (``&``, ``|``,
``<<``), the occupancy and merge-path splits just above their upper loop, and the body that
multiplies and records the spacetime stamp."""

from __future__ import annotations

from teaal_loops.reference.emit_state import EmitState, paren, rank_ids
from teaal_loops.reference.plan_model import DynamicSplit, Flatten, TensorPlan
from teaal_loops.spec.model import ExprNode, Intersect, ScalarRef, Take, TensorAccess, Union


def emit_loops(st: EmitState) -> int:
    """Every loop header, outermost first; the depth of the body."""
    depth = 0
    for rank in st.p.loop_order:
        for dyn in st.p.dynamic.values():
            if dyn.produces[0] == rank:
                emit_dynamic_split(st, depth, dyn)
        emit_loop_header(st, depth, rank)
        depth += 1
    return depth


def emit_dynamic_split(st: EmitState, depth: int, dyn: DynamicSplit) -> None:
    p = st.p
    leader = p.tensor(dyn.leader)
    upper = dyn.produces[0]
    size = st.size(dyn.size)
    if dyn.kind == "x_merge_path":
        flat = p.flattens[dyn.source]
        rows = st.shape_of(flat.components[0])
        sizes, share_ids = st.names.merge_path(dyn.source)
        st.comment(
            depth,
            f"{dyn.source}: [{dyn.text}]: shares of {size} merge items "
            f"(row ends + nonzeros of {leader.name})",
        )
        st.line(
            depth,
            f"{sizes}, {share_ids} = merge_path_shares({st.fib[leader.name]}, {rows}, {size})",
        )
        call = f"splitUnEqual({sizes})"
    else:
        st.comment(
            depth,
            f"{dyn.source}: [{dyn.text}]: {leader.name} cut every {size} "
            "nonzeros; the others at the same coordinates",
        )
        call = f"splitEqual({size})"
    split_tensor(st, depth, leader, dyn, call)
    split_fiber = st.fiber_name(leader, upper)
    for t in p.inputs:
        if t.name != leader.name and st.rest[t.name] and st.rest[t.name][0] == dyn.source:
            split_tensor(st, depth, t, dyn, f"splitNonUniform({split_fiber})")


def split_tensor(st: EmitState, depth: int, t: TensorPlan, dyn: DynamicSplit, call: str) -> None:
    rest = st.rest[t.name]
    assert rest and rest[0] == dyn.source, (t.name, rest, dyn)
    src = st.names.from_fiber(t.name, rest)
    st.line(
        depth,
        f"{src} = Tensor.fromFiber(rank_ids={rank_ids(rest)}, fiber={st.fib[t.name]}, "
        f'name="{t.name}")',
    )
    new_ranks = [dyn.produces[0], dyn.produces[1], *rest[1:]]
    var = st.tensor_var(t.name, new_ranks)
    st.line(depth, f"{var} = {src}.{call}")
    st.line(depth, f"{var}.setRankIds(rank_ids={rank_ids(new_ranks)})")
    ordered = st.sorted_slots(t, new_ranks)
    if ordered != new_ranks:
        nvar = st.tensor_var(t.name, ordered)
        st.code(
            depth, f"{nvar} = {var}.swizzleRanks(rank_ids={rank_ids(ordered)})", "into loop order"
        )
        var, new_ranks = nvar, ordered
    fiber = st.fiber_name(t, new_ranks[0])
    st.line(depth, f"{fiber} = {var}.getRoot()")
    st.fib[t.name] = fiber
    st.rest[t.name] = new_ranks


def emit_loop_header(st: EmitState, depth: int, rank: str) -> None:
    p = st.p
    out = p.output
    names = st.names
    flat = st.flat_bottom(rank)
    participants = [t for t in p.inputs if st.rest[t.name] and st.rest[t.name][0] == rank]
    next_names: dict[str, str] = {}
    for t in [out, *participants]:
        rest = st.rest[t.name]
        if rest and rest[0] == rank:
            next_names[t.name] = st.fiber_name(t, rest[1] if len(rest) > 1 else None)
    found = pattern(st, p.einsum.expr, {t.name for t in participants}, next_names)
    assert found is not None, f"no input iterates {rank}"
    it, pat = found
    if out.name in next_names:
        it = f"{st.fib[out.name]} << {paren(it)}"
        pat = f"({next_names[out.name]}, {pat})"
    coord = f"({', '.join(names.coord(c) for c in flat.components)})" if flat else names.coord(rank)
    st.coord_var[rank] = coord
    kind = pos_kind(st, rank, participants)
    if kind == "enumerate":
        st.pos_var[rank] = names.pos(rank)
        st.line(depth, f"for {names.pos(rank)}, ({coord}, {pat}) in enumerate({it}):")
    elif kind == "share":
        st.line(depth, f"for {names.index(rank)}, ({coord}, {pat}) in enumerate({it}):")
    else:
        st.line(depth, f"for {coord}, {pat} in {it}:")
    body = depth + 1
    if kind == "dense":
        st.pos_var[rank] = names.pos(rank)
        st.code(
            body,
            f"{names.pos(rank)} = {dense_pos(st, rank)}",
            "offset in the uncompressed rank (empty fibers count)",
        )
    elif kind == "share":
        st.pos_var[rank] = names.pos(rank)
        dyn = p.dynamic_of(rank)
        assert dyn is not None
        share_ids = names.merge_path(dyn.source)[1]
        st.code(
            body,
            f"{names.pos(rank)} = {share_ids}[{names.index(rank)}]",
            "the share's index in merge order",
        )
    for t in [out, *participants]:
        if t.name in next_names:
            st.fib[t.name] = next_names[t.name]
            st.rest[t.name] = st.rest[t.name][1:]
    if flat is not None:
        emit_flat_access(st, body, flat)


def emit_flat_access(st: EmitState, depth: int, flat: Flatten) -> None:
    """Tensors other than the flattened leader reach the flattened coordinates by lookup."""
    for t in [st.p.output, *st.p.inputs]:
        rest = st.rest[t.name]
        comps: list[str] = []
        while len(comps) < len(rest) and rest[len(comps)] in flat.components:
            comps.append(rest[len(comps)])
        if not comps:
            continue
        remaining = rest[len(comps) :]
        nxt = st.fiber_name(t, remaining[0] if remaining else None)
        how = "getPayloadRef" if t.is_output else "getPayload"
        args = ", ".join(st.names.coord(c) for c in comps)
        st.line(depth, f"{nxt} = {st.fib[t.name]}.{how}({args})")
        st.fib[t.name] = nxt
        st.rest[t.name] = remaining


def pattern(
    st: EmitState, node: ExprNode, names: set[str], nxt: dict[str, str]
) -> tuple[str, str] | None:
    """(iteration expression, payload pattern) over the participating tensors."""
    if isinstance(node, TensorAccess):
        if node.tensor in names:
            return st.fib[node.tensor], nxt[node.tensor]
        return None
    if isinstance(node, ScalarRef):
        return None
    if isinstance(node, Union):
        items = [x for x in (pattern(st, k, names, nxt) for k in node.terms) if x]
        if len(items) == 2:
            (ia, pa), (ib, pb) = items
            return f"{paren(ia)} | {paren(ib)}", f"(_, {pa}, {pb})"
        return items[0] if items else None
    kids = node.factors if isinstance(node, Intersect) else node.args
    parts = [x for x in (pattern(st, k, names, nxt) for k in kids) if x]
    if not parts:
        return None
    it, pat = parts[-1]
    for ia, pa in reversed(parts[:-1]):
        it, pat = f"{ia} & {paren(it)}", f"({pa}, {pat})"
    return it, pat


def pos_kind(st: EmitState, rank: str, participants: list[TensorPlan]) -> str:
    """How the loop over ``rank`` knows its position: ``enumerate``, ``dense`` (the offset in
    an uncompressed rank), ``share`` (a merge-path share's index) or ``none`` (not stamped)."""
    p = st.p
    wanted = {r for r, _ in p.space + p.time}
    dyn = p.dynamic_of(rank)
    if dyn is not None and dyn.kind == "x_merge_path" and rank == dyn.produces[0]:
        return "share"
    if rank not in wanted:
        return "none"
    if dyn is not None or st.flat_bottom(rank) or rank in p.flattens:
        return "enumerate"
    hit = p.chain_of(rank)
    root = hit[0].source if hit else rank
    dense = all(
        p.formats[t.name].get(rank, p.formats[t.name].get(root, "C")) == "U" for t in participants
    )
    return "dense" if dense and participants else "enumerate"


def dense_pos(st: EmitState, rank: str) -> str:
    """Offset of ``rank``'s coordinate in its (uncompressed) fiber: a tile's fiber starts at
    the largest enclosing tile start, and tiles of width S start at multiples of S."""
    hit = st.p.chain_of(rank)
    var = st.names.coord(rank)
    if hit is None:
        return var
    chain, idx = hit
    step = st.width(chain, idx)
    upper = [st.names.coord(r) for r in chain.produces[:idx]]
    if not upper:
        return f"{var} // {step}" if step else var
    start = upper[0] if len(upper) == 1 else f"max({', '.join(upper)})"
    if step is None:
        return f"{var} - {start}"
    return f"{var} // {step} - {start} // {step}"


def emit_body(st: EmitState, depth: int) -> None:
    """``z_ref += ...`` (``<<=`` without a reduction) and the multiply's stamp."""
    p = st.p
    out = p.output
    for t in [out, *p.inputs]:
        assert not st.rest[t.name], f"{t.name} still has ranks {st.rest[t.name]}"
    op = "+=" if p.reduction else "<<="
    st.line(depth, f"{st.fib[out.name]} {op} {value(st, p.einsum.expr)}")
    idx = ", ".join(st.names.coord(p.coord_rank(v.upper())) for v in p.index_vars)
    idx = f"({idx},)" if len(p.index_vars) == 1 else f"({idx})"
    space = stamp_tuple(st, [r for r, _ in p.space])
    time = stamp_tuple(st, [r for r, _ in p.time])
    st.line(depth, f'record("{out.name}", {idx}, {space}, {time})')


def stamp_tuple(st: EmitState, ranks: list[str]) -> str:
    items = [f"({st.pos_var[r]}, {st.coord_var[r]})" for r in ranks]
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"


def value(st: EmitState, node: ExprNode) -> str:
    """The expression of the multiply, over the leaves of the tensors and the scalars."""
    if isinstance(node, TensorAccess):
        return st.names.leaf(node.tensor, False)
    if isinstance(node, ScalarRef):
        return st.names.scalar(node.name)
    if isinstance(node, Take):
        return value(st, node.args[node.keep])
    if isinstance(node, Intersect):
        return " * ".join(
            f"({value(st, f)})" if isinstance(f, Union) else value(st, f) for f in node.factors
        )
    text = ""
    for i, term in enumerate(node.terms):
        neg = bool(node.negated and node.negated[i])
        v = value(st, term)
        if i == 0:
            text = f"0 - {v}" if neg else v
        else:
            text += f" - {v}" if neg else f" + {v}"
    return text
