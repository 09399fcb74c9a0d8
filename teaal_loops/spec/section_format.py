"""The ``format`` section: per tensor, named formats with a rank order and U/C per rank."""

from __future__ import annotations

from typing import Literal, cast

from teaal_loops.spec.context import Context, suggest
from teaal_loops.spec.draft import Draft
from teaal_loops.spec.model import RankFormat, TensorFormat
from teaal_loops.spec.yaml_positions import YEntry, YMap, YScalar, describe, quote

RANK_FORMAT_KEYS = ("format", "layout", "cbits", "pbits")
LAYOUTS = ("contiguous", "interleaved")
MAX_BITS = 1024


def parse_format(entry: YEntry, ctx: Context, draft: Draft) -> None:
    m = ctx.opt_map(entry.value, "format", "a mapping tensor -> format name -> spec", entry)
    if m is None:
        return
    for t in m.entries:
        tpath = f"format.{t.key}"
        ctx.key_name(t, tpath, "a tensor name")
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
    order = ctx.rank_list(ro, f"{path}.rank-order", "the format's rank order")
    ranks: list[RankFormat] = []
    for r in spec.entries:
        if r.key == "rank-order":
            continue
        rpath = f"{path}.{r.key}"
        if r.key not in order:
            close = suggest(r.key, order)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            ctx.warn(
                f"{quote(r.key)} is not in this format's rank-order {list(order)} and is "
                f"ignored{hint}",
                r,
                rpath,
            )
            continue
        attrs = ctx.want_map(
            r.value, rpath, "a mapping with format: U|C and optional cbits, pbits, layout", r
        )
        ranks.append(_rank_format(r, attrs, ctx, rpath))
    return TensorFormat(tensor, entry.key, order, tuple(ranks), entry.key_location)


def _rank_format(r: YEntry, attrs: YMap, ctx: Context, rpath: str) -> RankFormat:
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
                be.value,
                f"{rpath}.{b}",
                f"a number of bits (integer from 0 to {MAX_BITS})",
                maximum=MAX_BITS,
                where=be,
            )
    return RankFormat(
        r.key,
        cast(Literal["U", "C"], fv.value),
        layout=layout,
        cbits=bits["cbits"],
        pbits=bits["pbits"],
    )
