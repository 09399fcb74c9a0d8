"""DIA: one dense row-indexed array per stored diagonal.

``offsets`` (``col - row``, ascending) and ``data`` of shape ``(ndiag, rows)`` with
``data[d, r] = A[r, r + offsets[d]]``, 0 where that column lies outside the matrix. Tiles are
rows; atoms are (row, diagonal) slots numbered ``a = r * ndiag + d`` (stored at
``d * rows + r``); a slot outside the matrix is padding.
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
    check_padding,
    in_range,
    need,
    no_options,
    padding_limit,
    row_ids,
    signed_index,
    uniform_ptr,
)
from teaal_loops.layouts.registry import register
from teaal_loops.types import KernelParam


@dataclass(frozen=True, eq=False)
class DIALayout(HostLayout):
    name: ClassVar[str] = "dia"
    offsets: np.ndarray  # col - row of every stored diagonal, ascending
    data: np.ndarray  # (ndiag, rows): data[d, r] = A[r, r + offsets[d]]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"offsets": self.offsets, "data": self.data}

    def tile_ptr(self) -> np.ndarray:
        return uniform_ptr(self.shape[0], len(self.offsets))

    @property
    def stored(self) -> int:
        return int(self.data.size)

    def to_csr(self) -> sp.csr_matrix:
        rows, cols = self.shape
        r = np.broadcast_to(np.arange(rows), self.data.shape)
        c = r + self.offsets[:, None]
        keep = (self.data != 0) & (c >= 0) & (c < cols)
        coo = sp.coo_matrix((self.data[keep], (r[keep], c[keep])), shape=self.shape)
        return canonical_csr(coo.tocsr())


def build(csr: sp.csr_matrix, **options: Any) -> DIALayout:
    limit = padding_limit(options)
    no_options("dia", options, ("padding_limit",))
    rows = csr.shape[0]
    row = row_ids(csr).astype(np.int64)
    diagonal = csr.indices.astype(np.int64) - row
    offsets = np.unique(diagonal)
    index = signed_index(csr.indices.dtype)
    check_padding("dia", len(offsets) * (rows * csr.data.itemsize + index.itemsize), csr, limit)
    data = np.zeros((len(offsets), rows), dtype=csr.data.dtype)
    data[np.searchsorted(offsets, diagonal), row] = csr.data
    return DIALayout(csr.shape, int(csr.nnz), offsets.astype(index), data)


def pack(dia: DIALayout, option: str | None) -> Packed:
    rows, cols = dia.shape
    ndiag = len(dia.offsets)
    need(dia.data.shape == (ndiag, rows), "dia", f"data has shape {dia.data.shape}")
    need(bool(np.all(np.diff(dia.offsets) > 0)), "dia", "offsets are not ascending")
    need(in_range(dia.offsets, -rows, cols), "dia", "a diagonal lies outside the matrix")
    scalars = {"ndiag": ndiag, "nnz": rows * ndiag}
    return Packed({"offsets": dia.offsets, "values": dia.data.ravel()}, scalars)


def entries(dia: DIALayout, option: str | None) -> Entries:
    rows, cols = dia.shape
    offsets = np.asarray(dia.offsets, dtype=np.int64)
    ndiag = len(offsets)
    data = np.asarray(dia.data, dtype=np.float64).reshape(ndiag, rows)
    r = np.repeat(np.arange(rows, dtype=np.int64), ndiag)  # atom order: row-major
    d = np.tile(np.arange(ndiag, dtype=np.int64), rows)
    c = r + offsets[d]
    inside = (c >= 0) & (c < cols)
    value = np.zeros(len(r))
    value[inside] = data[d[inside], r[inside]]
    # DIA keeps no record of which zeros were stored: its entries are its nonzero cells.
    keep = np.flatnonzero(inside & (value != 0))
    return Entries(atom=keep.astype(np.int64), row=r[keep], col=c[keep], val=value[keep])


DEFINITION = register(
    "dia",
    macro_file="layouts/dia.cuh.j2",
    description="diagonals: ndiag stored diagonals, each a dense array over rows; tiles "
    "are rows, atoms are (row, diagonal) slots",
    teaal_format="a format named DIA",
    tiles="rows (by diagonal)",
    schedules=("thread_mapped", "work_oriented", "merge_path"),
    forms=("spmv", "spmm"),
    params=(
        KernelParam("rows", "index_t", "number of rows (tiles)"),
        KernelParam("cols", "index_t", "number of columns (length of x)"),
        KernelParam("ndiag", "offset_t", "number of stored diagonals"),
        KernelParam("nnz", "offset_t", "atoms: rows x ndiag slots, out-of-matrix ones too"),
        KernelParam("offsets", "const index_t* __restrict__",
                    "col - row of each diagonal, ascending"),
        KernelParam("values", "const value_t* __restrict__",
                    "A[r, r + offsets[d]] at d * rows + r (0 outside the matrix)"),
    ),
    build=build,
    pack=pack,
    entries=entries,
)
