"""COO: the flattened, compressed ``(M, K)`` rank, both coordinates stored, sorted row-major.
Tiles are rows, found by binary search over the sorted row array; atoms as in CSR."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from teaal_loops.layouts.contract import Entries, Packed
from teaal_loops.layouts.host import HostLayout, in_range, need, no_options, row_ids
from teaal_loops.layouts.registry import register
from teaal_loops.spec.model import TensorFormat
from teaal_loops.types import KernelParam


@dataclass(frozen=True, eq=False)
class COOLayout(HostLayout):
    name: ClassVar[str] = "coo"
    row: np.ndarray
    col: np.ndarray
    data: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return {"row": self.row, "col": self.col, "data": self.data}

    def tile_ptr(self) -> np.ndarray:
        # Tile t's atoms: the run of row id t in the sorted row array (what the kernel searches).
        row = np.asarray(self.row, dtype=np.int64)
        return np.searchsorted(row, np.arange(self.shape[0] + 1, dtype=np.int64)).astype(np.int64)

    def to_csr(self) -> sp.csr_matrix:
        indptr = np.zeros(self.shape[0] + 1, dtype=self.row.dtype)
        np.cumsum(np.bincount(self.row, minlength=self.shape[0]), out=indptr[1:])
        return sp.csr_matrix((self.data, self.col, indptr), shape=self.shape, copy=True)


def build(csr: sp.csr_matrix, **options: Any) -> COOLayout:
    no_options("coo", options)
    return COOLayout(csr.shape, int(csr.nnz), row_ids(csr), csr.indices.copy(), csr.data.copy())


def pack(coo: COOLayout, option: str | None) -> Packed:
    rows, cols = coo.shape
    need(len(coo.row) == len(coo.col) == len(coo.data), "coo", "row, col, data lengths differ")
    need(bool(np.all(np.diff(coo.row) >= 0)), "coo", "entries are not sorted by row")
    need(in_range(coo.row, 0, rows), "coo", "a row index lies outside the matrix")
    need(in_range(coo.col, 0, cols), "coo", "a column index lies outside the matrix")
    return Packed({"row_ids": coo.row, "col_ids": coo.col, "values": coo.data}, {})


def entries(coo: COOLayout, option: str | None) -> Entries:
    return Entries(
        atom=np.arange(len(coo.row), dtype=np.int64),
        row=np.asarray(coo.row, dtype=np.int64),
        col=np.asarray(coo.col, dtype=np.int64),
        val=np.asarray(coo.data, dtype=np.float64),
    )


def matches_format(fmt: TensorFormat, tile: str, atom: str) -> bool:
    kinds = {r.rank: r.format for r in fmt.ranks}
    order = tuple(fmt.rank_order)
    if order == (tile, atom):
        return (kinds.get(tile, "C"), kinds.get(atom, "C")) == ("C", "C")
    return order == (f"{tile}{atom}",) and kinds.get(f"{tile}{atom}", "C") == "C"


DEFINITION = register(
    "coo",
    macro_file="layouts/coo.cuh.j2",
    description="coordinates: the flattened compressed rank (M, K), sorted row-major; "
    "tiles are rows found by binary search",
    teaal_format="rank-order [M, K]; M: C, K: C (both coordinates stored)",
    tiles="rows (found by binary search)",
    schedules=("thread_mapped", "work_oriented"),
    forms=("spmv", "spmm", "sddmm"),
    params=(
        KernelParam("rows", "index_t", "number of rows (tiles)"),
        KernelParam("cols", "index_t", "number of columns (length of x)"),
        KernelParam("nnz", "offset_t", "number of stored nonzeros (atoms)"),
        KernelParam("row_ids", "const index_t* __restrict__", "row of each nonzero (sorted)"),
        KernelParam("col_ids", "const index_t* __restrict__", "column of each nonzero"),
        KernelParam("values", "const value_t* __restrict__", "value of each nonzero"),
    ),
    build=build,
    pack=pack,
    entries=entries,
    matches_format=matches_format,
)
