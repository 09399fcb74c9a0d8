"""CSR: rank order ``[M, K]``, M uncompressed, K compressed. Tiles are rows, atoms their
nonzeros in storage order; every schedule runs on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from teaal_loops.layouts.contract import Entries, Packed
from teaal_loops.layouts.host import HostLayout, no_options, rows_of
from teaal_loops.layouts.registry import register
from teaal_loops.spec.model import TensorFormat
from teaal_loops.types import KernelParam


@dataclass(frozen=True, eq=False)
class CSRLayout(HostLayout):
    name: ClassVar[str] = "csr"
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return {"indptr": self.indptr, "indices": self.indices, "data": self.data}

    def tile_ptr(self) -> np.ndarray:
        return np.asarray(self.indptr, dtype=np.int64)

    def to_csr(self) -> sp.csr_matrix:
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape, copy=True)


def build(csr: sp.csr_matrix, **options: Any) -> CSRLayout:
    no_options("csr", options)
    return CSRLayout(csr.shape, int(csr.nnz), csr.indptr, csr.indices, csr.data)


def pack(host: CSRLayout, option: str | None) -> Packed:
    return Packed({"indptr": host.indptr, "indices": host.indices, "values": host.data}, {})


def entries(host: CSRLayout, option: str | None) -> Entries:
    indptr = host.tile_ptr()
    return Entries(
        atom=np.arange(int(indptr[-1]), dtype=np.int64),
        row=rows_of(indptr),
        col=np.asarray(host.indices, dtype=np.int64),
        val=np.asarray(host.data, dtype=np.float64),
    )


def matches_format(fmt: TensorFormat, tile: str, atom: str) -> bool:
    kinds = {r.rank: r.format for r in fmt.ranks}
    return tuple(fmt.rank_order) == (tile, atom) and (
        kinds.get(tile, "C"), kinds.get(atom, "C")  # TeAAL's default per-rank format is C
    ) == ("U", "C")


DEFINITION = register(
    "csr",
    macro_file="layouts/csr.cuh.j2",
    description="compressed sparse rows: ranks [M, K], M uncompressed, K compressed",
    teaal_format="rank-order [M, K]; M: U, K: C",
    tiles="rows",
    schedules=("thread_mapped", "group_mapped", "work_oriented", "merge_path"),
    forms=("spmv", "spmm", "sddmm"),
    params=(
        KernelParam("rows", "index_t", "number of rows (tiles)"),
        KernelParam("cols", "index_t", "number of columns (length of x)"),
        KernelParam("nnz", "offset_t", "number of stored nonzeros (atoms)"),
        KernelParam("indptr", "const offset_t* __restrict__", "row offsets, rows + 1"),
        KernelParam("indices", "const index_t* __restrict__", "column of each nonzero"),
        KernelParam("values", "const value_t* __restrict__", "value of each nonzero"),
    ),
    build=build,
    pack=pack,
    entries=entries,
    matches_format=matches_format,
    direct_csr=True,
)
