"""``x-teaal-loops``: our extension section (never TeAAL; rejected in strict mode).

``schedule`` forces a schedule (``auto`` lets the runtime choose per matrix), ``layout`` picks
the sparse layout (``csr``, ``bcsr:4x4``, ...), ``block_threads`` the CUDA block size and
``params`` default values for size parameters. Every value is checked here, so that a bad one
is reported at its position rather than when a kernel is generated.
"""

from __future__ import annotations

import re
from types import MappingProxyType

from teaal_loops.spec.context import MAX_INT_VALUE, Context
from teaal_loops.spec.model import Extensions
from teaal_loops.spec.yaml_positions import YEntry, YMap, YScalar, describe, quote

EXTENSION_SECTION = "x-teaal-loops"
EXTENSION_KEYS = ("schedule", "layout", "block_threads", "params")
MAX_BLOCK_THREADS = 1024
WARP = 32
# A layout name, optionally with an option after a colon: csr, bcsr:4x4, bcsr:4, my_layout.
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_LAYOUT_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\s*:\s*([A-Za-z0-9_*]{1,32}))?")


def parse_extensions(entry: YEntry, ctx: Context) -> Extensions:
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
    schedule = None
    if (e := m.get("schedule")) is not None:
        v = e.value
        # Which schedules exist is the registry's to say (lowering checks the name, at this
        # value); here it must be a name.
        text = v.value if isinstance(v, YScalar) and isinstance(v.value, str) else None
        if text is None or not _NAME_RE.fullmatch(text):
            ctx.fail(
                f"found {describe(v)}", v, f"{EXTENSION_SECTION}.schedule",
                "auto or a schedule's name (thread_mapped, merge_path, ...)",
            )
        schedule = str(text)
    layout = _layout(m.get("layout"), ctx)
    block_threads = _block_threads(m.get("block_threads"), ctx)
    params = _params(m.get("params"), ctx)
    return Extensions(schedule, layout, block_threads, MappingProxyType(params), entry.key_location)


def _layout(e: YEntry | None, ctx: Context) -> str | None:
    if e is None:
        return None
    path = f"{EXTENSION_SECTION}.layout"
    s, text = ctx.want_text(e.value, path, "a layout name such as csr or bcsr:4x4", e)
    if not _LAYOUT_RE.fullmatch(text):
        ctx.fail(f"{quote(text)} is not a layout name", s, path, "NAME or NAME:OPTION (bcsr:4x4)")
    # Whether the layout exists and its option is valid is decided when the spec is lowered
    # (layouts register at run time); that error carries this key path, so it points here.
    return text


def _block_threads(e: YEntry | None, ctx: Context) -> int | None:
    if e is None:
        return None
    path = f"{EXTENSION_SECTION}.block_threads"
    what = f"threads per block: a multiple of {WARP} from {WARP} to {MAX_BLOCK_THREADS}"
    threads = ctx.want_int(e.value, path, what, minimum=WARP, maximum=MAX_BLOCK_THREADS, where=e)
    if threads % WARP:
        ctx.fail(f"{threads} threads per block is not a whole number of warps", e.value, path, what)
    return threads


def _params(e: YEntry | None, ctx: Context) -> dict[str, int]:
    params: dict[str, int] = {}
    if e is None:
        return params
    pm: YMap | None = ctx.opt_map(
        e.value, f"{EXTENSION_SECTION}.params", "a mapping NAME -> positive integer", e
    )
    for p in pm.entries if pm else ():
        path = f"{EXTENSION_SECTION}.params.{p.key}"
        ctx.key_name(p, path, "a parameter name such as BLOCK_SIZE")
        params[p.key] = ctx.want_int(
            p.value, path, f"a positive integer up to {MAX_INT_VALUE}", minimum=1, where=p
        )
    return params
