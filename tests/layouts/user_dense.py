"""A user-defined layout, written the way docs/layouts.md tells a user to: dense row-major
storage (tiles are rows, atoms are all rows x cols cells). Nothing here lives in the package;
:func:`install` registers it at run time from this file and a macro file written to a folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from teaal_loops import layouts
from teaal_loops.layouts import Entries, HostLayout

NAME = "dense_rows"
MACRO_FILE = "layouts/dense_rows.cuh.j2"
MACROS = """\
{% macro definitions() %}
// ---- Layout: dense rows (user-defined) ----
struct Layout {
  index_t rows;
  index_t cols;
  offset_t nnz;  // atoms: rows * cols cells
  const value_t* __restrict__ values;

  __device__ __forceinline__ index_t num_tiles() const { return rows; }
  __device__ __forceinline__ offset_t num_atoms() const { return nnz; }
  __device__ __forceinline__ offset_t tile_begin(offset_t t) const { return t * cols; }
  __device__ __forceinline__ offset_t tile_end(offset_t t) const { return (t + 1) * cols; }
  __device__ __forceinline__ offset_t tile_size(offset_t t) const { (void)t; return cols; }
  __device__ __forceinline__ offset_t tile_of(offset_t a) const { return a / cols; }
  __device__ __forceinline__ value_t atom_product(offset_t t, offset_t a,
                                                  XVec x) const {
    return __ldg(values + a) * __ldg(x + (a - t * cols));
  }
  typedef value_t Acc;
  __device__ __forceinline__ Acc acc_zero() const { return 0; }
  __device__ __forceinline__ void accumulate(Acc& acc, offset_t t, offset_t a,
                                             XVec x,
                                             YVec y) const {
    (void)y;
    acc += atom_product(t, a, x);
  }
  __device__ __forceinline__ void store_tile(YVec y, offset_t t,
                                             const Acc& acc) const { y[t] = acc; }
  __device__ __forceinline__ void atomic_tile(YVec y, offset_t t,
                                              const Acc& acc) const { atomicAdd(y + t, acc); }
};
{% endmacro %}

{% macro construct(name) %}const Layout {{ name }}{rows, cols, nnz, values};{% endmacro %}
"""


@dataclass(frozen=True, eq=False)
class DenseRows(HostLayout):
    name: ClassVar[str] = NAME
    values: np.ndarray[Any, Any]  # rows * cols, row-major

    def arrays(self) -> dict[str, np.ndarray[Any, Any]]:
        return {"values": self.values}

    @property
    def stored(self) -> int:
        return int(self.values.size)

    def tile_ptr(self) -> np.ndarray[Any, Any]:
        rows, cols = self.shape
        return np.arange(rows + 1, dtype=np.int64) * cols

    def to_csr(self) -> sp.csr_matrix:
        return sp.csr_matrix(self.values.reshape(self.shape))


def build(csr: sp.csr_matrix, **options: Any) -> DenseRows:
    return DenseRows(csr.shape, int(csr.nnz), np.asarray(csr.toarray()).ravel())


def pack(host: DenseRows, option: str | None) -> layouts.Packed:
    rows, cols = host.shape
    return layouts.Packed({"values": host.values}, {"nnz": rows * cols})


def entries(host: DenseRows, option: str | None) -> Entries:
    rows, cols = host.shape
    atoms = np.arange(rows * cols, dtype=np.int64)
    return Entries(
        atom=atoms,
        row=atoms // max(cols, 1),
        col=atoms % max(cols, 1),
        val=np.asarray(host.values, dtype=np.float64),
    )


def install(folder: Path) -> None:
    (folder / "layouts").mkdir(parents=True, exist_ok=True)
    (folder / MACRO_FILE).write_text(MACROS)
    layouts.register(
        NAME,
        macro_file=MACRO_FILE,
        template_dir=folder,
        params=(
            layouts.KernelParam("rows", "index_t", "number of rows (tiles)"),
            layouts.KernelParam("cols", "index_t", "number of columns"),
            layouts.KernelParam("nnz", "offset_t", "atoms: rows x cols cells"),
            layouts.KernelParam("values", "const value_t* __restrict__", "row-major values"),
        ),
        build=build,
        pack=pack,
        entries=entries,
        schedules=("thread_mapped", "group_mapped", "work_oriented", "merge_path"),
        forms=("spmv", "spmm"),
        description="dense row-major storage (a user-defined layout)",
    )
