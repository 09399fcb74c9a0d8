"""Column panels: ``[K1, M, K0]``, K cut into P panels of ``ceil(cols / P)`` columns
(``panels:P``; plain ``panels`` is 2), each panel stored as CSR over all the rows.

Tile ``p * rows + m`` holds row m's nonzeros in panel p (columns kept global, ascending), so
the tiles are the output rows stacked P times and tile t adds into row ``t mod rows``. Every
schedule runs on it as on CSR; a tile's sum is added atomically into ``y``, zeroed before
the launch (the layout is ``stacked``).

Why: a launch runs its blocks roughly in index order, so at any moment nearly all of them
gather from one panel's slice of x, 1/P of it. When x is larger than the part of the L2 that
random gathers hit at full rate, that slice stays resident where the whole of x would not
(BENCHMARKS.md: uniform float64 with x of 64 MiB, merge-path over three panels, 2.04x the best
cuSPARSE on an H100). Where x already fits, the extra atomics and row passes only cost.
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
from teaal_loops.matrix.rowwise import entry_rows, offsets
from teaal_loops.spec.model import TensorFormat
from teaal_loops.types import KernelParam

DEFAULT_PANELS = 2
MAX_PANELS = 64  # a tile's row is found by at most P - 1 subtractions


def panel_count(option: Any) -> int:
    """The one reading of a panel count: ``"3"`` or ``3`` -> 3; None or ``""`` -> 2."""
    return whole_number_option(option, "panels", key="panels",
                               meaning="the number of column panels", example=3,
                               default=DEFAULT_PANELS, bounds=(1, MAX_PANELS))


def panel_width(cols: int, panels: int) -> int:
    """Columns a panel holds (the last may hold fewer); at least 1."""
    return max(-(-cols // panels), 1)


@dataclass(frozen=True, eq=False)
class PanelsLayout(HostLayout):
    name: ClassVar[str] = "panels"
    panels: int
    indptr: np.ndarray  # panels * rows + 1 offsets: tile p * rows + m is row m in panel p
    indices: np.ndarray  # global column of each nonzero, ascending within a tile
    data: np.ndarray

    @property
    def width(self) -> int:
        return panel_width(self.shape[1], self.panels)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"indptr": self.indptr, "indices": self.indices, "data": self.data}

    def tile_ptr(self) -> np.ndarray:
        return np.asarray(self.indptr, dtype=np.int64)

    def to_csr(self) -> sp.csr_matrix:
        rows = self.shape[0]
        row = rows_of(self.indptr) % max(rows, 1)
        coo = sp.coo_matrix((self.data, (row, self.indices)), shape=self.shape)
        return canonical_csr(coo.tocsr())


def build(csr: sp.csr_matrix, **options: Any) -> PanelsLayout:
    panels = panel_count(options.pop("panels", None))
    no_options("panels", options, ("panels",))
    built = panel_arrays(np, csr.indptr, csr.indices, csr.data, csr.shape, panels)
    index = signed_index(csr.indices.dtype)
    return PanelsLayout(csr.shape, int(csr.nnz), panels, built["indptr"].astype(index),
                        built["indices"].astype(index), built["values"])


def panel_arrays(
    xp: Any, indptr: Any, indices: Any, values: Any, shape: tuple[int, int], panels: int
) -> dict[str, Any]:
    """The layout's arrays from CSR arrays where they are (``xp``: NumPy on the host, CuPy on
    the GPU, so a device matrix never travels to the host). CSR storage is row-major, so a
    stable sort by panel alone leaves each panel's nonzeros in row order, each row's in their
    CSR order (sorted or not); a one-byte key sorts by radix in linear time."""
    rows, cols = shape
    nnz = int(indices.size)
    panel = (xp.asarray(indices, dtype=xp.int64) // panel_width(cols, panels)).astype(
        xp.uint8 if panels <= 255 else xp.uint16)
    order = xp.argsort(panel, kind="stable")
    row = entry_rows(xp, xp.asarray(indptr, dtype=xp.int64), 0, nnz)
    tiles = xp.bincount(panel.astype(xp.int64) * rows + row, minlength=panels * rows)
    return {"indptr": offsets(xp, tiles), "indices": indices[order], "values": values[order]}


def device_arrays(
    xp: Any, indptr: Any, indices: Any, values: Any, shape: tuple[int, int], option: str | None
) -> dict[str, Any]:
    """:func:`panel_arrays` for the panel count a layout name's option gives (the device
    builder)."""
    return panel_arrays(xp, indptr, indices, values, shape, panel_count(option))


def _check_panels(host: PanelsLayout, option: str | None) -> int:
    """The panel count the layout name asks for, which a host layout built by the user must
    have."""
    panels = panel_count(option)
    need(host.panels == panels, "panels", f"{host.panels} panels, the kernel's {panels}")
    return panels


def pack(host: PanelsLayout, option: str | None) -> Packed:
    panels = _check_panels(host, option)
    rows, cols = host.shape
    nnz = len(host.indices)
    check_ptr(host.indptr, panels * rows, nnz, "panels", "tile")
    need(len(host.data) == nnz, "panels", f"{len(host.data)} values for {nnz} columns")
    need(in_range(host.indices, 0, cols), "panels", "a column lies outside the matrix")
    tile = rows_of(host.indptr)
    panel_of_column = np.asarray(host.indices, dtype=np.int64) // host.width
    need(bool(np.all(tile // max(rows, 1) == panel_of_column)), "panels",
         "a nonzero lies outside its tile's panel")
    return Packed({"indptr": host.indptr, "indices": host.indices, "values": host.data}, {})


def entries(host: PanelsLayout, option: str | None) -> Entries:
    _check_panels(host, option)
    rows = host.shape[0]
    return Entries(
        atom=np.arange(len(host.indices), dtype=np.int64),
        row=rows_of(host.indptr) % max(rows, 1),
        col=np.asarray(host.indices, dtype=np.int64),
        val=np.asarray(host.data, dtype=np.float64),
    )


def _option(option: str | None) -> str:
    return str(panel_count(option))


def _template_options(option: str | None) -> dict[str, object]:
    return {"P": panel_count(option)}


def _build_options(option: str | None) -> dict[str, Any]:
    return {"panels": panel_count(option)}


def matches_format(fmt: TensorFormat, tile: str, atom: str) -> bool:
    kinds = {r.rank: r.format for r in fmt.ranks}
    order = (f"{atom}1", tile, f"{atom}0")
    return tuple(fmt.rank_order) == order and tuple(kinds.get(r, "C") for r in order) == (
        "U", "U", "C"
    )


DEFINITION = register(
    "panels",
    macro_file="layouts/panels.cuh.j2",
    description="column panels: ranks [K1, M, K0], K cut into P panels, each CSR over all the "
    "rows; tiles are the rows of each panel (P * rows), atoms their nonzeros",
    teaal_format="rank-order [K1, M, K0]; K1: U, M: U, K0: C (the panel count from the "
    "format's name, e.g. PANELS_3; default 2)",
    tiles="rows of column panels",
    schedules=("thread_mapped", "group_mapped", "work_oriented", "merge_path"),
    forms=("spmv",),
    stacked=True,
    atoms_are_nonzeros=True,
    params=(
        KernelParam("rows", "index_t", "number of rows (length of y)"),
        KernelParam("cols", "index_t", "number of columns (length of x)"),
        KernelParam("nnz", "offset_t", "number of stored nonzeros (atoms)"),
        KernelParam("indptr", "const offset_t* __restrict__",
                    "tile offsets, P * rows + 1: tile p * rows + m is row m in panel p"),
        KernelParam("indices", "const index_t* __restrict__", "column of each nonzero"),
        KernelParam("values", "const value_t* __restrict__", "value of each nonzero"),
    ),
    build=build,
    pack=pack,
    entries=entries,
    device_build=device_arrays,
    option=_option,
    template_options=_template_options,
    build_options=_build_options,
    matches_format=matches_format,
)
