"""The ``mapping`` section: rank orders, partitioning, loop orders and spacetime.

Per-einsum subsections are keyed by the einsum's output tensor; whether that tensor is an
output, and whether the ranks named exist, is checked later by validation.
"""

from __future__ import annotations

import re
from typing import Literal, cast

from teaal_loops.spec.context import Context, is_null
from teaal_loops.spec.draft import Draft
from teaal_loops.spec.key_paths import item
from teaal_loops.spec.model import SpaceTime, SpaceTimeRank
from teaal_loops.spec.partition_functions import parse_partitioning
from teaal_loops.spec.yaml_positions import YEntry, YMap, YScalar, describe, quote

MAPPING_KEYS = ("rank-order", "partitioning", "loop-order", "spacetime")
SPACETIME_KEYS = ("space", "time", "opt")
_SPACETIME_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\.(pos|coord))?")


def parse_mapping(entry: YEntry, ctx: Context, draft: Draft) -> None:
    mapping = ctx.opt_map(
        entry.value, "mapping", "a mapping with rank-order, partitioning, ...", entry
    )
    if mapping is None:
        return
    ctx.check_keys(mapping, MAPPING_KEYS, "mapping")
    if m := _section(mapping, "rank-order", "a mapping tensor -> [RANKS]", ctx):
        for t in m.entries:
            path = f"mapping.rank-order.{t.key}"
            ctx.key_name(t, path, "a declared tensor")
            draft.rank_order[t.key] = ctx.rank_list(t, path, "the tensor's ranks in storage order")
            draft.rank_order_loc[t.key] = t
    what = "a mapping einsum output -> ranks -> functions"
    if m := _section(mapping, "partitioning", what, ctx):
        for t in m.entries:
            ctx.key_name(t, f"mapping.partitioning.{t.key}", "an einsum output")
            draft.partitioning[t.key] = parse_partitioning(t, ctx)
            draft.partitioning_loc[t.key] = t
    if m := _section(mapping, "loop-order", "a mapping einsum output -> [RANKS]", ctx):
        for t in m.entries:
            path = f"mapping.loop-order.{t.key}"
            ctx.key_name(t, path, "an einsum output")
            if is_null(t.value):  # TeAAL treats `Z:` with no list as "use the default"
                ctx.warn("empty loop order; the default (the final ranks) is used", t, path)
                continue
            draft.loop_order[t.key] = ctx.rank_list(
                t, path, "the einsum's final ranks in loop order"
            )
            draft.loop_order_loc[t.key] = t
    if m := _section(mapping, "spacetime", "a mapping einsum output -> space/time", ctx):
        for t in m.entries:
            ctx.key_name(t, f"mapping.spacetime.{t.key}", "an einsum output")
            draft.spacetime[t.key] = _parse_spacetime(t, ctx)
            draft.spacetime_loc[t.key] = t


def _section(mapping: YMap, key: str, what: str, ctx: Context) -> YMap | None:
    e = mapping.get(key)
    return None if e is None else ctx.opt_map(e.value, f"mapping.{key}", what, e)


def _parse_spacetime(entry: YEntry, ctx: Context) -> SpaceTime:
    base = f"mapping.spacetime.{entry.key}"
    m = ctx.want_map(entry.value, base, "a mapping with space and time lists", entry)
    ctx.check_keys(m, SPACETIME_KEYS, base)
    lists: dict[str, tuple[SpaceTimeRank, ...]] = {}
    for stamp in ("space", "time"):
        e = m.get(stamp)
        if e is None:
            ctx.fail(
                f"spacetime has no {stamp} list", entry, f"{base}.{stamp}", f"{stamp}: [RANKS]"
            )
        seq = ctx.want_list(
            e.value, f"{base}.{stamp}", "a list of ranks, each optionally .pos or .coord", e
        )
        ranks: list[SpaceTimeRank] = []
        for i, node in enumerate(seq.items):
            path = item(f"{base}.{stamp}", i)
            s, text = ctx.want_text(node, path, "a rank name, optionally suffixed .pos or .coord")
            sm = _SPACETIME_RE.fullmatch(text)
            if not sm:
                what = "RANK, RANK.pos or RANK.coord"
                ctx.fail(f"{quote(text)} is not a spacetime rank", s, path, what)
            style = cast(Literal["pos", "coord"], sm.group(2) or "pos")
            ranks.append(SpaceTimeRank(sm.group(1), style))
        lists[stamp] = tuple(ranks)
    slip = False
    if (opt := m.get("opt")) is not None and not is_null(opt.value):
        if isinstance(opt.value, YScalar) and opt.value.value == "slip":
            slip = True
        else:
            shown = repr(opt.value.value) if isinstance(opt.value, YScalar) else describe(opt.value)
            ctx.fail(
                f"unknown spacetime optimization {shown}",
                opt.value,
                f"{base}.opt",
                expected="slip",
            )
    return SpaceTime(lists["space"], lists["time"], slip, entry.key_location)
