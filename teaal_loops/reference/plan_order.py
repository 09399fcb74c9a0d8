"""Where each tensor's ranks sit in the loop order, and the per-rank formats (U/C).

Part of planning an einsum (:mod:`teaal_loops.reference.plan`): once the partitioning is known,
every tensor's ranks are sorted into loop order (its *slots*), the loop order is checked to keep
split ranks top-down, and every loop rank must be driven by some input.
"""

from __future__ import annotations

from teaal_loops.reference.plan_model import EinsumPlan, TensorPlan, refuse
from teaal_loops.spec.model import Spec


def check_loop_order(plan: EinsumPlan) -> None:
    e = plan.einsum
    pos = {r: i for i, r in enumerate(plan.loop_order)}
    groups = [c.produces for c in plan.chains.values()] + [
        d.produces for d in plan.dynamic.values()
    ]
    for group in groups:
        idx = [pos[r] for r in group if r in pos]
        if idx != sorted(idx):
            raise refuse(
                e,
                f"loop order puts {', '.join(group)} out of top-down order",
                f"mapping.loop-order.{e.name}",
            )


def slots_in_loop_order(plan: EinsumPlan, t: TensorPlan) -> list[str]:
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
                raise refuse(plan.einsum, f"rank {r} of {t.name} is in no loop")
            entries.append((plan.loop_pos(r), 0, r))
    entries.sort()
    return [r for _, _, r in entries]


def check_coverage(plan: EinsumPlan) -> None:
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
            raise refuse(plan.einsum, f"no input iterates loop rank {r}")


def rank_formats(spec: Spec, t: TensorPlan, intermediate: bool) -> dict[str, str]:
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
