"""``mapping.partitioning``: rank keys (``M``, ``(M, K)``) and partitioning functions.

The functions are TeAAL's ``uniform_shape(SIZE)``, ``nway_shape(N)``,
``uniform_occupancy(TENSOR.SIZE)``, ``follow(RANK)`` and ``flatten()``, plus our extension
``x_merge_path(TENSOR.SIZE)``. A size is a positive integer or a parameter name.
"""

from __future__ import annotations

import re
from typing import Literal, NoReturn, cast

from teaal_loops.spec.context import MAX_INT_VALUE, Context, is_name, is_null, suggest
from teaal_loops.spec.key_paths import item
from teaal_loops.spec.model import PartitionFn, RankPartitioning
from teaal_loops.spec.yaml_positions import YEntry, YNode, YScalar, quote

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_RANKS_RE = re.compile(rf"\(\s*({_NAME})((?:\s*,\s*{_NAME})+)\s*\)")
_FN_RE = re.compile(rf"({_NAME})\s*\((.*)\)", re.S)
_SIZE_RE = re.compile(rf"[0-9]+|{_NAME}")
_LEADER_SIZE_RE = re.compile(rf"({_NAME})\s*\.\s*([0-9]+|{_NAME})")

PARTITION_SIGNATURES = {
    "uniform_shape": "uniform_shape(SIZE)",
    "nway_shape": "nway_shape(N)",
    "uniform_occupancy": "uniform_occupancy(TENSOR.SIZE)",
    "follow": "follow(RANK)",
    "flatten": "flatten()",
    "x_merge_path": "x_merge_path(TENSOR.SIZE)",
}
_Kind = Literal[
    "uniform_shape", "nway_shape", "uniform_occupancy", "follow", "flatten", "x_merge_path"
]


def parse_partitioning(entry: YEntry, ctx: Context) -> list[RankPartitioning]:
    """``Z: {M: [...], (M, K): [flatten()]}``: one :class:`RankPartitioning` per rank key."""
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
                f"{quote(r.key)} names the same ranks as {quote(seen[ranks].key)} "
                f"(line {seen[ranks].key_location.line})",
                r,
                path,
                expected="each rank or rank tuple once",
            )
        seen[ranks] = r
        fns: list[PartitionFn] = []
        if not is_null(r.value):
            seq = ctx.want_list(
                r.value, path, "a list of partitioning functions, e.g. [uniform_shape(64)]", r
            )
            for i, node in enumerate(seq.items):
                fns.append(_parse_partition_fn(node, ctx, item(path, i)))
        out.append(RankPartitioning(ranks, tuple(fns), (), r.key_location))
    return out


def _parse_rank_key(entry: YEntry, ctx: Context, path: str) -> tuple[str, ...]:
    key = entry.key.strip()
    if is_name(key):
        return (key,)
    m = _RANKS_RE.fullmatch(key)
    if m:
        names = (m.group(1), *(n.strip() for n in m.group(2).split(",")[1:]))
        if len(set(names)) != len(names):
            ctx.fail(f"{quote(entry.key)} repeats a rank", entry, path, "distinct ranks")
        return tuple(names)
    ctx.fail(
        f"{quote(entry.key)} is not a rank or a tuple of ranks",
        entry,
        path,
        expected="a rank name (M) or a parenthesized tuple of two or more ranks ((M, K))",
    )


def _parse_partition_fn(node: YNode, ctx: Context, path: str) -> PartitionFn:
    what = "a partitioning function: " + ", ".join(PARTITION_SIGNATURES.values())
    s, text = ctx.want_text(node, path, what)
    m = _FN_RE.fullmatch(text)
    if not m:
        ctx.fail(f"{quote(text)} is not a partitioning function", s, path, what)
    name, arg = m.group(1), m.group(2).strip()
    if name not in PARTITION_SIGNATURES:
        close = suggest(name, PARTITION_SIGNATURES, cutoff=0.5) or suggest(
            _snake(name), PARTITION_SIGNATURES
        )
        hint = f"; did you mean {PARTITION_SIGNATURES[close[0]]}?" if close else ""
        ctx.fail(f"unknown partitioning function {name!r}{hint}", s, path, what)
    kind = cast(_Kind, name)
    if kind == "x_merge_path":
        ctx.extension("the partitioning function x_merge_path", s, path)
    return _function(kind, arg, text, s, ctx, path)


def _function(kind: _Kind, arg: str, text: str, s: YScalar, ctx: Context, path: str) -> PartitionFn:
    """The function ``kind`` applied to ``arg`` (the text between the parentheses)."""

    def bad(why: str) -> NoReturn:
        ctx.fail(f"{quote(text)}: {why}", s, path, expected=PARTITION_SIGNATURES[kind])

    def size_of(token: str) -> int | str:
        if not token.isdigit():
            return token
        if len(token.lstrip("0")) > len(str(MAX_INT_VALUE)):
            bad(f"the size is too large (at most {MAX_INT_VALUE})")
        value = int(token)
        if value <= 0:
            bad("the size must be positive")
        if value > MAX_INT_VALUE:
            bad(f"the size is too large (at most {MAX_INT_VALUE})")
        return value

    if kind == "flatten":
        if arg:
            bad("flatten() takes no arguments")
        return PartitionFn(kind, text=text, location=s.location)
    if kind == "follow":
        if not is_name(arg):
            bad("follow() takes the rank to follow")
        return PartitionFn(kind, target=arg, text=text, location=s.location)
    if kind in ("uniform_shape", "nway_shape"):
        if not _SIZE_RE.fullmatch(arg):
            bad("the size must be a positive integer or a parameter name")
        return PartitionFn(kind, size=size_of(arg), text=text, location=s.location)
    lm = _LEADER_SIZE_RE.fullmatch(arg)
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
