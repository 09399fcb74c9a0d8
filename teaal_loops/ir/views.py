"""Tile views: a layout seen the way every schedule sees it.

A schedule only needs the layout contract (DESIGN §4): how many tiles, where each tile's atoms
begin and end (``tile_ptr``), and what each atom contributes. A :class:`TileView` gives exactly
that for one matrix in one layout, so the CPU simulation runs every schedule on every layout
without knowing the layout. ``entries`` expand atoms into (output row, column, value) triples:
one per atom for CSR/CSC/COO, several for a dense BCSR block, none for ELL padding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from teaal_loops.errors import LayoutError

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


TileViewBuilder = Callable[[Any, "str | None"], TileView]  # (matrix, layout option)
_BUILDERS: dict[str, TileViewBuilder] = {}


def register_tile_view(name: str, builder: TileViewBuilder) -> None:
    _BUILDERS[name.lower()] = builder


def tile_view(layout: str, A: Any) -> TileView:
    """The tile view of matrix ``A`` (anything ``matrix.as_csr`` takes) in ``layout``."""
    base = layout.split(":", 1)[0].lower()
    builder = _BUILDERS.get(base)
    if builder is None:
        raise LayoutError(
            f"the CPU simulation has no tile view for layout {layout!r}; it has: "
            f"{', '.join(sorted(_BUILDERS))}"
        )
    option = layout.split(":", 1)[1] if ":" in layout else None
    return builder(A, option)


def _row_major(A: Any, option: str | None = None) -> TileView:
    from teaal_loops import matrix as tl_matrix

    csr = tl_matrix.as_csr(A)
    indptr = np.asarray(csr.indptr, dtype=np.int64)
    atoms = np.arange(int(indptr[-1]), dtype=np.int64)
    rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(indptr))
    return TileView(
        tile_ptr=indptr,
        entry_atom=atoms,
        entry_row=rows,
        entry_col=np.asarray(csr.indices, dtype=np.int64),
        entry_val=np.asarray(csr.data, dtype=np.float64),
        rows=csr.shape[0],
        cols=csr.shape[1],
        scatter=False,
    )


def _column_major(A: Any, option: str | None = None) -> TileView:
    from teaal_loops import matrix as tl_matrix

    csc = tl_matrix.as_csr(A).tocsc()
    csc.sort_indices()
    indptr = np.asarray(csc.indptr, dtype=np.int64)
    cols = np.repeat(np.arange(csc.shape[1], dtype=np.int64), np.diff(indptr))
    return TileView(
        tile_ptr=indptr,
        entry_atom=np.arange(int(indptr[-1]), dtype=np.int64),
        entry_row=np.asarray(csc.indices, dtype=np.int64),
        entry_col=cols,
        entry_val=np.asarray(csc.data, dtype=np.float64),
        rows=csc.shape[0],
        cols=csc.shape[1],
        scatter=True,
    )


register_tile_view("csr", _row_major)
register_tile_view("coo", _row_major)  # COO is stored row-major: same atoms, same tiles
register_tile_view("csc", _column_major)
