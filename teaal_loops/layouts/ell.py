"""ELL (ELLPACK): ``[M, K]`` with every row padded to the longest (``width`` slots).

``columns`` / ``values`` are flat arrays in slot-major order by default: slot ``s`` of row ``r``
sits at ``s * rows + r`` so that consecutive threads (rows) read consecutive addresses;
``order="row"`` gives ``r * width + s``. Padding: column ``-1``, value ``0``. Tiles are rows and
atoms are slots, numbered row-major (``a = r * width + s``) whatever the storage order.
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
class ELLLayout(HostLayout):
    name: ClassVar[str] = "ell"
    width: int
    order: str  # "col": slot * rows + row (default); "row": row * width + slot
    columns: np.ndarray  # flat, -1 marks padding
    values: np.ndarray  # flat, 0 in padding

    def arrays(self) -> dict[str, np.ndarray]:
        return {"columns": self.columns, "values": self.values}

    def tile_ptr(self) -> np.ndarray:
        return uniform_ptr(self.shape[0], int(self.width))

    @property
    def stored(self) -> int:
        return self.shape[0] * self.width

    def grid(self, array: np.ndarray) -> np.ndarray:
        """A flat ``columns`` / ``values`` array viewed as ``(rows, width)``."""
        rows = self.shape[0]
        if self.order == "col":
            return array.reshape(self.width, rows).T
        return array.reshape(rows, self.width)

    def to_csr(self) -> sp.csr_matrix:
        columns, values = self.grid(self.columns), self.grid(self.values)
        present = columns >= 0  # row-major traversal keeps each row's columns in order
        lengths = present.sum(axis=1)
        indptr = np.zeros(self.shape[0] + 1, dtype=self.columns.dtype)
        np.cumsum(lengths, out=indptr[1:])
        return sp.csr_matrix(
            (values[present], columns[present], indptr), shape=self.shape, copy=True
        )


def build(csr: sp.csr_matrix, **options: Any) -> ELLLayout:
    limit = padding_limit(options)
    order = options.pop("order", "col")
    no_options("ell", options, ("order", "padding_limit"))
    if order not in ("col", "row"):
        raise LayoutError(f"layout ell: order={order!r} (expected 'col' or 'row')")
    rows = csr.shape[0]
    lengths = np.diff(csr.indptr)
    width = int(lengths.max()) if rows and csr.nnz else 0
    index = signed_index(csr.indices.dtype)
    check_padding("ell", rows * width * (index.itemsize + csr.data.itemsize), csr, limit)
    slot = np.arange(csr.nnz, dtype=np.int64) - np.repeat(csr.indptr[:-1].astype(np.int64), lengths)
    row = row_ids(csr).astype(np.int64)
    flat = slot * rows + row if order == "col" else row * width + slot
    columns = np.full(rows * width, -1, dtype=index)
    values = np.zeros(rows * width, dtype=csr.data.dtype)
    columns[flat] = csr.indices
    values[flat] = csr.data
    return ELLLayout(csr.shape, int(csr.nnz), width, order, columns, values)


def pack(ell: ELLLayout, option: str | None) -> Packed:
    rows, cols = ell.shape
    width = int(ell.width)
    need(len(ell.columns) == rows * width == len(ell.values), "ell", "arrays are not rows*width")
    columns = ell.columns if ell.order == "col" else ell.grid(ell.columns).T.ravel()
    values = ell.values if ell.order == "col" else ell.grid(ell.values).T.ravel()
    need(in_range(columns, -1, cols), "ell", "a column index lies outside the matrix")
    return Packed({"columns": columns, "values": values}, {"width": width, "nnz": rows * width})


def entries(ell: ELLLayout, option: str | None) -> Entries:
    width = int(ell.width)
    columns = np.asarray(ell.grid(ell.columns), dtype=np.int64)  # (rows, width)
    values = np.asarray(ell.grid(ell.values), dtype=np.float64)
    r, s = np.nonzero(columns >= 0)  # row-major: atoms ascending
    return Entries(atom=r * width + s, row=r.astype(np.int64), col=columns[r, s], val=values[r, s])


DEFINITION = register(
    "ell",
    macro_file="layouts/ell.cuh.j2",
    description="ELLPACK: every row padded to width slots, stored slot-major; tiles are "
    "rows, atoms are slots (padding contributes 0)",
    teaal_format="a format named ELL; rank-order [M, K]",
    tiles="rows (padded to the longest)",
    schedules=("thread_mapped", "work_oriented", "merge_path"),
    forms=("spmv", "spmm"),
    params=(
        KernelParam("rows", "index_t", "number of rows (tiles)"),
        KernelParam("cols", "index_t", "number of columns (length of x)"),
        KernelParam("width", "offset_t", "slots per row (the longest row)"),
        KernelParam("nnz", "offset_t", "atoms: rows x width slots, padding included"),
        KernelParam("columns", "const index_t* __restrict__",
                    "column of slot s of row r at s * rows + r; -1 marks padding"),
        KernelParam("values", "const value_t* __restrict__",
                    "value of slot s of row r at s * rows + r; 0 in padding"),
    ),
    build=build,
    pack=pack,
    entries=entries,
)
