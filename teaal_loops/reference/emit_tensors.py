"""Before and after an einsum's loop nest: its header, the output created with its final
ranks, every input split by shape, swizzled into loop order and flattened, and at the end the
output's split ranks merged back into its stored rank order."""

from __future__ import annotations

from teaal_loops.reference.emit_state import EmitState, rank_ids
from teaal_loops.reference.plan_model import TensorPlan

RULE = "-" * 86


def emit_header(st: EmitState) -> None:
    """The einsum and its mapping as comments, then the widths of its ``nway_shape`` tiles."""
    p = st.p
    st.comment(0, RULE)
    st.comment(0, p.einsum.text)
    for chain in p.chains.values():
        st.comment(
            0, f"  {chain.source}: [{', '.join(chain.texts)}] -> {', '.join(chain.produces)}"
        )
    for flat in p.flattens.values():
        st.comment(
            0,
            f"  ({', '.join(flat.components)}): [flatten()] -> {flat.name} "
            f"(flattening {flat.leader})",
        )
    for dyn in p.dynamic.values():
        st.comment(0, f"  {dyn.source}: [{dyn.text}] -> {', '.join(dyn.produces)}")
    space = ", ".join(r for r, _ in p.space) or "-"
    time = ", ".join(r for r, _ in p.time) or "-"
    st.comment(0, f"  loop order: {', '.join(p.loop_order)}; space: {space}; time: {time}")
    st.comment(0, RULE)
    for chain in p.chains.values():
        for level, width in enumerate(chain.widths):
            if width.nway:
                count = st.size(width.size)
                st.code(
                    0,
                    f"{st.names.step(chain.produces[level])} = "
                    f"({st.names.shape(chain.source)} - 1) // {count} + 1",
                    f"{chain.texts[level]}: {count} tiles of equal width",
                )


def emit_output(st: EmitState) -> None:
    t = st.p.output
    var = st.tensor_var(t.name, t.slots)
    shapes = ", ".join(st.shape_of(r) for r in t.slots)
    st.comment(0, "the output, created with its ranks in loop order")
    st.line(0, f'{var} = Tensor(rank_ids={rank_ids(t.slots)}, shape=[{shapes}], name="{t.name}")')
    st.rest[t.name] = list(t.slots)
    st.fib[t.name] = var


def emit_input(st: EmitState, t: TensorPlan) -> None:
    """Bring input ``t`` from its stored rank order into loop order: swizzle first where that
    alone reaches it (fibertree cannot swizzle every split rank), split by shape, swizzle,
    flatten."""
    p = st.p
    current = list(t.rank_order)
    var = st.start_var(t)
    target = list(t.slots)

    def expand(order: list[str]) -> list[str]:
        out: list[str] = []
        for r in order:
            chain = p.chains.get(r)
            out.extend(chain.produces if chain else [r])
        return out

    pre = sorted(current, key=lambda r: target.index(expand([r])[0]))
    if expand(pre) == target and pre != current:
        var, current = swizzle(st, t, var, pre, "into loop order")
    var = _split_by_shape(st, t, var, current)
    if current != target:
        var, current = swizzle(st, t, var, target, "into loop order")
    for flat in p.flattens.values():
        if flat.leader != t.name:
            continue
        i = current.index(flat.components[0])
        assert current[i : i + len(flat.components)] == list(flat.components)
        current[i : i + len(flat.components)] = [flat.name]
        new = st.tensor_var(t.name, current, "_flat")
        st.comment(
            0,
            f"{t.name}: flatten ({', '.join(flat.components)}) into {flat.name} "
            "(tuple coordinates)",
        )
        st.line(
            0,
            f"{new} = {var}.flattenRanks(depth={i}, levels="
            f'{len(flat.components) - 1}, coord_style="tuple")',
        )
        st.line(0, f"{new}.setRankIds(rank_ids={rank_ids(current)})")
        var = new
    st.rest[t.name] = current
    st.fib[t.name] = var


def _split_by_shape(st: EmitState, t: TensorPlan, var: str, current: list[str]) -> str:
    """``splitUniform`` every statically split rank of ``t`` (``current`` is updated)."""
    p = st.p
    split_ranks = [r for r in current if r in p.chains]
    if not split_ranks:
        return var
    calls = ""
    for r in split_ranks:
        i = current.index(r)
        chain = p.chains[r]
        for level in range(len(chain.widths)):
            calls += f".splitUniform({st.width(chain, level)}, depth={i + level})"
        current[i : i + 1] = list(chain.produces)
        st.comment(
            0,
            f"{t.name}: {r}: [{', '.join(chain.texts)}]: tiles in coordinate "
            f"space -> {', '.join(chain.produces)}",
        )
    new = st.tensor_var(t.name, current)
    st.line(0, f"{new} = {var}{calls}")
    st.line(0, f"{new}.setRankIds(rank_ids={rank_ids(current)})")
    return new


def swizzle(
    st: EmitState, t: TensorPlan, var: str, order: list[str], why: str
) -> tuple[str, list[str]]:
    new = st.tensor_var(t.name, order)
    st.code(0, f"{new} = {var}.swizzleRanks(rank_ids={rank_ids(order)})", why)
    return new, list(order)


def emit_roots(st: EmitState) -> None:
    for t in [st.p.output, *st.p.inputs]:
        rest = st.rest[t.name]
        name = st.fiber_name(t, rest[0] if rest else None)
        st.line(0, f"{name} = {st.fib[t.name]}.getRoot()")
        st.fib[t.name] = name


def emit_unpartition(st: EmitState) -> None:
    """Merge the output's split ranks (absolute coordinates) and restore its rank order."""
    p = st.p
    out = p.output
    current = list(out.slots)
    var = st.tensor_var(out.name, current)
    groups: list[list[str]] = []
    for r in out.rank_order:
        chain = p.chains.get(r)
        dyn = p.dynamic.get(r)
        groups.append(list(chain.produces) if chain else list(dyn.produces) if dyn else [r])
    target = [r for g in groups for r in g]
    if current == list(out.rank_order):
        st.final_var = var
        return
    st.comment(0, f"{out.name} back to its rank order [{', '.join(out.rank_order)}]")

    def contiguous(order: list[str]) -> bool:
        for g in groups:
            if len(g) > 1:
                i = order.index(g[0])
                if order[i : i + len(g)] != g:
                    return False
        return True

    if not contiguous(current):
        var, current = swizzle(st, out, var, target, "group the split ranks")
    merges = sorted(((current.index(g[0]), g) for g in groups if len(g) > 1), reverse=True)
    if merges:
        calls = "".join(
            f'.mergeRanks(depth={i}, levels={len(g) - 1}, coord_style="absolute")'
            for i, g in merges
        )
        for i, g in merges:
            root = out.rank_order[[x[0] for x in groups].index(g[0])]
            current[i : i + len(g)] = [root]
        new = st.tensor_var(out.name, current)
        st.line(0, f"{new} = {var}{calls}")
        st.line(0, f"{new}.setRankIds(rank_ids={rank_ids(current)})")
        var = new
    if current != list(out.rank_order):
        var, current = swizzle(st, out, var, list(out.rank_order), "the stored rank order")
    st.final_var = var
