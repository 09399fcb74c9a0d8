"""YAML -> typed spec objects: the structure of every section, with positions.

This module checks *shape* (which keys, which types) and parses the small languages inside
strings (einsums, partitioning functions, spacetime ranks). Cross-references (is this rank
declared? is the loop order a permutation of the final ranks?) are checked in
:mod:`teaal_loops.spec.validate`, which also derives the partitioned rank names.

Unknown keys are warnings (TeAAL silently ignores them; we say so, with the close match).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, NoReturn, cast

from teaal_loops.errors import Location, SpecError
from teaal_loops.spec.expressions import parse_einsum
from teaal_loops.spec.model import (
    Einsum,
    Extensions,
    PartitionFn,
    RankFormat,
    RankPartitioning,
    SpaceTime,
    SpaceTimeRank,
    TensorFormat,
    Warning_,
)
from teaal_loops.spec.yaml_positions import (
    YEntry,
    YMap,
    YNode,
    YScalar,
    YSeq,
    describe,
    load_yaml,
    to_plain,
)

EXTENSION_SECTION = "x-teaal-loops"
TOP_KEYS = ("einsum", "mapping", "format", "architecture", "bindings", EXTENSION_SECTION)
EINSUM_KEYS = ("declaration", "expressions")
MAPPING_KEYS = ("rank-order", "partitioning", "loop-order", "spacetime")
SPACETIME_KEYS = ("space", "time", "opt")
RANK_FORMAT_KEYS = ("format", "layout", "cbits", "pbits")
EXTENSION_KEYS = ("schedule", "layout", "block_threads", "params")
SCHEDULES = ("thread_mapped", "group_mapped", "work_oriented", "merge_path", "auto")
LAYOUTS = ("contiguous", "interleaved")
MAX_BLOCK_THREADS = 1024

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
NAME_RE = re.compile(rf"^{_NAME}$")
_RANKS_RE = re.compile(rf"^\(\s*({_NAME})((?:\s*,\s*{_NAME})+)\s*\)$")
_FN_RE = re.compile(rf"^({_NAME})\s*\((.*)\)$", re.S)
_SIZE_RE = re.compile(rf"^(?:([0-9]+)|({_NAME}))$")
_LEADER_SIZE_RE = re.compile(rf"^({_NAME})\s*\.\s*([0-9]+|{_NAME})$")
_SPACETIME_RE = re.compile(rf"^({_NAME})(?:\.(pos|coord))?$")
_LEVEL_RE = re.compile(rf"^\s*({_NAME})\s*(?:\[\s*0\s*\.\.\s*([0-9]+)\s*\])?\s*$")

PARTITION_SIGNATURES = {
    "uniform_shape": "uniform_shape(SIZE)",
    "nway_shape": "nway_shape(N)",
    "uniform_occupancy": "uniform_occupancy(TENSOR.SIZE)",
    "follow": "follow(RANK)",
    "flatten": "flatten()",
    "x_merge_path": "x_merge_path(TENSOR.SIZE)",
}


# ------------------------------------------------------------------------------------------
# Parsing context: errors and warnings with positions
# ------------------------------------------------------------------------------------------


@dataclass
class Context:
    source: str | None
    strict: bool
    warnings: list[Warning_] = field(default_factory=list)

    def fail(
        self,
        message: str,
        where: YNode | YEntry | Location | None,
        key_path: str | None,
        expected: str | None = None,
    ) -> NoReturn:
        raise SpecError(
            message, location=self.loc(where), key_path=key_path or None, expected=expected
        )

    def loc(self, where: YNode | YEntry | Location | None) -> Location:
        if where is None:
            return Location(self.source, 1, 1)
        if isinstance(where, Location):
            return where
        if isinstance(where, YEntry):
            return where.key_location
        return where.location

    def warn(
        self, message: str, where: YNode | YEntry | Location | None, key_path: str | None
    ) -> None:
        self.warnings.append(Warning_(message, self.loc(where), key_path))

    def extension(self, what: str, where: YNode | YEntry, key_path: str) -> None:
        """Our non-TeAAL features: fine normally, an error in strict-TeAAL mode."""
        if self.strict:
            self.fail(
                f"{what} is a teaal-loops extension, not TeAAL (rejected in strict mode)",
                where,
                key_path,
            )

    # ---- typed access ---------------------------------------------------------------------
    def want_map(
        self, node: YNode | None, path: str, what: str, where: YEntry | None = None
    ) -> YMap:
        if isinstance(node, YMap):
            return node
        self.fail(
            f"found {describe(node)}",
            node if node is not None else where,
            path,
            expected=what,
        )

    def opt_map(
        self, node: YNode | None, path: str, what: str, where: YEntry | None = None
    ) -> YMap | None:
        """A mapping, or ``None`` for an empty value (TeAAL treats ``key:`` as absent)."""
        if node is None or (isinstance(node, YScalar) and node.value is None):
            return None
        return self.want_map(node, path, what, where)

    def want_list(
        self, node: YNode | None, path: str, what: str, where: YEntry | None = None
    ) -> YSeq:
        if isinstance(node, YSeq):
            return node
        hint = ""
        if isinstance(node, YScalar) and isinstance(node.value, str) and "," in node.value:
            hint = f" (write it as a YAML list: [{node.value}])"
        self.fail(f"found {describe(node)}{hint}", node if node is not None else where, path, what)

    def want_str(
        self, node: YNode | None, path: str, what: str, where: YEntry | None = None
    ) -> YScalar:
        if isinstance(node, YScalar) and isinstance(node.value, str):
            return node
        self.fail(f"found {describe(node)}", node if node is not None else where, path, what)

    def want_name(
        self, node: YNode | None, path: str, what: str, where: YEntry | None = None
    ) -> str:
        s = self.want_str(node, path, what, where)
        text = s.value
        assert isinstance(text, str)
        if not NAME_RE.match(text.strip()):
            self.fail(f"{text!r} is not a name", s, path, what)
        return text.strip()

    def want_int(
        self,
        node: YNode | None,
        path: str,
        what: str,
        *,
        minimum: int = 0,
        where: YEntry | None = None,
    ) -> int:
        if (
            isinstance(node, YScalar)
            and isinstance(node.value, int)
            and not isinstance(node.value, bool)
        ):
            if node.value < minimum:
                self.fail(f"{node.value} is too small", node, path, what)
            return node.value
        self.fail(f"found {describe(node)}", node if node is not None else where, path, what)

    def check_keys(self, node: YMap, known: tuple[str, ...], path: str) -> None:
        """Warn about keys TeAAL would silently ignore, suggesting the close match."""
        for entry in node.entries:
            if entry.key in known:
                continue
            close = difflib.get_close_matches(entry.key, known, n=1, cutoff=0.6)
            hint = (
                f"; did you mean {close[0]!r}?" if close else f" (known keys: {', '.join(known)})"
            )
            self.warn(
                f"unknown key {entry.key!r} is ignored{hint}",
                entry,
                f"{path}.{entry.key}" if path else entry.key,
            )


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# ------------------------------------------------------------------------------------------
# The draft: what the YAML says, before cross-checking
# ------------------------------------------------------------------------------------------


@dataclass
class Draft:
    """Parsed sections, positions kept; :mod:`validate` turns this into a :class:`Spec`."""

    source: str | None
    declaration: dict[str, tuple[str, ...]]
    declaration_loc: dict[str, YEntry]
    einsums: list[Einsum]
    einsum_paths: list[str]
    rank_order: dict[str, tuple[str, ...]] = field(default_factory=dict)
    rank_order_loc: dict[str, YEntry] = field(default_factory=dict)
    partitioning: dict[str, list[RankPartitioning]] = field(default_factory=dict)
    partitioning_loc: dict[str, YEntry] = field(default_factory=dict)
    loop_order: dict[str, tuple[str, ...]] = field(default_factory=dict)
    loop_order_loc: dict[str, YEntry] = field(default_factory=dict)
    spacetime: dict[str, SpaceTime] = field(default_factory=dict)
    spacetime_loc: dict[str, YEntry] = field(default_factory=dict)
    formats: dict[str, tuple[TensorFormat, ...]] = field(default_factory=dict)
    formats_loc: dict[str, YEntry] = field(default_factory=dict)
    architecture: Mapping[str, object] = field(default_factory=dict)
    bindings: Mapping[str, object] = field(default_factory=dict)
    bindings_loc: dict[str, YEntry] = field(default_factory=dict)
    extensions: Extensions | None = None


def parse_document(text: str, ctx: Context) -> Draft:
    root = load_yaml(text, ctx.source)
    if root is None:
        ctx.fail("the spec is empty", None, None, expected="a mapping with an einsum section")
    top = ctx.want_map(root, "", "a mapping with an einsum section at the top level")
    ctx.check_keys(top, TOP_KEYS, "")

    einsum_entry = top.get("einsum")
    if einsum_entry is None:
        found = ", ".join(top.keys()) or "no keys"
        close = difflib.get_close_matches("einsum", top.keys(), n=1, cutoff=0.6)
        hint = f"; is {close[0]!r} a misspelling?" if close else ""
        ctx.fail(
            f"the spec has no einsum section (found: {found}){hint}",
            top,
            "einsum",
            expected="an einsum section with declaration and expressions",
        )
    draft = _parse_einsum_section(einsum_entry, ctx)

    if (entry := top.get("mapping")) is not None:
        _parse_mapping(entry, ctx, draft)
    if (entry := top.get("format")) is not None:
        _parse_format(entry, ctx, draft)
    if (entry := top.get("architecture")) is not None:
        draft.architecture = _parse_architecture(entry, ctx)
    if (entry := top.get("bindings")) is not None:
        draft.bindings = _parse_bindings(entry, ctx, draft)
    if (entry := top.get(EXTENSION_SECTION)) is not None:
        draft.extensions = _parse_extensions(entry, ctx)
    return draft


# ------------------------------------------------------------------------------------------
# einsum
# ------------------------------------------------------------------------------------------


def _parse_einsum_section(entry: YEntry, ctx: Context) -> Draft:
    section = ctx.want_map(
        entry.value, "einsum", "a mapping with declaration and expressions", where=entry
    )
    if section.get("expressions") is None and (typo := section.get("expression")) is not None:
        ctx.fail(
            "unknown key 'expression'; did you mean 'expressions:'? (the einsum list is "
            "called expressions)",
            typo,
            "einsum.expression",
            expected="expressions:",
        )
    ctx.check_keys(section, EINSUM_KEYS, "einsum")

    decl_entry = section.get("declaration")
    if decl_entry is None:
        ctx.fail(
            "the einsum section has no declaration",
            entry,
            "einsum.declaration",
            expected="declaration: a mapping from each tensor to its rank names, e.g. A: [M, K]",
        )
    declaration: dict[str, tuple[str, ...]] = {}
    declaration_loc: dict[str, YEntry] = {}
    decl = ctx.want_map(
        decl_entry.value, "einsum.declaration", "a mapping tensor -> [RANKS]", decl_entry
    )
    for t in decl.entries:
        path = f"einsum.declaration.{t.key}"
        if not NAME_RE.match(t.key):
            ctx.fail(f"{t.key!r} is not a tensor name", t, path, expected="a name such as A or Z")
        declaration[t.key] = _rank_list(t, ctx, path, "the tensor's rank names, e.g. [M, K]")
        declaration_loc[t.key] = t

    expr_entry = section.get("expressions")
    if expr_entry is None:
        ctx.fail(
            "the einsum section has no expressions",
            entry,
            "einsum.expressions",
            expected="expressions: a list of einsums such as - Z[m] = A[m, k] * B[k]",
        )
    items = ctx.want_list(
        expr_entry.value,
        "einsum.expressions",
        "a list of einsums (- Z[m] = A[m, k] * B[k])",
        expr_entry,
    )
    einsums: list[Einsum] = []
    paths: list[str] = []
    for i, item in enumerate(items.items):
        path = f"einsum.expressions[{i}]"
        s = ctx.want_str(item, path, "an einsum such as Z[m] = A[m, k] * B[k]")
        einsums.append(parse_einsum(str(s.value), s.location_of, path, s.location))
        paths.append(path)
    if not einsums:
        ctx.fail(
            "the expressions list is empty", expr_entry, "einsum.expressions", "at least one einsum"
        )
    return Draft(ctx.source, declaration, declaration_loc, einsums, paths)


def _rank_list(entry: YEntry, ctx: Context, path: str, what: str) -> tuple[str, ...]:
    """A YAML list of rank names (``[M, K]``); names are checked to be identifiers."""
    seq = ctx.want_list(entry.value, path, what, entry)
    names: list[str] = []
    for i, item in enumerate(seq.items):
        name = ctx.want_name(item, f"{path}[{i}]", "a rank name such as M")
        if name in names:
            ctx.fail(f"rank {name} is listed twice", item, f"{path}[{i}]", "each rank once")
        names.append(name)
    return tuple(names)


# ------------------------------------------------------------------------------------------
# mapping
# ------------------------------------------------------------------------------------------


def _parse_mapping(entry: YEntry, ctx: Context, draft: Draft) -> None:
    mapping = ctx.opt_map(
        entry.value, "mapping", "a mapping with rank-order, partitioning, ...", entry
    )
    if mapping is None:
        return
    ctx.check_keys(mapping, MAPPING_KEYS, "mapping")

    if (e := mapping.get("rank-order")) is not None and (
        m := ctx.opt_map(e.value, "mapping.rank-order", "a mapping tensor -> [RANKS]", e)
    ):
        for t in m.entries:
            path = f"mapping.rank-order.{t.key}"
            draft.rank_order[t.key] = _rank_list(
                t, ctx, path, "the tensor's ranks in storage order"
            )
            draft.rank_order_loc[t.key] = t

    if (e := mapping.get("partitioning")) is not None and (
        m := ctx.opt_map(
            e.value, "mapping.partitioning", "a mapping einsum output -> ranks -> functions", e
        )
    ):
        for t in m.entries:
            draft.partitioning[t.key] = _parse_partitioning(t, ctx)
            draft.partitioning_loc[t.key] = t

    if (e := mapping.get("loop-order")) is not None and (
        m := ctx.opt_map(e.value, "mapping.loop-order", "a mapping einsum output -> [RANKS]", e)
    ):
        for t in m.entries:
            path = f"mapping.loop-order.{t.key}"
            if _is_null(t.value):  # TeAAL treats `Z:` with no list as "use the default"
                ctx.warn("empty loop order; the default (the final ranks) is used", t, path)
                continue
            draft.loop_order[t.key] = _rank_list(
                t, ctx, path, "the einsum's final ranks in loop order"
            )
            draft.loop_order_loc[t.key] = t

    if (e := mapping.get("spacetime")) is not None and (
        m := ctx.opt_map(e.value, "mapping.spacetime", "a mapping einsum output -> space/time", e)
    ):
        for t in m.entries:
            draft.spacetime[t.key] = _parse_spacetime(t, ctx)
            draft.spacetime_loc[t.key] = t


def _parse_partitioning(entry: YEntry, ctx: Context) -> list[RankPartitioning]:
    base = f"mapping.partitioning.{entry.key}"
    m = ctx.opt_map(
        entry.value, base, "a mapping from ranks (M or (M, K)) to partitioning functions", entry
    )
    out: list[RankPartitioning] = []
    if m is None:
        return out
    seen: dict[tuple[str, ...], YEntry] = {}
    for r in m.entries:
        path = f"{base}.{r.key}"
        ranks = _parse_rank_key(r, ctx, path)
        if ranks in seen:
            ctx.fail(
                f"{r.key!r} names the same ranks as {seen[ranks].key!r} "
                f"(line {seen[ranks].key_location.line})",
                r,
                path,
                expected="each rank or rank tuple once",
            )
        seen[ranks] = r
        fns: list[PartitionFn] = []
        if not (isinstance(r.value, YScalar) and r.value.value is None):
            seq = ctx.want_list(
                r.value, path, "a list of partitioning functions, e.g. [uniform_shape(64)]", r
            )
            for i, item in enumerate(seq.items):
                fns.append(_parse_partition_fn(item, ctx, f"{path}[{i}]"))
        out.append(RankPartitioning(ranks, tuple(fns), (), r.key_location))
    return out


def _parse_rank_key(entry: YEntry, ctx: Context, path: str) -> tuple[str, ...]:
    key = entry.key.strip()
    if NAME_RE.match(key):
        return (key,)
    m = _RANKS_RE.match(key)
    if m:
        names = (m.group(1), *(n.strip() for n in m.group(2).split(",")[1:]))
        if len(set(names)) != len(names):
            ctx.fail(f"{entry.key!r} repeats a rank", entry, path, "distinct ranks")
        return tuple(names)
    ctx.fail(
        f"{entry.key!r} is not a rank or a tuple of ranks",
        entry,
        path,
        expected="a rank name (M) or a parenthesized tuple of two or more ranks ((M, K))",
    )


def _parse_partition_fn(node: YNode, ctx: Context, path: str) -> PartitionFn:
    what = "a partitioning function: " + ", ".join(PARTITION_SIGNATURES.values())
    s = ctx.want_str(node, path, what)
    text = str(s.value).strip()
    m = _FN_RE.match(text)
    if not m:
        ctx.fail(f"{text!r} is not a partitioning function", s, path, what)
    name, arg = m.group(1), m.group(2).strip()
    if name not in PARTITION_SIGNATURES:
        close = difflib.get_close_matches(
            name, list(PARTITION_SIGNATURES), n=1, cutoff=0.5
        ) or difflib.get_close_matches(_snake(name), list(PARTITION_SIGNATURES), n=1, cutoff=0.6)
        hint = f"; did you mean {PARTITION_SIGNATURES[close[0]]}?" if close else ""
        ctx.fail(f"unknown partitioning function {name!r}{hint}", s, path, what)
    sig = PARTITION_SIGNATURES[name]
    kind = cast(
        Literal[
            "uniform_shape", "nway_shape", "uniform_occupancy", "follow", "flatten", "x_merge_path"
        ],
        name,
    )
    if kind == "x_merge_path":
        ctx.extension("the partitioning function x_merge_path", s, path)

    def bad(why: str) -> NoReturn:
        ctx.fail(f"{text!r}: {why}", s, path, expected=sig)

    def size_of(token: str) -> int | str:
        if token.isdigit():
            value = int(token)
            if value <= 0:
                bad("the size must be positive")
            return value
        return token

    if kind == "flatten":
        if arg:
            bad("flatten() takes no arguments")
        return PartitionFn(kind, text=text, location=s.location)
    if kind == "follow":
        if not NAME_RE.match(arg):
            bad("follow() takes the rank to follow")
        return PartitionFn(kind, target=arg, text=text, location=s.location)
    if kind in ("uniform_shape", "nway_shape"):
        sm = _SIZE_RE.match(arg)
        if not sm:
            bad("the size must be a positive integer or a parameter name")
        return PartitionFn(kind, size=size_of(arg), text=text, location=s.location)
    lm = _LEADER_SIZE_RE.match(arg)
    if not lm:
        bad(
            "expected the leader tensor, a dot and the size "
            "(occupancy counts the leader's nonzeros)"
        )
    return PartitionFn(
        kind, size=size_of(lm.group(2)), leader=lm.group(1), text=text, location=s.location
    )


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


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
        for i, item in enumerate(seq.items):
            path = f"{base}.{stamp}[{i}]"
            s = ctx.want_str(item, path, "a rank name, optionally suffixed .pos or .coord")
            sm = _SPACETIME_RE.match(str(s.value).strip())
            if not sm:
                ctx.fail(
                    f"{s.value!r} is not a spacetime rank", s, path, "RANK, RANK.pos or RANK.coord"
                )
            style = cast(Literal["pos", "coord"], sm.group(2) or "pos")
            ranks.append(SpaceTimeRank(sm.group(1), style))
        lists[stamp] = tuple(ranks)
    slip = False
    if (opt := m.get("opt")) is not None and not (
        isinstance(opt.value, YScalar) and opt.value.value is None
    ):
        if isinstance(opt.value, YScalar) and opt.value.value == "slip":
            slip = True
        else:
            ctx.fail(
                f"unknown spacetime optimization {to_plain(opt.value)!r}",
                opt.value,
                f"{base}.opt",
                expected="slip",
            )
    return SpaceTime(lists["space"], lists["time"], slip, entry.key_location)


# ------------------------------------------------------------------------------------------
# format
# ------------------------------------------------------------------------------------------


def _parse_format(entry: YEntry, ctx: Context, draft: Draft) -> None:
    m = ctx.opt_map(entry.value, "format", "a mapping tensor -> format name -> spec", entry)
    if m is None:
        return
    for t in m.entries:
        tpath = f"format.{t.key}"
        named = ctx.opt_map(t.value, tpath, "a mapping from format names to format specs", t)
        formats: list[TensorFormat] = []
        for f in named.entries if named else ():
            formats.append(_parse_tensor_format(t.key, f, ctx, f"{tpath}.{f.key}"))
        draft.formats[t.key] = tuple(formats)
        draft.formats_loc[t.key] = t


def _parse_tensor_format(tensor: str, entry: YEntry, ctx: Context, path: str) -> TensorFormat:
    spec = ctx.want_map(
        entry.value, path, "a mapping with rank-order and one entry per rank", entry
    )
    ro = spec.get("rank-order")
    if ro is None:
        ctx.fail(
            f"rank order not specified for tensor {tensor} in format {entry.key}",
            entry,
            f"{path}.rank-order",
            expected="rank-order: [RANKS]",
        )
    order = _rank_list(ro, ctx, f"{path}.rank-order", "the format's rank order")
    ranks: list[RankFormat] = []
    for r in spec.entries:
        if r.key == "rank-order":
            continue
        rpath = f"{path}.{r.key}"
        if r.key not in order:
            close = difflib.get_close_matches(r.key, order, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            ctx.warn(
                f"{r.key!r} is not in this format's rank-order {list(order)} and is ignored{hint}",
                r,
                rpath,
            )
            continue
        attrs = ctx.want_map(
            r.value, rpath, "a mapping with format: U|C and optional cbits, pbits, layout", r
        )
        ctx.check_keys(attrs, RANK_FORMAT_KEYS, rpath)
        fmt_entry = attrs.get("format")
        if fmt_entry is None:
            ctx.fail(f"rank {r.key} has no format", r, f"{rpath}.format", "format: U or format: C")
        fv = fmt_entry.value
        if not (isinstance(fv, YScalar) and fv.value in ("U", "C")):
            ctx.fail(
                f"found {describe(fv)}", fv, f"{rpath}.format", "U (uncompressed) or C (compressed)"
            )
        layout = None
        if (le := attrs.get("layout")) is not None:
            lv = le.value
            if not (isinstance(lv, YScalar) and lv.value in LAYOUTS):
                ctx.fail(f"found {describe(lv)}", lv, f"{rpath}.layout", " or ".join(LAYOUTS))
            layout = str(lv.value)
        bits: dict[str, int | None] = {"cbits": None, "pbits": None}
        for b in bits:
            if (be := attrs.get(b)) is not None:
                bits[b] = ctx.want_int(
                    be.value, f"{rpath}.{b}", "a number of bits (integer >= 0)", where=be
                )
        ranks.append(
            RankFormat(
                r.key,
                cast(Literal["U", "C"], fv.value),
                layout=layout,
                cbits=bits["cbits"],
                pbits=bits["pbits"],
            )
        )
    return TensorFormat(tensor, entry.key, order, tuple(ranks), entry.key_location)


# ------------------------------------------------------------------------------------------
# architecture and bindings: structure-checked, kept as read-only plain data
# ------------------------------------------------------------------------------------------


def freeze(value: object) -> object:
    """Dicts become read-only mappings and lists tuples, all the way down."""
    if isinstance(value, dict):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def _parse_architecture(entry: YEntry, ctx: Context) -> Mapping[str, object]:
    m = ctx.want_map(
        entry.value, "architecture", "a mapping from configuration names to level trees", entry
    )
    for cfg in m.entries:
        path = f"architecture.{cfg.key}"
        seq = ctx.want_list(cfg.value, path, "a list of levels (each with a name)", cfg)
        stack: list[tuple[YNode, str]] = [(n, f"{path}[{i}]") for i, n in enumerate(seq.items)]
        while stack:
            node, lpath = stack.pop()
            level = ctx.want_map(
                node, lpath, "a level: name, and optional attributes, local, subtree"
            )
            ctx.check_keys(level, ("name", "attributes", "local", "subtree"), lpath)
            name = level.get("name")
            if name is None:
                ctx.fail("unnamed level", level, f"{lpath}.name", "name: NAME or NAME[0..N]")
            ns = ctx.want_str(name.value, f"{lpath}.name", "NAME or NAME[0..N]", name)
            if not _LEVEL_RE.match(str(ns.value)):
                ctx.fail(
                    f"{ns.value!r} is not a level name", ns, f"{lpath}.name", "NAME or NAME[0..N]"
                )
            if (a := level.get("attributes")) is not None:
                ctx.opt_map(a.value, f"{lpath}.attributes", "a mapping of attributes", a)
            if (loc := level.get("local")) is not None and not _is_null(loc.value):
                locals_ = ctx.want_list(loc.value, f"{lpath}.local", "a list of components", loc)
                for i, comp in enumerate(locals_.items):
                    cpath = f"{lpath}.local[{i}]"
                    c = ctx.want_map(comp, cpath, "a component with name, class and attributes")
                    ctx.check_keys(c, ("name", "class", "attributes"), cpath)
                    for req in ("name", "class"):
                        if (ce := c.get(req)) is None:
                            ctx.fail(f"component without {req}", c, f"{cpath}.{req}", f"{req}: ...")
                        ctx.want_str(ce.value, f"{cpath}.{req}", f"the component's {req}", ce)
                    if (a := c.get("attributes")) is not None:
                        ctx.opt_map(a.value, f"{cpath}.attributes", "a mapping of attributes", a)
            if (sub := level.get("subtree")) is not None and not _is_null(sub.value):
                subs = ctx.want_list(sub.value, f"{lpath}.subtree", "a list of levels", sub)
                stack.extend((n, f"{lpath}.subtree[{i}]") for i, n in enumerate(subs.items))
    return cast(Mapping[str, object], freeze(to_plain(m)))


def _is_null(node: YNode) -> bool:
    return isinstance(node, YScalar) and node.value is None


def _parse_bindings(entry: YEntry, ctx: Context, draft: Draft) -> Mapping[str, object]:
    m = ctx.want_map(entry.value, "bindings", "a mapping einsum output -> list of bindings", entry)
    for e in m.entries:
        path = f"bindings.{e.key}"
        draft.bindings_loc[e.key] = e
        seq = ctx.want_list(
            e.value, path, "a list of bindings (a config/prefix entry and components)", e
        )
        configured = False
        for i, item in enumerate(seq.items):
            ipath = f"{path}[{i}]"
            b = ctx.want_map(item, ipath, "either {config, prefix} or {component, bindings}")
            if b.get("config") is not None:
                ctx.check_keys(b, ("config", "prefix"), ipath)
                if b.get("prefix") is None:
                    ctx.fail("config without prefix", b, f"{ipath}.prefix", "prefix: PATH")
                configured = True
            elif (comp := b.get("component")) is not None:
                ctx.check_keys(b, ("component", "bindings"), ipath)
                ctx.want_str(comp.value, f"{ipath}.component", "a component name", comp)
                if (bb := b.get("bindings")) is None:
                    ctx.fail(
                        "component without bindings", b, f"{ipath}.bindings", "bindings: [...]"
                    )
                inner = ctx.want_list(bb.value, f"{ipath}.bindings", "a list of bindings", bb)
                for j, one in enumerate(inner.items):
                    ctx.want_map(one, f"{ipath}.bindings[{j}]", "a binding (a mapping)")
            else:
                ctx.fail(
                    "binding is neither a config nor a component",
                    b,
                    ipath,
                    "config: NAME with prefix: PATH, or component: NAME with bindings: [...]",
                )
        if not configured:
            ctx.fail(
                f"accelerator config and prefix missing for einsum {e.key}",
                e,
                path,
                "an entry - config: NAME / prefix: PATH",
            )
    return cast(Mapping[str, object], freeze(to_plain(m)))


# ------------------------------------------------------------------------------------------
# x-teaal-loops: our extension section
# ------------------------------------------------------------------------------------------


def _parse_extensions(entry: YEntry, ctx: Context) -> Extensions:
    ctx.extension(f"the {EXTENSION_SECTION} section", entry, EXTENSION_SECTION)
    m = ctx.opt_map(
        entry.value,
        EXTENSION_SECTION,
        "a mapping with schedule, layout, block_threads, params",
        entry,
    )
    if m is None:
        return Extensions(location=entry.key_location)
    ctx.check_keys(m, EXTENSION_KEYS, EXTENSION_SECTION)
    schedule = layout = None
    block_threads = None
    params: dict[str, int] = {}
    if (e := m.get("schedule")) is not None:
        v = e.value
        if not (isinstance(v, YScalar) and v.value in SCHEDULES):
            ctx.fail(
                f"found {describe(v)}", v, f"{EXTENSION_SECTION}.schedule", " | ".join(SCHEDULES)
            )
        schedule = str(v.value)
    if (e := m.get("layout")) is not None:
        layout = str(
            ctx.want_str(
                e.value, f"{EXTENSION_SECTION}.layout", "a layout name such as csr", e
            ).value
        )
    if (e := m.get("block_threads")) is not None:
        block_threads = ctx.want_int(
            e.value,
            f"{EXTENSION_SECTION}.block_threads",
            f"threads per block, 1 to {MAX_BLOCK_THREADS}",
            minimum=1,
            where=e,
        )
        if block_threads > MAX_BLOCK_THREADS:
            ctx.fail(
                f"{block_threads} threads per block",
                e.value,
                f"{EXTENSION_SECTION}.block_threads",
                f"at most {MAX_BLOCK_THREADS}",
            )
    if (e := m.get("params")) is not None:
        pm = ctx.opt_map(
            e.value, f"{EXTENSION_SECTION}.params", "a mapping NAME -> positive integer", e
        )
        for p in pm.entries if pm else ():
            path = f"{EXTENSION_SECTION}.params.{p.key}"
            if not NAME_RE.match(p.key):
                ctx.fail(f"{p.key!r} is not a parameter name", p, path, "a name such as BLOCK_SIZE")
            params[p.key] = ctx.want_int(p.value, path, "a positive integer", minimum=1, where=p)
    return Extensions(schedule, layout, block_threads, MappingProxyType(params), entry.key_location)


# ------------------------------------------------------------------------------------------
# Entry points
# ------------------------------------------------------------------------------------------


def read_spec_text(path: str | os.PathLike[str]) -> str:
    """Read a spec file as UTF-8; a decoding failure is a :class:`SpecError` with its line."""
    name = os.fspath(path)
    with open(name, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        col = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise SpecError(
            f"the file is not UTF-8 text (byte 0x{data[err.start]:02x})",
            location=Location(name, line, col),
        ) from None
    return text.removeprefix("\ufeff")


Locator = Callable[[int], Location]
