"""CSC: rank order ``[K, M]``, K uncompressed, M compressed. Tiles are columns: a tile's
results scatter into many output rows, so every update is an atomicAdd (output zeroed first).
Atoms are the nonzeros in storage order (column by column, rows ascending)."""

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
)
from teaal_loops.layouts.registry import register
from teaal_loops.spec.model import TensorFormat
from teaal_loops.types import KernelParam


@dataclass(frozen=True, eq=False)
class CSCLayout(HostLayout):
    name: ClassVar[str] = "csc"
    indptr: np.ndarray  # cols + 1 offsets
    indices: np.ndarray  # row ids, ascending within a column
    data: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return {"indptr": self.indptr, "indices": self.indices, "data": self.data}

    def tile_ptr(self) -> np.ndarray:
        return np.asarray(self.indptr, dtype=np.int64)

    def to_csr(self) -> sp.csr_matrix:
        csc = sp.csc_matrix((self.data, self.indices, self.indptr), shape=self.shape, copy=True)
        return canonical_csr(csc.tocsr())


def build(csr: sp.csr_matrix, **options: Any) -> CSCLayout:
    no_options("csc", options)
    csc = csr.tocsc()
    csc.sort_indices()
    return CSCLayout(csr.shape, int(csr.nnz), csc.indptr, csc.indices, csc.data)


def pack(csc: CSCLayout, option: str | None) -> Packed:
    rows, cols = csc.shape
    check_ptr(csc.indptr, cols, len(csc.indices), "csc", "column")
    need(in_range(csc.indices, 0, rows), "csc", "a row index lies outside the matrix")
    return Packed({"indptr": csc.indptr, "indices": csc.indices, "values": csc.data}, {})


def entries(csc: CSCLayout, option: str | None) -> Entries:
    indptr = csc.tile_ptr()
    return Entries(
        atom=np.arange(int(indptr[-1]), dtype=np.int64),
        row=np.asarray(csc.indices, dtype=np.int64),
        col=rows_of(indptr),  # the tile (column) of each atom
        val=np.asarray(csc.data, dtype=np.float64),
    )


def matches_format(fmt: TensorFormat, tile: str, atom: str) -> bool:
    """``tile``/``atom`` are the SpMV's row and column ranks: CSC stores ``[atom, tile]``."""
    kinds = {r.rank: r.format for r in fmt.ranks}
    return tuple(fmt.rank_order) == (atom, tile) and (
        kinds.get(atom, "C"), kinds.get(tile, "C")
    ) == ("U", "C")


DEFINITION = register(
    "csc",
    macro_file="layouts/csc.cuh.j2",
    description="compressed sparse columns: ranks [K, M], K uncompressed, M compressed; "
    "tiles are columns, every update an atomicAdd",
    teaal_format="rank-order [K, M]; K: U, M: C",
    tiles="columns",
    scatters=True,
    schedules=("thread_mapped", "work_oriented"),
    forms=("spmv", "spmm"),
    params=(
        KernelParam("rows", "index_t", "number of rows (length of y)"),
        KernelParam("cols", "index_t", "number of columns (tiles)"),
        KernelParam("nnz", "offset_t", "number of stored nonzeros (atoms)"),
        KernelParam("indptr", "const offset_t* __restrict__", "column offsets, cols + 1"),
        KernelParam("indices", "const index_t* __restrict__", "row of each nonzero"),
        KernelParam("values", "const value_t* __restrict__", "value of each nonzero"),
    ),
    build=build,
    pack=pack,
    entries=entries,
    matches_format=matches_format,
)
