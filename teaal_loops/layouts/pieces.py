"""The heavy rows alone, in column panels (``pieces:W``; plain ``pieces`` is ``pieces:4096``):
a matrix whose every non-empty row has at least
:data:`~teaal_loops.matrix.heavy_rows.PIECE_MIN` nonzeros a panel, cut into pieces of W
columns. Tile ``p * H + h`` holds heavy row h's nonzeros in panel p (H heavy rows, P =
``ceil(cols / W)`` panels), so the pieces of one panel are neighbours, as in ``heavy:W``.
Every tile adds into its row atomically: the layout is ``stacked`` with every tile adding, so
a launch either zeroes its output first or, bound with ``accumulate=True``, adds into what is
there.

Why: ``heavy:W`` runs light rows and heavy pieces under one schedule, and no schedule suits
both (a light row of one or two nonzeros wants a lane, a piece of a hundred a warp).
:func:`teaal_loops.split_heavy` splits a matrix into its light rows (plain CSR, a heavy row
empty) and its heavy rows (this layout), and the two run as two launches, each under its own
schedule: the light launch stores every row, then this one adds the pieces.

Which rows are heavy is the split's choice (``split_heavy``'s ``min_nnz``, 4,096 by default;
R-MAT's SpMM gains from 64, BENCHMARKS.md), not this layout's: it takes every row it is given,
and asks of each only :data:`~teaal_loops.matrix.heavy_rows.PIECE_MIN` nonzeros a panel, so
that its P * H tiles stay within an eighth of its nonzeros (memory bounded by the matrix). A
non-empty row shorter than that is refused, naming the row: building its pieces anyway would
drop it, and a product missing a row is a wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from teaal_loops.errors import LayoutError
from teaal_loops.layouts import panel_pieces
from teaal_loops.layouts.contract import Entries, Packed
from teaal_loops.layouts.host import (
    no_options,
    signed_index,
)
from teaal_loops.layouts.panel_pieces import PanelPiecesLayout
from teaal_loops.layouts.registry import register
from teaal_loops.matrix.heavy_rows import (
    PIECE_MIN,
    heavy_arrays,
    heavy_threshold,
    panel_count,
)
from teaal_loops.types import KernelParam


def panel_width(option: Any) -> int:
    return panel_pieces.panel_width(option, "pieces")


@dataclass(frozen=True, eq=False)
class PiecesLayout(PanelPiecesLayout):
    """The pieces alone: no light tiles."""

    name: ClassVar[str] = "pieces"

    def light_tiles(self) -> int:
        return 0


def pieces_arrays(xp: Any, indptr: Any, indices: Any, values: Any, shape: tuple[int, int],
                  width: int) -> dict[str, Any]:
    """The layout's arrays and counts from CSR arrays where they are (NumPy or CuPy), after
    refusing a non-empty row too short for its pieces (module docstring)."""
    rows, cols = shape
    ptr = xp.asarray(indptr, dtype=xp.int64)
    lengths = ptr[1:] - ptr[:-1]
    panels = panel_count(cols, width)
    threshold = heavy_threshold(panels, min_nnz=1)  # PIECE_MIN a panel
    light = xp.flatnonzero((lengths > 0) & (lengths < threshold))
    if int(light.size):
        row = int(light[0])
        raise LayoutError(
            f"layout pieces:{width}: row {row} has {int(lengths[row])} nonzeros, fewer than "
            f"{threshold} ({PIECE_MIN} for each of {panels} panels); this layout holds the "
            "heavy rows alone (teaal_loops.split_heavy splits a matrix into its light and "
            "heavy rows)")
    built = heavy_arrays(xp, indptr, indices, values, shape, width, min_nnz=1)
    return {**built, "indptr": built["indptr"][rows:]}  # the rows' tiles are all empty


def build(csr: sp.csr_matrix, **options: Any) -> PiecesLayout:
    """``width``: the panel width (the option after ``pieces:``)."""
    width = panel_width(options.pop("width", None))
    no_options("pieces", options, ("width",))
    built = pieces_arrays(np, csr.indptr, csr.indices, csr.data, csr.shape, width)
    index = signed_index(csr.indices.dtype)
    return PiecesLayout(csr.shape, int(csr.nnz), width, built["heavy_rows"].astype(index),
                        built["indptr"].astype(index), built["indices"].astype(index),
                        built["values"])


def device_arrays(
    xp: Any, indptr: Any, indices: Any, values: Any, shape: tuple[int, int], option: str | None
) -> dict[str, Any]:
    """:func:`pieces_arrays` for the panel width a layout name's option gives (the device
    builder)."""
    return pieces_arrays(xp, indptr, indices, values, shape, panel_width(option))


def pack(host: PiecesLayout, option: str | None) -> Packed:
    """The kernel's arguments, after checking a host layout (perhaps built by hand) keeps the
    layout's rules: every nonzero lies in its piece's panel, the heavy rows are distinct."""
    heavy, panels = panel_pieces.check_pieces(host, option, "pieces")
    return Packed(
        {"indptr": host.indptr, "indices": host.indices, "values": host.data,
         "heavy_rows": heavy},
        {"heavy": len(heavy), "panels": panels},
    )


def entries(host: PiecesLayout, option: str | None) -> Entries:
    return panel_pieces.entries(host, option, "pieces")


_WIDTH = panel_pieces.WidthOption("pieces")

DEFINITION = register(
    "pieces",
    macro_file="layouts/pieces.cuh.j2",
    description="heavy rows alone, in column panels: every non-empty row long, cut into "
    "pieces of W columns walked panel by panel, each adding into its row (the second launch "
    "of a split)",
    teaal_format="by name only: --layout pieces:W, over the heavy rows teaal_loops.split_heavy "
    "leaves",
    tiles="heavy rows' pieces panel by panel",
    schedules=("thread_mapped", "group_mapped", "work_oriented", "merge_path"),
    forms=("spmv", "spmm"),
    stacked=True,  # every tile adds (no adding_from: none stores)
    column_stores=True,
    atoms_are_nonzeros=True,
    params=(
        KernelParam("rows", "index_t", "number of rows (length of y)"),
        KernelParam("cols", "index_t", "number of columns (length of x)"),
        KernelParam("nnz", "offset_t", "number of stored nonzeros (atoms)"),
        KernelParam("heavy", "index_t", "number of heavy rows (H)"),
        KernelParam("panels", "index_t", "number of column panels (P)"),
        KernelParam("indptr", "const offset_t* __restrict__",
                    "tile offsets, P * H + 1: heavy row h in panel p at p * H + h"),
        KernelParam("indices", "const index_t* __restrict__", "column of each nonzero"),
        KernelParam("values", "const value_t* __restrict__", "value of each nonzero"),
        KernelParam("heavy_rows", "const index_t* __restrict__", "the heavy rows, ascending"),
    ),
    build=build,
    pack=pack,
    entries=entries,
    device_build=device_arrays,
    option=_WIDTH.option,
    template_options=_WIDTH.template_options,
    build_options=_WIDTH.build_options,
)
