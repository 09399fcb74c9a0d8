"""Tile views: a layout seen the way every schedule sees it.

A schedule only needs the layout contract (DESIGN §4): how many tiles, where each tile's atoms
begin and end (``tile_ptr``), and what each atom contributes. A :class:`TileView` gives exactly
that for one matrix in one layout, so the CPU simulation runs every schedule on every layout
without knowing the layout. ``entries`` expand atoms into (output row, column, value) triples.
:attr:`TileView.shape` is what a schedule binds to (tiles as ``rows``, atoms as ``nnz``).

Layouts
=======

Every layout names its *tiles* (what the tile rank of the schedule enumerates: rows, columns or
block rows) and its *atoms* (the units a tile holds, numbered ``0 .. num_atoms - 1`` so that the
atoms of tile ``t`` are the contiguous range ``tile_ptr[t] .. tile_ptr[t+1] - 1``). Ownership is
defined on atoms: every rule of IR_SEMANTICS.md (thread-mapped, group-mapped, work-oriented,
merge-path) applies unchanged with "row" read as "tile" and "nonzero" as "atom", the tile count
in place of ``rows`` and the atom count in place of ``nnz`` (in binding too: a schedule is bound
to ``TileView.shape``). The trace build writes ``owner[a]`` for every atom ``a`` it processes,
padding atoms included, so the owner array has ``num_atoms`` entries in this atom order.

========  ==============  ======================================  ==========================
layout    tiles           atoms (numbering)                       entries of an atom
========  ==============  ======================================  ==========================
``csr``   rows            stored nonzeros, CSR storage order      the nonzero itself
``coo``   rows            stored nonzeros, COO storage order      the nonzero itself
                          (sorted row-major: the same as CSR)
``csc``   columns         stored nonzeros, CSC storage order      the nonzero; it adds to
                          (column by column, rows ascending)      row ``indices[a]``
``ell``   rows            slots: ``a = r * width + s`` is slot    the slot's nonzero; none
                          ``s`` of row ``r`` (row-major numbering  for a padding slot
                          of slot-major storage ``s * rows + r``)
``dia``   rows            ``a = r * ndiag + d``: diagonal ``d``   ``(r, r + offsets[d])``
                          of row ``r`` (stored at ``d * rows + r``) when inside the matrix and
                                                                  nonzero; else none
``bcsr``  block rows      stored R x C blocks, storage order      each nonzero cell of the
          (``ceil(rows/R)``)                                      block inside the matrix
========  ==============  ======================================  ==========================

Combining per layout. Row layouts (csr, coo, ell, dia) combine exactly as CSR does: the owner
of a whole tile stores ``y[row]``, a tile split across threads adds one atomic partial sum per
thread. ``bcsr`` does the same for each of a block row's R output rows (a split block row gets
R atomics from each thread holding part of it; a whole one R plain stores, rows past the end of
the matrix skipped). ``csc`` scatters: every atom is one ``atomicAdd`` into ``y[row]`` whatever
the schedule, so its combine is ATOMIC and y is zeroed before launch. Padding (ell slots with
column -1, dia slots outside the matrix) is owned and traced like any atom but contributes
exactly 0 and never reads ``x``. BCSR and DIA keep no record of which zeros were stored, so
their entries are their nonzero cells; ELL, like CSR/CSC/COO, keeps explicitly stored zeros.

Schedules per layout (:mod:`teaal_loops.ir.layouts` is the registry): thread-mapped and
work-oriented on all six; merge-path on csr, ell and dia; group-mapped on csr.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from teaal_loops.errors import LayoutError
from teaal_loops.ir.model import MatrixShape

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class TileView:
    tile_ptr: IntArray  # atoms of tile t are tile_ptr[t] .. tile_ptr[t+1]-1 (storage order)
    entry_atom: IntArray  # the atom each entry belongs to
    entry_row: IntArray  # output row the entry adds to
    entry_col: IntArray  # column of x it reads
    entry_val: npt.NDArray[np.float64]
    rows: int
    cols: int
    scatter: bool  # tiles are not output rows (column-major layouts)

    @property
    def num_tiles(self) -> int:
        return len(self.tile_ptr) - 1

    @property
    def num_atoms(self) -> int:
        return int(self.tile_ptr[-1])

    @property
    def shape(self) -> MatrixShape:
        """What a schedule binds to: tiles as ``rows``, atoms as ``nnz``, the longest tile."""
        sizes = np.diff(self.tile_ptr)
        return MatrixShape(
            rows=self.num_tiles,
            cols=self.cols,
            nnz=self.num_atoms,
            max_row=int(sizes.max()) if len(sizes) else 0,
        )


TileViewBuilder = Callable[[Any, "str | None"], TileView]  # (matrix, layout option)
_BUILDERS: dict[str, TileViewBuilder] = {}


def register_tile_view(name: str, builder: TileViewBuilder) -> None:
    """``builder(A, option)`` returns the :class:`TileView` of ``A`` in layout ``name``."""
    _BUILDERS[name.lower()] = builder


def tile_view(layout: str, A: Any) -> TileView:
    """The tile view of matrix ``A`` in ``layout``: ``A`` is anything ``matrix.as_csr`` takes,
    or an already-built host layout of that name (``matrix.layouts.convert(...)``)."""
    base = layout.split(":", 1)[0].strip().lower()
    builder = _BUILDERS.get(base)
    if builder is None:
        raise LayoutError(
            f"the CPU simulation has no tile view for layout {layout!r}; it has: "
            f"{', '.join(sorted(_BUILDERS))}"
        )
    option = layout.split(":", 1)[1].strip() if ":" in layout else None
    return builder(A, option or None)


def schedule_shape(layout: str, A: Any) -> MatrixShape:
    """The shape to bind a schedule to for ``A`` in ``layout`` (tiles, atoms)."""
    return tile_view(layout, A).shape


def host_layout(A: Any, name: str, **options: Any) -> Any:
    """``A`` in host layout ``name``: ``A`` itself when it already is one (built by the user,
    e.g. with ``padding_limit=None``), else ``matrix.layouts.convert(A, name, **options)``,
    which refuses padded layouts over the documented limit."""
    from teaal_loops.matrix import layouts as host

    if getattr(A, "name", None) == name and hasattr(A, "arrays") and hasattr(A, "shape"):
        return A
    return host.convert(A, name, **options)


def _rows_of(indptr: npt.NDArray[Any]) -> IntArray:
    return np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr).astype(np.int64))


def _row_major(A: Any, option: str | None = None) -> TileView:
    csr = host_layout(A, "csr")
    indptr = np.asarray(csr.indptr, dtype=np.int64)
    return TileView(
        tile_ptr=indptr,
        entry_atom=np.arange(int(indptr[-1]), dtype=np.int64),
        entry_row=_rows_of(indptr),
        entry_col=np.asarray(csr.indices, dtype=np.int64),
        entry_val=np.asarray(csr.data, dtype=np.float64),
        rows=csr.shape[0],
        cols=csr.shape[1],
        scatter=False,
    )


def _coo(A: Any, option: str | None = None) -> TileView:
    coo = host_layout(A, "coo")
    rows = coo.shape[0]
    row = np.asarray(coo.row, dtype=np.int64)
    # Tile t's atoms: the run of row id t in the sorted row array (what the kernel searches).
    tile_ptr = np.searchsorted(row, np.arange(rows + 1, dtype=np.int64)).astype(np.int64)
    return TileView(
        tile_ptr=tile_ptr,
        entry_atom=np.arange(len(row), dtype=np.int64),
        entry_row=row,
        entry_col=np.asarray(coo.col, dtype=np.int64),
        entry_val=np.asarray(coo.data, dtype=np.float64),
        rows=rows,
        cols=coo.shape[1],
        scatter=False,
    )


def _column_major(A: Any, option: str | None = None) -> TileView:
    csc = host_layout(A, "csc")
    indptr = np.asarray(csc.indptr, dtype=np.int64)
    return TileView(
        tile_ptr=indptr,
        entry_atom=np.arange(int(indptr[-1]), dtype=np.int64),
        entry_row=np.asarray(csc.indices, dtype=np.int64),
        entry_col=_rows_of(indptr),  # the tile (column) of each atom
        entry_val=np.asarray(csc.data, dtype=np.float64),
        rows=csc.shape[0],
        cols=csc.shape[1],
        scatter=True,
    )


def _ell(A: Any, option: str | None = None) -> TileView:
    ell = host_layout(A, "ell")
    rows, cols = ell.shape
    width = int(ell.width)
    columns = np.asarray(ell.grid(ell.columns), dtype=np.int64)  # (rows, width)
    values = np.asarray(ell.grid(ell.values), dtype=np.float64)
    r, s = np.nonzero(columns >= 0)  # row-major: atoms ascending
    return TileView(
        tile_ptr=np.arange(rows + 1, dtype=np.int64) * width,
        entry_atom=r * width + s,
        entry_row=r.astype(np.int64),
        entry_col=columns[r, s],
        entry_val=values[r, s],
        rows=rows,
        cols=cols,
        scatter=False,
    )


def _dia(A: Any, option: str | None = None) -> TileView:
    dia = host_layout(A, "dia")
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
    keep = np.flatnonzero(inside & (value != 0))
    return TileView(
        tile_ptr=np.arange(rows + 1, dtype=np.int64) * ndiag,
        entry_atom=keep.astype(np.int64),
        entry_row=r[keep],
        entry_col=c[keep],
        entry_val=value[keep],
        rows=rows,
        cols=cols,
        scatter=False,
    )


def _bcsr(A: Any, option: str | None = None) -> TileView:
    from teaal_loops.ir.layouts import bcsr_block_shape

    R, C = bcsr_block_shape(option)
    bcsr = host_layout(A, "bcsr", block=(R, C))
    if (bcsr.block_rows, bcsr.block_cols) != (R, C):
        raise LayoutError(
            f"layout bcsr:{R}x{C}: the given BCSR matrix has "
            f"{bcsr.block_rows}x{bcsr.block_cols} blocks"
        )
    rows, cols = bcsr.shape
    indptr = np.asarray(bcsr.indptr, dtype=np.int64)
    blocks = np.asarray(bcsr.blocks, dtype=np.float64).reshape(-1, R, C)
    block_row = _rows_of(indptr)
    block_col = np.asarray(bcsr.indices, dtype=np.int64)
    a, i, j = np.nonzero(blocks)  # block-major, then row-major in the block
    row = block_row[a] * R + i
    col = block_col[a] * C + j
    inside = (row < rows) & (col < cols)
    return TileView(
        tile_ptr=indptr,
        entry_atom=a[inside].astype(np.int64),
        entry_row=row[inside],
        entry_col=col[inside],
        entry_val=blocks[a, i, j][inside],
        rows=rows,
        cols=cols,
        scatter=False,
    )


register_tile_view("csr", _row_major)
register_tile_view("coo", _coo)
register_tile_view("csc", _column_major)
register_tile_view("ell", _ell)
register_tile_view("dia", _dia)
register_tile_view("bcsr", _bcsr)
