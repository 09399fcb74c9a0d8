"""Heavy rows in column panels (``heavy:W``; plain ``heavy`` is ``heavy:4096``): the rows of
at least :func:`heavy_threshold` nonzeros ("heavy") cut into panels of W columns, the other
rows ("light") kept as CSR.

Tiles ``0 .. rows - 1`` are the rows (a heavy row's is empty); tile ``rows + p * H + h`` holds
heavy row h's nonzeros in panel p (H heavy rows, P = ``ceil(cols / W)`` panels), so the pieces
of one panel are neighbours. Atoms are the nonzeros in that order (columns global, each tile's
in its CSR order). A light tile stores its row; a heavy piece adds into its row atomically;
the output is zeroed before the launch (the layout is ``stacked``: tiles share rows).

Why: a launch runs its tiles roughly in index order, so the pieces of one panel run together
and are meant to share the panel's slice of x (of B's rows, in SpMM) while it is in the caches,
where row by row each heavy row reads all of x again (the caches were not profiled). Measured
(BENCHMARKS.md): SpMM on 2^20 rows whose 128 longest hold 90% of the nonzeros ran at 1.58x to
2.79x the best cuSPARSE over this layout, against 0.84x to 1.73x over CSR (H100 and H200).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from teaal_loops.layouts import panel_pieces
from teaal_loops.layouts.contract import Entries, Packed
from teaal_loops.layouts.host import (
    need,
    no_options,
    signed_index,
)
from teaal_loops.layouts.panel_pieces import PanelPiecesLayout
from teaal_loops.layouts.registry import register
from teaal_loops.matrix.heavy_rows import (
    HEAVY_MIN_NNZ,
    heavy_arrays,
    min_nnz_option,
)
from teaal_loops.types import KernelParam


def panel_width(option: Any) -> int:
    return panel_pieces.panel_width(option, "heavy")


@dataclass(frozen=True, eq=False)
class HeavyLayout(PanelPiecesLayout):
    """The rows (a heavy row's tile empty), then the pieces; the kernel's bit mask of the heavy
    rows is made from ``heavy_rows`` when packed."""

    name: ClassVar[str] = "heavy"

    def light_tiles(self) -> int:
        return int(self.shape[0])


def build(csr: sp.csr_matrix, **options: Any) -> HeavyLayout:
    """``width``: the panel width (the option after ``heavy:``); ``min_nnz``: the fewest
    nonzeros of a heavy row (default :data:`HEAVY_MIN_NNZ`; small matrices in tests)."""
    width = panel_width(options.pop("width", None))
    min_nnz = min_nnz_option(options.pop("min_nnz", HEAVY_MIN_NNZ), "layout heavy")
    no_options("heavy", options, ("width", "min_nnz"))
    built = heavy_arrays(np, csr.indptr, csr.indices, csr.data, csr.shape, width, min_nnz)
    index = signed_index(csr.indices.dtype)
    return HeavyLayout(csr.shape, int(csr.nnz), width, built["heavy_rows"].astype(index),
                       built["indptr"].astype(index), built["indices"].astype(index),
                       built["values"])


def mask_words(xp: Any, flags: Any) -> Any:
    """Bit ``i % 32`` of int32 word ``i // 32`` is ``flags[i]`` (one word at least)."""
    words = max(-(-int(flags.size) // 32), 1)
    padded = xp.zeros(words * 32, dtype=xp.uint64)
    padded[: flags.size] = flags
    weights = xp.left_shift(xp.uint64(1), xp.arange(32, dtype=xp.uint64))
    packed = (padded.reshape(words, 32) * weights).sum(axis=1)
    return packed.astype(xp.uint32).view(xp.int32)


def device_arrays(
    xp: Any, indptr: Any, indices: Any, values: Any, shape: tuple[int, int], option: str | None
) -> dict[str, Any]:
    """:func:`heavy_arrays` and the bit mask of the heavy rows, for the panel width a layout
    name's option gives (the device builder)."""
    built = heavy_arrays(xp, indptr, indices, values, shape, panel_width(option))
    return {**built, "heavy_mask": mask_words(xp, built["is_heavy"])}


def pack(host: HeavyLayout, option: str | None) -> Packed:
    """The kernel's arguments, after checking a host layout (perhaps built by hand) keeps the
    layout's rules: every output row is reached exactly as its tiles say."""
    heavy, panels = panel_pieces.check_pieces(host, option, "heavy")
    rows = host.shape[0]
    flags = np.zeros(rows, dtype=bool)
    flags[heavy] = True
    need(not np.any(np.diff(host.tile_ptr()[: rows + 1])[flags]), "heavy",
         "a heavy row has a light tile")
    return Packed(
        {"indptr": host.indptr, "indices": host.indices, "values": host.data,
         "heavy_rows": heavy, "heavy_mask": mask_words(np, flags)},
        {"heavy": len(heavy), "panels": panels},
    )


def entries(host: HeavyLayout, option: str | None) -> Entries:
    return panel_pieces.entries(host, option, "heavy")


def first_piece(host: HeavyLayout) -> int:
    """The first tile that adds into its row rather than stores it: the pieces follow the
    light tiles, one a row."""
    return host.light_tiles()


_WIDTH = panel_pieces.WidthOption("heavy")

DEFINITION = register(
    "heavy",
    macro_file="layouts/heavy.cuh.j2",
    description="heavy rows in column panels: rows of many nonzeros cut into panels of W "
    "columns, walked panel by panel; the other rows CSR",
    teaal_format="by name only: a format named e.g. HEAVY_1024, or --layout heavy:W",
    tiles="rows, then heavy rows' pieces panel by panel",
    schedules=("thread_mapped", "group_mapped", "work_oriented", "merge_path"),
    forms=("spmv", "spmm"),
    stacked=True,
    adding_from=first_piece,
    column_stores=True,
    atoms_are_nonzeros=True,
    params=(
        KernelParam("rows", "index_t", "number of rows (length of y)"),
        KernelParam("cols", "index_t", "number of columns (length of x)"),
        KernelParam("nnz", "offset_t", "number of stored nonzeros (atoms)"),
        KernelParam("heavy", "index_t", "number of heavy rows (H)"),
        KernelParam("panels", "index_t", "number of column panels (P)"),
        KernelParam("indptr", "const offset_t* __restrict__",
                    "tile offsets, rows + P * H + 1: the rows, then heavy row h in panel p at "
                    "rows + p * H + h"),
        KernelParam("indices", "const index_t* __restrict__", "column of each nonzero"),
        KernelParam("values", "const value_t* __restrict__", "value of each nonzero"),
        KernelParam("heavy_rows", "const index_t* __restrict__", "the heavy rows, ascending"),
        KernelParam("heavy_mask", "const int* __restrict__",
                    "bit r % 32 of word r / 32: row r is heavy"),
    ),
    build=build,
    pack=pack,
    entries=entries,
    device_build=device_arrays,
    option=_WIDTH.option,
    template_options=_WIDTH.template_options,
    build_options=_WIDTH.build_options,
)
