"""Which layout a spec's TeAAL ``format`` section describes.

A format picks a layout either by name (a format called ``csr``, ``ELL``, ``BCSR_4x4``,
``bcsr-2x2``, ...) or by structure: its rank order and the U/C format of each rank, matched by
each layout definition's ``matches_format``.
"""

from __future__ import annotations

import re

from teaal_loops.errors import LayoutError, Location
from teaal_loops.layouts.registry import canonical_layout, get_layout, known_layouts
from teaal_loops.spec.model import RankFormat, Spec, TensorFormat


def supported_formats_text() -> str:
    return "; ".join(f"{n}: {get_layout(n).teaal_format}" for n in known_layouts())


def layout_from_format(spec: Spec, matrix: str, tile: str, atom: str) -> str | None:
    """The layout that ``spec``'s ``format`` section gives ``matrix`` (None if it has none).

    ``tile`` and ``atom`` are the SpMV's row rank (kept by the output) and column rank."""
    formats = spec.formats.get(matrix, ())
    if not formats:
        return None
    fmt = formats[0]
    by_name = _layout_by_name(fmt.name)
    if by_name is not None:
        return by_name
    matching = [
        name
        for name in known_layouts()
        if (match := get_layout(name).matches_format) is not None and match(fmt, tile, atom)
    ]
    if not matching:
        ranks = ", ".join(f"{r.rank}: {r.format}" for r in fmt.ranks)
        raise LayoutError(
            f"format {fmt.name} of {matrix} (rank-order [{', '.join(fmt.rank_order)}]; {ranks}) "
            f"maps to no layout; supported formats: {supported_formats_text()}; or name the "
            f"format after a layout ({', '.join(known_layouts())}; e.g. BCSR_4x4)",
            location=fmt.location or (Location(spec.source) if spec.source else None),
        )
    return canonical_layout(matching[0])


def layout_for_rank_order(order: tuple[str, ...], row: str, col: str) -> str | None:
    """The layout a matrix stored in rank order ``order`` (with TeAAL's default formats: the
    outer rank uncompressed, the inner compressed) is in, for a spec without a format."""
    ranks = tuple(RankFormat(rank, "U" if i == 0 else "C") for i, rank in enumerate(order))
    fmt = TensorFormat(tensor="", name="", rank_order=order, ranks=ranks)
    for name in known_layouts():
        match = get_layout(name).matches_format
        if match is not None and match(fmt, row, col):
            return canonical_layout(name)
    return None


def _layout_by_name(name: str) -> str | None:
    """A format named after a layout: ``csr``, ``ELL``, ``BCSR_4x4``, ``bcsr-2x2``, ``bcsr4x4``."""
    key = name.strip().lower()
    known = known_layouts()
    if key in known:
        return canonical_layout(key)
    match = re.fullmatch(r"([a-z][a-z0-9]*?)[_:\-]?(\d+(?:x\d+)?)", key)
    if match and match.group(1) in known and get_layout(match.group(1)).option is not None:
        return canonical_layout(f"{match.group(1)}:{match.group(2)}")
    return None
