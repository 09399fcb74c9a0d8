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
    min_nnz_option,
    panel_count,
    piece_rows,
)
from teaal_loops.types import KernelParam


def panel_width(option: Any) -> int:
    """The one reading of a panel width: ``"1024"`` or ``1024`` -> 1024; None or ``""`` ->
    :data:`DEFAULT_WIDTH`."""
    return whole_number_option(option, "heavy", key="width",
                               meaning="the panel width in columns", example=1024,
                               default=DEFAULT_WIDTH, bounds=(MIN_WIDTH, MAX_WIDTH))


@dataclass(frozen=True, eq=False)
class HeavyLayout(HostLayout):
    name: ClassVar[str] = "heavy"
    width: int
    heavy_rows: np.ndarray  # the heavy rows, ascending (the kernel's bit mask is made from them)
    indptr: np.ndarray  # rows + P * H + 1 tile offsets
    indices: np.ndarray  # global column of each nonzero
    data: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return {"indptr": self.indptr, "indices": self.indices, "data": self.data,
                "heavy_rows": self.heavy_rows}

    def tile_ptr(self) -> np.ndarray:
        return np.asarray(self.indptr, dtype=np.int64)

    def tile_rows(self) -> np.ndarray:
        """The output row of every tile."""
        rows = self.shape[0]
        pieces = piece_rows(self.heavy_rows, len(self.indptr) - 1 - rows)
        return np.concatenate([np.arange(rows, dtype=np.int64), pieces])

    def to_csr(self) -> sp.csr_matrix:
        row = self.tile_rows()[rows_of(self.indptr)]
        coo = sp.coo_matrix((self.data, (row, self.indices)), shape=self.shape)
        return canonical_csr(coo.tocsr())


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


def _check_width(host: HeavyLayout, option: str | None) -> int:
    """The panel width the layout name asks for, which a host layout built by the user must
    have."""
    width = panel_width(option)
    need(host.width == width, "heavy", f"panels of {host.width} columns, the kernel's {width}")
    return width


def pack(host: HeavyLayout, option: str | None) -> Packed:
    """The kernel's arguments, after checking a host layout (perhaps built by hand) keeps the
    layout's rules: every output row is reached exactly as its tiles say."""
    width = _check_width(host, option)
    rows, cols = host.shape
    nnz = len(host.indices)
    panels = panel_count(cols, width)
    heavy = np.asarray(host.heavy_rows, dtype=np.int64)
    count = len(heavy)
    check_ptr(host.indptr, rows + panels * count, nnz, "heavy", "tile")
    need(len(host.data) == nnz, "heavy", f"{len(host.data)} values for {nnz} columns")
    need(in_range(host.indices, 0, cols), "heavy", "a column lies outside the matrix")
    need(in_range(heavy, 0, rows) and bool(np.all(np.diff(heavy) > 0)), "heavy",
         "the heavy rows are not distinct rows of the matrix in ascending order")
    flags = np.zeros(rows, dtype=bool)
    flags[heavy] = True
    ptr = host.tile_ptr()
    need(not np.any(np.diff(ptr[: rows + 1])[flags]), "heavy", "a heavy row has a light tile")
    if count:
        tile = rows_of(ptr)
        pieces = tile >= rows
        panel = (tile[pieces] - rows) // count
        need(bool(np.all(np.asarray(host.indices, dtype=np.int64)[pieces] // width == panel)),
             "heavy", "a heavy row's nonzero lies outside its piece's panel")
    return Packed(
        {"indptr": host.indptr, "indices": host.indices, "values": host.data,
         "heavy_rows": heavy, "heavy_mask": mask_words(np, flags)},
        {"heavy": count, "panels": panels},
    )


def entries(host: HeavyLayout, option: str | None) -> Entries:
    _check_width(host, option)
    return Entries(
        atom=np.arange(len(host.indices), dtype=np.int64),
        row=host.tile_rows()[rows_of(host.indptr)],
        col=np.asarray(host.indices, dtype=np.int64),
        val=np.asarray(host.data, dtype=np.float64),
    )


def first_piece(host: HeavyLayout) -> int:
    """The first tile that adds into its row rather than stores it: the heavy rows' pieces
    follow the rows."""
    return int(host.shape[0])


def _option(option: str | None) -> str:
    return str(panel_width(option))


def _template_options(option: str | None) -> dict[str, object]:
    panel_width(option)  # checked; the kernel reads the counts, not the width
    return {}


def _build_options(option: str | None) -> dict[str, Any]:
    return {"width": panel_width(option)}


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
    option=_option,
    template_options=_template_options,
    build_options=_build_options,
)
