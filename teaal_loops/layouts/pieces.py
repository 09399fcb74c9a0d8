"""The heavy rows alone, in column panels (``pieces:W``; plain ``pieces`` is ``pieces:4096``):
a matrix whose every non-empty row is heavy (at least
:func:`~teaal_loops.matrix.heavy_rows.heavy_threshold` nonzeros), cut into pieces of W
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

A matrix with a non-empty light row is refused, naming the row: this layout holds the heavy
rows only, and a product that dropped the light rows would be a wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from teaal_loops.errors import LayoutError
from teaal_loops.layouts.contract import Entries, Packed
from teaal_loops.layouts.host import (
    HostLayout,
    canonical_csr,
    check_ptr,
    in_range,
    need,
    no_options,
    rows_of,
    signed_index,
    whole_number_option,
)
from teaal_loops.layouts.registry import register
from teaal_loops.matrix.heavy_rows import (
    DEFAULT_WIDTH,
    HEAVY_MIN_NNZ,
    MAX_WIDTH,
    MIN_WIDTH,
    heavy_arrays,
    heavy_threshold,
    min_nnz_option,
    panel_count,
    piece_rows,
)
from teaal_loops.types import KernelParam


def panel_width(option: Any) -> int:
    """``"1024"`` or ``1024`` -> 1024; None or ``""`` -> the default width."""
    return whole_number_option(option, "pieces", key="width",
                               meaning="the panel width in columns", example=1024,
                               default=DEFAULT_WIDTH, bounds=(MIN_WIDTH, MAX_WIDTH))


@dataclass(frozen=True, eq=False)
class PiecesLayout(HostLayout):
    name: ClassVar[str] = "pieces"
    width: int
    heavy_rows: np.ndarray  # the heavy rows, ascending
    indptr: np.ndarray  # P * H + 1 tile offsets
    indices: np.ndarray  # global column of each nonzero
    data: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return {"indptr": self.indptr, "indices": self.indices, "data": self.data,
                "heavy_rows": self.heavy_rows}

    def tile_ptr(self) -> np.ndarray:
        return np.asarray(self.indptr, dtype=np.int64)

    def tile_rows(self) -> np.ndarray:
        """The output row of every tile."""
        return piece_rows(self.heavy_rows, len(self.indptr) - 1)

    def to_csr(self) -> sp.csr_matrix:
        row = self.tile_rows()[rows_of(self.indptr)]
        coo = sp.coo_matrix((self.data, (row, self.indices)), shape=self.shape)
        return canonical_csr(coo.tocsr())


def pieces_arrays(xp: Any, indptr: Any, indices: Any, values: Any, shape: tuple[int, int],
                  width: int, min_nnz: int = HEAVY_MIN_NNZ) -> dict[str, Any]:
    """The layout's arrays and counts from CSR arrays where they are (NumPy or CuPy), after
    refusing a non-empty row that is not heavy."""
    rows, cols = shape
    ptr = xp.asarray(indptr, dtype=xp.int64)
    lengths = ptr[1:] - ptr[:-1]
    threshold = heavy_threshold(panel_count(cols, width), min_nnz)
    light = xp.flatnonzero((lengths > 0) & (lengths < threshold))
    if int(light.size):
        row = int(light[0])
        raise LayoutError(
            f"layout pieces:{width}: row {row} has {int(lengths[row])} nonzeros, fewer than a "
            f"heavy row's {threshold}; this layout holds the heavy rows alone "
            "(teaal_loops.split_heavy splits a matrix into its light and heavy rows)")
    built = heavy_arrays(xp, indptr, indices, values, shape, width, min_nnz)
    return {**built, "indptr": built["indptr"][rows:]}  # the rows' tiles are all empty


def build(csr: sp.csr_matrix, **options: Any) -> PiecesLayout:
    """``width``: the panel width (the option after ``pieces:``); ``min_nnz``: the fewest
    nonzeros of a heavy row (default 4096; small matrices in tests)."""
    width = panel_width(options.pop("width", None))
    min_nnz = min_nnz_option(options.pop("min_nnz", HEAVY_MIN_NNZ), "layout pieces")
    no_options("pieces", options, ("width", "min_nnz"))
    built = pieces_arrays(np, csr.indptr, csr.indices, csr.data, csr.shape, width, min_nnz)
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


def _check_width(host: PiecesLayout, option: str | None) -> int:
    width = panel_width(option)
    need(host.width == width, "pieces", f"panels of {host.width} columns, the kernel's {width}")
    return width


def pack(host: PiecesLayout, option: str | None) -> Packed:
    """The kernel's arguments, after checking a host layout (perhaps built by hand) keeps the
    layout's rules: every nonzero lies in its piece's panel, the heavy rows are distinct."""
    width = _check_width(host, option)
    rows, cols = host.shape
    nnz = len(host.indices)
    panels = panel_count(cols, width)
    heavy = np.asarray(host.heavy_rows, dtype=np.int64)
    count = len(heavy)
    check_ptr(host.indptr, panels * count, nnz, "pieces", "tile")
    need(len(host.data) == nnz, "pieces", f"{len(host.data)} values for {nnz} columns")
    need(in_range(host.indices, 0, cols), "pieces", "a column lies outside the matrix")
    need(in_range(heavy, 0, rows) and bool(np.all(np.diff(heavy) > 0)), "pieces",
         "the heavy rows are not distinct rows of the matrix in ascending order")
    if count:
        panel = rows_of(host.tile_ptr()) // count
        need(bool(np.all(np.asarray(host.indices, dtype=np.int64) // width == panel)),
             "pieces", "a heavy row's nonzero lies outside its piece's panel")
    return Packed(
        {"indptr": host.indptr, "indices": host.indices, "values": host.data,
         "heavy_rows": heavy},
        {"heavy": count, "panels": panels},
    )


def entries(host: PiecesLayout, option: str | None) -> Entries:
    _check_width(host, option)
    return Entries(
        atom=np.arange(len(host.indices), dtype=np.int64),
        row=host.tile_rows()[rows_of(host.indptr)],
        col=np.asarray(host.indices, dtype=np.int64),
        val=np.asarray(host.data, dtype=np.float64),
    )


def _option(option: str | None) -> str:
    return str(panel_width(option))


def _template_options(option: str | None) -> dict[str, object]:
    panel_width(option)  # checked; the kernel reads the counts, not the width
    return {}


def _build_options(option: str | None) -> dict[str, Any]:
    return {"width": panel_width(option)}


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
    option=_option,
    template_options=_template_options,
    build_options=_build_options,
)
