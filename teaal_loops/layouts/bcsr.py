"""BCSR: ``[M1, K1, M0, K0]`` with dense R x C blocks (``bcsr:RxC``; plain ``bcsr`` is 2x2).

``indptr`` over block rows, ``indices`` hold block-column ids, ``blocks`` has shape
``(nblocks, R, C)`` (row-major inside a block); cells outside the matrix are 0. Tiles are block
rows (``ceil(rows / R)``), atoms are stored blocks; a block's entries are its nonzero cells
inside the matrix (BCSR keeps no record of which zeros were stored).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from teaal_loops.errors import LayoutError
from teaal_loops.layouts.contract import Entries, Packed
from teaal_loops.layouts.host import (
    HostLayout,
    canonical_csr,
    check_padding,
    check_ptr,
    in_range,
    need,
    no_options,
    padding_limit,
    row_ids,
    rows_of,
    signed_index,
)
from teaal_loops.layouts.registry import register
from teaal_loops.spec.model import TensorFormat
from teaal_loops.types import KernelParam

DEFAULT_BLOCK = (2, 2)
MAX_BLOCK_CELLS = 256  # R * C: a block row's accumulator lives in R registers per thread


def block_shape(block: Any) -> tuple[int, int]:
    """The one reading of a block shape: ``"4x2"``/``"4X2"``/``"4*2"`` -> (4, 2), ``"4"`` or
    ``4`` -> (4, 4), ``(4, 2)`` -> (4, 2), None or ``""`` -> 2x2."""
    if block is None or (isinstance(block, str) and not block.strip()):
        return DEFAULT_BLOCK
    if isinstance(block, str):
        match = re.fullmatch(r"\s*(\d{1,4})\s*(?:[xX*]\s*(\d{1,4}))?\s*", block)
        if match is None:
            raise LayoutError(
                f"layout bcsr:{block}: the block shape must be RxC (e.g. bcsr:4x4) or R (square)"
            )
        R = int(match.group(1))
        C = int(match.group(2)) if match.group(2) else R
    elif isinstance(block, (int, np.integer)) and not isinstance(block, bool):
        R = C = int(block)
    elif isinstance(block, (tuple, list)) and len(block) == 2 and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in block
    ):
        R, C = (int(v) for v in block)
    else:
        raise LayoutError(f"layout bcsr: block={block!r} must be R, (R, C) or 'RxC'")
    if R < 1 or C < 1 or R * C > MAX_BLOCK_CELLS:
        raise LayoutError(
            f"layout bcsr:{R}x{C}: block {R}x{C} must have 1 <= R, C and R*C <= "
            f"{MAX_BLOCK_CELLS}"
        )
    return R, C


@dataclass(frozen=True, eq=False)
class BCSRLayout(HostLayout):
    name: ClassVar[str] = "bcsr"
    block_rows: int
    block_cols: int
    indptr: np.ndarray  # ceil(rows / R) + 1 offsets into blocks
    indices: np.ndarray  # block-column id of every block
    blocks: np.ndarray  # (nblocks, R, C)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"indptr": self.indptr, "indices": self.indices, "blocks": self.blocks}

    def tile_ptr(self) -> np.ndarray:
        return np.asarray(self.indptr, dtype=np.int64)

    @property
    def stored(self) -> int:
        return int(self.blocks.size)

    def to_csr(self) -> sp.csr_matrix:
        R, C = self.block_rows, self.block_cols
        rows, cols = self.shape
        n_block_rows = len(self.indptr) - 1
        block_row = np.repeat(np.arange(n_block_rows), np.diff(self.indptr))
        r = (block_row[:, None, None] * R + np.arange(R)[None, :, None]).repeat(C, axis=2)
        c = (self.indices[:, None, None] * C + np.arange(C)[None, None, :]).repeat(R, axis=1)
        keep = (self.blocks != 0) & (r < rows) & (c < cols)
        coo = sp.coo_matrix((self.blocks[keep], (r[keep], c[keep])), shape=self.shape)
        return canonical_csr(coo.tocsr())


def build(csr: sp.csr_matrix, **options: Any) -> BCSRLayout:
    limit = padding_limit(options)
    R, C = block_shape(options.pop("block", None))
    no_options("bcsr", options, ("block", "padding_limit"))
    rows, cols = csr.shape
    n_block_rows = -(-rows // R)
    n_block_cols = -(-cols // C)
    row = row_ids(csr).astype(np.int64)
    col = csr.indices.astype(np.int64)
    keys = (row // R) * n_block_cols + col // C
    unique_keys, which = np.unique(keys, return_inverse=True)
    index = signed_index(csr.indices.dtype)
    padded = len(unique_keys) * (R * C * csr.data.itemsize + index.itemsize)
    check_padding("bcsr", padded + (n_block_rows + 1) * index.itemsize, csr, limit)
    blocks = np.zeros((len(unique_keys), R, C), dtype=csr.data.dtype)
    blocks[which, row % R, col % C] = csr.data
    indptr = np.zeros(n_block_rows + 1, dtype=index)
    np.cumsum(np.bincount(unique_keys // n_block_cols, minlength=n_block_rows), out=indptr[1:])
    indices = (unique_keys % n_block_cols).astype(index)
    return BCSRLayout(csr.shape, int(csr.nnz), R, C, indptr, indices, blocks)


def _check_block(bcsr: BCSRLayout, option: str | None) -> tuple[int, int]:
    """The block shape the layout name asks for, which a host layout built by the user must
    have."""
    R, C = block_shape(option)
    need(
        (bcsr.block_rows, bcsr.block_cols) == (R, C),
        "bcsr",
        f"blocks are {bcsr.block_rows}x{bcsr.block_cols}, the kernel's {R}x{C}",
    )
    return R, C


def pack(bcsr: BCSRLayout, option: str | None) -> Packed:
    R, C = _check_block(bcsr, option)
    rows, cols = bcsr.shape
    nblocks = len(bcsr.indices)
    check_ptr(bcsr.indptr, -(-rows // R), nblocks, "bcsr", "block-row")
    need(in_range(bcsr.indices, 0, -(-cols // C)), "bcsr", "a block column lies outside")
    need(bcsr.blocks.shape == (nblocks, R, C), "bcsr", f"blocks have shape {bcsr.blocks.shape}")
    arrays = {"indptr": bcsr.indptr, "indices": bcsr.indices, "blocks": bcsr.blocks.ravel()}
    return Packed(arrays, {"nnz": nblocks})


def entries(bcsr: BCSRLayout, option: str | None) -> Entries:
    R, C = _check_block(bcsr, option)
    rows, cols = bcsr.shape
    blocks = np.asarray(bcsr.blocks, dtype=np.float64).reshape(-1, R, C)
    block_row = rows_of(bcsr.indptr)
    block_col = np.asarray(bcsr.indices, dtype=np.int64)
    a, i, j = np.nonzero(blocks)  # block-major, then row-major in the block
    row = block_row[a] * R + i
    col = block_col[a] * C + j
    inside = (row < rows) & (col < cols)
    return Entries(
        atom=a[inside].astype(np.int64),
        row=row[inside],
        col=col[inside],
        val=blocks[a, i, j][inside],
    )


def _option(option: str | None) -> str:
    R, C = block_shape(option)
    return f"{R}x{C}"


def _template_options(option: str | None) -> dict[str, object]:
    R, C = block_shape(option)
    return {"R": R, "C": C}


def _build_options(option: str | None) -> dict[str, Any]:
    return {"block": block_shape(option)}


def matches_format(fmt: TensorFormat, tile: str, atom: str) -> bool:
    return tuple(fmt.rank_order) == (f"{tile}1", f"{atom}1", f"{tile}0", f"{atom}0")


DEFINITION = register(
    "bcsr",
    macro_file="layouts/bcsr.cuh.j2",
    description="block CSR: ranks [M1, K1, M0, K0] with dense R x C blocks; tiles are "
    "block rows, atoms are blocks",
    teaal_format="rank-order [M1, K1, M0, K0]; M1: U, K1: C, M0: U, K0: U (block shape from "
    "the format's name, e.g. BCSR_4x4; default 2x2)",
    tiles="block rows",
    schedules=("thread_mapped", "work_oriented"),
    forms=("spmv", "spmm"),
    params=(
        KernelParam("rows", "index_t", "number of rows (length of y)"),
        KernelParam("cols", "index_t", "number of columns (length of x)"),
        KernelParam("nnz", "offset_t", "atoms: stored blocks"),
        KernelParam("indptr", "const offset_t* __restrict__",
                    "block-row offsets, ceil(rows / R) + 1"),
        KernelParam("indices", "const index_t* __restrict__", "block column of each block"),
        KernelParam("blocks", "const value_t* __restrict__",
                    "R x C values of each block, row-major inside the block"),
    ),
    build=build,
    pack=pack,
    entries=entries,
    option=_option,
    template_options=_template_options,
    build_options=_build_options,
    matches_format=matches_format,
)
