"""The state of emitting one einsum's HiFiber: its lines, and where each tensor stands.

While the loop nest is written, every tensor has a *current fiber* (the variable holding the
fiber of its next rank, or its leaf) and the ranks it has not iterated yet. The emitting
functions (:mod:`teaal_loops.reference.emit_tensors`, :mod:`teaal_loops.reference.emit_loops`)
share this object; every identifier comes from its :class:`HiFiberNames`.
"""

from __future__ import annotations

from teaal_loops.reference.names import HiFiberNames, check_identifier, comment
from teaal_loops.reference.plan_model import EinsumPlan, Flatten, Size, StaticChain, TensorPlan

INDENT = "    "


class EmitState:
    def __init__(
        self, plan: EinsumPlan, names: HiFiberNames, produced: dict[str, str] | None = None
    ) -> None:
        self.p = plan
        self.names = names
        self.produced = produced or {}  # tensor computed by an earlier einsum -> its variable
        self.lines: list[str] = []
        self.fib: dict[str, str] = {}  # tensor -> variable of its current fiber (or leaf)
        self.rest: dict[str, list[str]] = {}  # tensor -> its ranks not yet iterated
        self.pos_var: dict[str, str] = {}  # loop rank -> variable holding its position
        self.coord_var: dict[str, str] = {}  # loop rank -> expression of its coordinate
        self.final_var = ""  # the output in its rank order, once the epilogue is written

    # ---- writing ---------------------------------------------------------------------------

    def line(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + text)

    def comment(self, depth: int, text: str) -> None:
        """A comment line: ``text`` (which may hold spec text) reduced to one safe line."""
        self.line(depth, "# " + comment(text))

    def code(self, depth: int, text: str, why: str = "") -> None:
        """A statement, with an optional trailing comment made safe like :meth:`comment`."""
        self.line(depth, f"{text}  # {comment(why)}" if why else text)

    # ---- names -------------------------------------------------------------------------------

    def tensor_var(self, tensor: str, ranks: list[str] | tuple[str, ...], suffix: str = "") -> str:
        return self.names.tensor(tensor, tuple(ranks), suffix)

    def start_var(self, t: TensorPlan) -> str:
        """The variable holding input ``t`` in its stored rank order before this einsum."""
        if t.name in self.produced:
            return self.produced[t.name]
        return self.names.input(t.name, t.rank_order)

    def fiber_name(self, t: TensorPlan, rank: str | None) -> str:
        """The variable of ``t``'s fiber at ``rank``, or of its leaf when ``rank`` is None."""
        if rank is None:
            return self.names.leaf(t.name, t.is_output)
        return self.names.fiber(t.name, rank)

    def size(self, size: Size) -> str:
        """A partition size in the program: the number, or the parameter's variable."""
        return str(int(size)) if isinstance(size, int) else self.names.param(size)

    def width(self, chain: StaticChain, level: int) -> str | None:
        """The partition width of ``chain.produces[level]`` (None for the bottom rank)."""
        if level >= len(chain.widths):
            return None
        w = chain.widths[level]
        return self.names.step(chain.produces[level]) if w.nway else self.size(w.size)

    def shape_of(self, rank: str) -> str:
        """Shape variable of a (final, component or original) rank: the original's."""
        p = self.p
        hit = p.chain_of(rank)
        if hit:
            rank = hit[0].source
        dyn = p.dynamic_of(rank)
        if dyn is not None:
            rank = dyn.source
        return self.names.shape(rank)

    # ---- where ranks sit -------------------------------------------------------------------

    def slot_key(self, t: TensorPlan, slot: str) -> tuple[int, int]:
        """Where ``slot`` of ``t`` sits in loop order (the sort key of its slots)."""
        p = self.p
        if slot in p.flattens:  # a flattened rank of the leader
            return (p.loop_pos(p.flat_final_ranks(p.flattens[slot])[0]), 0)
        flat = p.flatten_of_component(slot)
        if flat is not None:
            finals = p.flat_final_ranks(flat)
            lead = not t.is_output and t.name == flat.leader
            return (p.loop_pos(finals[0] if lead else finals[-1]), flat.components.index(slot))
        dyn = p.dynamic.get(slot)
        if dyn is not None:
            return (p.loop_pos(dyn.produces[0]), 0)
        return (p.loop_pos(slot), 0)

    def sorted_slots(self, t: TensorPlan, slots: list[str]) -> list[str]:
        return sorted(slots, key=lambda s: self.slot_key(t, s))

    def flat_bottom(self, rank: str) -> Flatten | None:
        """The flatten whose bottom loop rank is ``rank``, if any."""
        for flat in self.p.flattens.values():
            if self.p.flat_final_ranks(flat)[-1] == rank:
                return flat
        return None


def rank_ids(ranks: list[str] | tuple[str, ...]) -> str:
    """``["M", "K"]``: rank ids as a list of string literals (ranks are checked identifiers)."""
    return "[" + ", ".join(f'"{check_identifier(r, "rank")}"' for r in ranks) + "]"


def paren(expr: str) -> str:
    return f"({expr})" if (" " in expr) else expr
