"""What the two heavy-row layouts share (``heavy:W``, light rows then pieces; ``pieces:W``, the
pieces alone): the host layout of panel pieces, the reading of the panel width, the checks of a
host layout built by hand, and the entries. Not a layout itself: ``heavy.py`` and ``pieces.py``
stay independent of each other and both read this, as every layout reads ``host.py``.

A host layout here holds ``light`` tiles, one a row (``heavy``: ``rows``; ``pieces``: 0), then
the pieces, tile ``light + p * H + h`` holding heavy row h's nonzeros in panel p of W columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from teaal_loops.layouts.contract import Entries
from teaal_loops.layouts.host import (
    HostLayout,
    canonical_csr,
    check_ptr,
    in_range,
    need,
    rows_of,
    whole_number_option,
)
from teaal_loops.matrix.heavy_rows import (
    DEFAULT_WIDTH,
    MAX_WIDTH,
    MIN_WIDTH,
    panel_count,
    piece_rows,
)


def panel_width(option: Any, layout: str) -> int:
    """The one reading of a panel width: ``"1024"`` or ``1024`` -> 1024; None or ``""`` ->
    :data:`~teaal_loops.matrix.heavy_rows.DEFAULT_WIDTH`; ``layout`` names the refusal."""
    return whole_number_option(option, layout, key="width",
                               meaning="the panel width in columns", example=1024,
                               default=DEFAULT_WIDTH, bounds=(MIN_WIDTH, MAX_WIDTH))


@dataclass(frozen=True)
class WidthOption:
    """The three readings of a layout name's option that ``register`` takes, for a layout
    (``layout``) whose option is its panel width."""

    layout: str

    def option(self, text: str | None) -> str:
        """The canonical text: ``pieces`` -> ``4096``."""
        return str(panel_width(text, self.layout))

    def template_options(self, text: str | None) -> dict[str, object]:
        """None: the kernel reads the counts, not the width (which is still checked)."""
        panel_width(text, self.layout)
        return {}

    def build_options(self, text: str | None) -> dict[str, Any]:
        """The host builder's ``width``."""
        return {"width": panel_width(text, self.layout)}


@dataclass(frozen=True, eq=False)
class PanelPiecesLayout(HostLayout):
    """Light tiles (one a row, :meth:`light_tiles` of them), then the heavy rows' pieces."""

    width: int
    heavy_rows: np.ndarray  # the heavy rows, ascending
    indptr: np.ndarray  # light_tiles() + P * H + 1 tile offsets
    indices: np.ndarray  # global column of each nonzero
    data: np.ndarray

    def light_tiles(self) -> int:
        raise NotImplementedError

    def arrays(self) -> dict[str, np.ndarray]:
        return {"indptr": self.indptr, "indices": self.indices, "data": self.data,
                "heavy_rows": self.heavy_rows}

    def tile_ptr(self) -> np.ndarray:
        return np.asarray(self.indptr, dtype=np.int64)

    def tile_rows(self) -> np.ndarray:
        """The output row of every tile."""
        light = self.light_tiles()
        pieces = piece_rows(self.heavy_rows, len(self.indptr) - 1 - light)
        return np.concatenate([np.arange(light, dtype=np.int64), pieces])

    def to_csr(self) -> sp.csr_matrix:
        row = self.tile_rows()[rows_of(self.indptr)]
        coo = sp.coo_matrix((self.data, (row, self.indices)), shape=self.shape)
        return canonical_csr(coo.tocsr())


def check_width(host: PanelPiecesLayout, option: str | None, layout: str) -> int:
    """The panel width the layout name asks for, which a host layout built by hand must have."""
    width = panel_width(option, layout)
    need(host.width == width, layout, f"panels of {host.width} columns, the kernel's {width}")
    return width


def check_pieces(host: PanelPiecesLayout, option: str | None,
                 layout: str) -> tuple[np.ndarray, int]:
    """Check a host layout (perhaps built by hand) keeps the rules both layouts share: its
    tile offsets, values and columns, distinct ascending heavy rows, every piece's nonzeros
    in its panel. Returns (the heavy rows as int64, P)."""
    width = check_width(host, option, layout)
    rows, cols = host.shape
    nnz = len(host.indices)
    panels = panel_count(cols, width)
    heavy = np.asarray(host.heavy_rows, dtype=np.int64)
    light = host.light_tiles()
    check_ptr(host.indptr, light + panels * len(heavy), nnz, layout, "tile")
    need(len(host.data) == nnz, layout, f"{len(host.data)} values for {nnz} columns")
    need(in_range(host.indices, 0, cols), layout, "a column lies outside the matrix")
    need(in_range(heavy, 0, rows) and bool(np.all(np.diff(heavy) > 0)), layout,
         "the heavy rows are not distinct rows of the matrix in ascending order")
    if len(heavy):
        tile = rows_of(host.tile_ptr())
        pieces = tile >= light
        panel = (tile[pieces] - light) // len(heavy)
        need(bool(np.all(np.asarray(host.indices, dtype=np.int64)[pieces] // width == panel)),
             layout, "a heavy row's nonzero lies outside its piece's panel")
    return heavy, panels


def entries(host: PanelPiecesLayout, option: str | None, layout: str) -> Entries:
    check_width(host, option, layout)
    return Entries(
        atom=np.arange(len(host.indices), dtype=np.int64),
        row=host.tile_rows()[rows_of(host.indptr)],
        col=np.asarray(host.indices, dtype=np.int64),
        val=np.asarray(host.data, dtype=np.float64),
    )
