"""The ``architecture`` and ``bindings`` sections: structure-checked, kept as read-only data.

teaal-loops does not model accelerators; these sections are checked for TeAAL's structure (so
a spec written for TeAAL's simulators still validates) and passed through unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import cast

from teaal_loops.spec.context import Context, is_null
from teaal_loops.spec.draft import Draft
from teaal_loops.spec.key_paths import item
from teaal_loops.spec.yaml_positions import YEntry, YMap, YNode, quote, to_plain

LEVEL_KEYS = ("name", "attributes", "local", "subtree")
_LEVEL_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[\s*0\s*\.\.\s*([0-9]+)\s*\])?\s*")


def freeze(value: object) -> object:
    """Dicts become read-only mappings and lists tuples, all the way down."""
    if isinstance(value, dict):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def parse_architecture(entry: YEntry, ctx: Context) -> Mapping[str, object]:
    m = ctx.want_map(
        entry.value, "architecture", "a mapping from configuration names to level trees", entry
    )
    for cfg in m.entries:
        path = f"architecture.{cfg.key}"
        seq = ctx.want_list(cfg.value, path, "a list of levels (each with a name)", cfg)
        stack: list[tuple[YNode, str]] = [(n, item(path, i)) for i, n in enumerate(seq.items)]
        while stack:
            node, lpath = stack.pop()
            stack.extend(_level(node, lpath, ctx))
    return cast(Mapping[str, object], freeze(to_plain(m)))


def _level(node: YNode, lpath: str, ctx: Context) -> list[tuple[YNode, str]]:
    """Check one level of an architecture tree; return its subtree's levels."""
    level = ctx.want_map(node, lpath, "a level: name, and optional attributes, local, subtree")
    ctx.check_keys(level, LEVEL_KEYS, lpath)
    name = level.get("name")
    if name is None:
        ctx.fail("unnamed level", level, f"{lpath}.name", "name: NAME or NAME[0..N]")
    ns, text = ctx.want_text(name.value, f"{lpath}.name", "NAME or NAME[0..N]", name)
    if not _LEVEL_RE.fullmatch(text):
        ctx.fail(f"{quote(text)} is not a level name", ns, f"{lpath}.name", "NAME or NAME[0..N]")
    if (a := level.get("attributes")) is not None:
        ctx.opt_map(a.value, f"{lpath}.attributes", "a mapping of attributes", a)
    if (loc := level.get("local")) is not None and not is_null(loc.value):
        locals_ = ctx.want_list(loc.value, f"{lpath}.local", "a list of components", loc)
        for i, comp in enumerate(locals_.items):
            _component(comp, item(f"{lpath}.local", i), ctx)
    if (sub := level.get("subtree")) is not None and not is_null(sub.value):
        subs = ctx.want_list(sub.value, f"{lpath}.subtree", "a list of levels", sub)
        return [(n, item(f"{lpath}.subtree", i)) for i, n in enumerate(subs.items)]
    return []


def _component(node: YNode, cpath: str, ctx: Context) -> None:
    c = ctx.want_map(node, cpath, "a component with name, class and attributes")
    ctx.check_keys(c, ("name", "class", "attributes"), cpath)
    for req in ("name", "class"):
        if (ce := c.get(req)) is None:
            ctx.fail(f"component without {req}", c, f"{cpath}.{req}", f"{req}: ...")
        ctx.want_str(ce.value, f"{cpath}.{req}", f"the component's {req}", ce)
    if (a := c.get("attributes")) is not None:
        ctx.opt_map(a.value, f"{cpath}.attributes", "a mapping of attributes", a)


def parse_bindings(entry: YEntry, ctx: Context, draft: Draft) -> Mapping[str, object]:
    m = ctx.want_map(entry.value, "bindings", "a mapping einsum output -> list of bindings", entry)
    for e in m.entries:
        path = f"bindings.{e.key}"
        ctx.key_name(e, path, "an einsum output")
        draft.bindings_loc[e.key] = e
        seq = ctx.want_list(
            e.value, path, "a list of bindings (a config/prefix entry and components)", e
        )
        configured = False
        for i, node in enumerate(seq.items):
            configured |= _binding(node, item(path, i), ctx)
        if not configured:
            ctx.fail(
                f"accelerator config and prefix missing for einsum {e.key}",
                e,
                path,
                "an entry - config: NAME / prefix: PATH",
            )
    return cast(Mapping[str, object], freeze(to_plain(m)))


def _binding(node: YNode, ipath: str, ctx: Context) -> bool:
    """Check one binding; True when it is the ``config``/``prefix`` entry."""
    b: YMap = ctx.want_map(node, ipath, "either {config, prefix} or {component, bindings}")
    if b.get("config") is not None:
        ctx.check_keys(b, ("config", "prefix"), ipath)
        if b.get("prefix") is None:
            ctx.fail("config without prefix", b, f"{ipath}.prefix", "prefix: PATH")
        return True
    if (comp := b.get("component")) is not None:
        ctx.check_keys(b, ("component", "bindings"), ipath)
        ctx.want_str(comp.value, f"{ipath}.component", "a component name", comp)
        if (bb := b.get("bindings")) is None:
            ctx.fail("component without bindings", b, f"{ipath}.bindings", "bindings: [...]")
        inner = ctx.want_list(bb.value, f"{ipath}.bindings", "a list of bindings", bb)
        for j, one in enumerate(inner.items):
            ctx.want_map(one, item(f"{ipath}.bindings", j), "a binding (a mapping)")
        return False
    ctx.fail(
        "binding is neither a config nor a component",
        b,
        ipath,
        "config: NAME with prefix: PATH, or component: NAME with bindings: [...]",
    )
