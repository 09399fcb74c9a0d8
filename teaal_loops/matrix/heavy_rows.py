"""Heavy rows: which rows of a matrix are long enough to be cut into column panels, the tiles
that cut makes, and the split of a matrix into its light and its heavy rows.

Two layouts read this (``heavy:W``, light rows and heavy pieces in one launch, and
``pieces:W``, the heavy rows alone), and so does :func:`split_rows`, which makes the two
matrices that run as two launches: the light rows under one schedule, then the heavy rows'
pieces under another, adding into the light launch's output.

A row is heavy with at least ``max(min_nnz, PIECE_MIN * P)`` nonzeros, ``P = ceil(cols / W)``
panels of W columns: a piece of a few nonzeros would cost its walk's start and an atomic add
for little work. Every function takes the array module ``xp`` (NumPy on the host, CuPy on the
GPU: nothing here imports CuPy), so a device matrix is split where it lives.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from teaal_loops.errors import LayoutError
from teaal_loops.matrix.rowwise import entry_rows, offsets

DEFAULT_WIDTH = 4096
MIN_WIDTH, MAX_WIDTH = 32, 1 << 24
HEAVY_MIN_NNZ = 4096
PIECE_MIN = 8


def panel_count(cols: int, width: int) -> int:
    """Panels of ``width`` columns covering ``cols`` (at least 1)."""
    return max(-(-cols // width), 1)


def min_nnz_option(value: Any, where: str) -> int:
    """The one reading of ``min_nnz`` (the fewest nonzeros of a heavy row), a whole number >= 1;
    else a LayoutError naming ``where`` (``"layout heavy"``, ``"split_heavy"``)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise LayoutError(f"{where}: min_nnz={value!r} must be a whole number >= 1")
    return int(value)


def piece_rows(heavy_rows: Any, pieces: int) -> Any:
    """The output row of each of ``pieces`` consecutive pieces (piece i of heavy row
    ``i % H``: the panel-major order of both layouts)."""
    heavy = np.asarray(heavy_rows, dtype=np.int64)
    return heavy[np.arange(pieces) % len(heavy)] if len(heavy) else heavy[:0]


def heavy_threshold(panels: int, min_nnz: int = HEAVY_MIN_NNZ) -> int:
    """Nonzeros from which a row is heavy, for a matrix cut into ``panels`` panels (at least
    ``min_nnz``, and :data:`PIECE_MIN` a panel)."""
    return max(int(min_nnz), PIECE_MIN * panels)


def heavy_flags(xp: Any, indptr: Any, cols: int, width: int,
                min_nnz: int = HEAVY_MIN_NNZ) -> Any:
    """One bool a row: the row is heavy."""
    ptr = xp.asarray(indptr, dtype=xp.int64)
    return (ptr[1:] - ptr[:-1]) >= heavy_threshold(panel_count(cols, width), min_nnz)


def heavy_arrays(
    xp: Any, indptr: Any, indices: Any, values: Any, shape: tuple[int, int], width: int,
    min_nnz: int = HEAVY_MIN_NNZ,
) -> dict[str, Any]:
    """The tiles of ``heavy:W``: tile r < rows is row r (a heavy row's is empty), tile
    ``rows + p * H + h`` heavy row h's nonzeros in panel p. A stable sort by tile keeps every
    tile's nonzeros in their CSR order. Returns ``indptr`` (rows + P * H + 1 tile offsets),
    ``indices``, ``values``, ``heavy_rows`` (ascending), ``is_heavy`` (one bool a row) and the
    counts ``heavy`` (H) and ``panels`` (P)."""
    rows, cols = shape
    nnz = int(indices.size)
    panels = panel_count(cols, width)
    is_heavy = heavy_flags(xp, indptr, cols, width, min_nnz)
    heavy_rows = xp.nonzero(is_heavy)[0]
    count = int(heavy_rows.size)
    row = entry_rows(xp, xp.asarray(indptr, dtype=xp.int64), 0, nnz)
    if count:
        index_of = xp.cumsum(is_heavy.astype(xp.int64)) - 1  # a heavy row's place among them
        piece = rows + (xp.asarray(indices, dtype=xp.int64) // width) * count + index_of[row]
        tile = xp.where(is_heavy[row], piece, row)
        order = xp.argsort(tile, kind="stable")
        indices, values = indices[order], values[order]
    else:
        tile = row
    counts = xp.bincount(tile, minlength=rows + panels * count)
    return {"indptr": offsets(xp, counts), "indices": indices, "values": values,
            "heavy_rows": heavy_rows, "is_heavy": is_heavy, "heavy": count, "panels": panels}


def split_rows(xp: Any, indptr: Any, indices: Any, values: Any, shape: tuple[int, int],
               width: int, min_nnz: int = HEAVY_MIN_NNZ) -> tuple[tuple[Any, Any, Any],
                                                              tuple[Any, Any, Any]]:
    """The light rows and the heavy rows of a CSR matrix as two CSR matrices of its shape,
    ``(indptr, indices, values)`` each: the light one holds every row that is not heavy (a
    heavy row empty), the heavy one the heavy rows (the others empty). Their sum is the
    matrix; each keeps its rows' entries in their order."""
    rows, cols = shape
    nnz = int(indices.size)
    ptr = xp.asarray(indptr, dtype=xp.int64)
    is_heavy = heavy_flags(xp, ptr, cols, width, min_nnz)
    keep_heavy = is_heavy[entry_rows(xp, ptr, 0, nnz)]
    lengths = ptr[1:] - ptr[:-1]
    parts = []
    for in_part, rows_in in ((~keep_heavy, ~is_heavy), (keep_heavy, is_heavy)):
        counts = xp.where(rows_in, lengths, 0)
        part_ptr = offsets(xp, counts).astype(indptr.dtype)
        parts.append((part_ptr, indices[in_part], values[in_part]))
    return parts[0], parts[1]
