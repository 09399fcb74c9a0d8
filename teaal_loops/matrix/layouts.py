"""Sparse layouts the GPU kernels consume, each built from a canonical CSR matrix.

In TeAAL terms a layout is a rank order plus per-rank formats (DESIGN.md section 5):

========  =====================================================================================
``csr``   rank order ``[M, K]``, M uncompressed, K compressed: ``indptr``, ``indices``, ``data``.
``csc``   rank order ``[K, M]``: ``indptr`` over columns, ``indices`` hold row ids.
``coo``   flattened compressed ``(M, K)``: ``row``, ``col``, ``data``, sorted row-major.
``ell``   every row padded to the longest one (``width``). ``columns`` / ``values`` are flat
          arrays in **column-major (slot-major)** order by default: entry ``s`` of row ``r`` sits at
          ``s * rows + r`` so that consecutive threads (rows) read consecutive addresses;
          ``order="row"`` gives ``r * width + s``. Padding: column ``-1``, value ``0``.
``bcsr``  ``block_rows x block_cols`` dense blocks (``block=(R, C)`` or ``block=R``; default 2x2):
          ``indptr`` over block rows, ``indices`` hold block-column ids, ``blocks`` has shape
          ``(nblocks, R, C)`` (row-major inside a block); cells outside the matrix are 0.
``dia``   one dense row-indexed array per stored diagonal: ``offsets`` (``col - row``,
          ascending) and ``data`` of shape ``(ndiag, rows)`` with ``data[d, r] = A[r, r +
          offsets[d]]``, 0 where that column lies outside the matrix.
========  =====================================================================================

Every layout has ``.shape``, ``.nnz`` (nonzeros of the source CSR), ``.nbytes`` (bytes of its
arrays), ``.stored`` (value slots incl. padding), ``.arrays()`` (name -> array, kernel-argument
order) and ``.to_csr()``. ``to_csr`` is exact for csr/csc/coo/ell (explicitly stored zeros
included); bcsr and dia cannot tell a stored zero from padding, so their ``to_csr`` drops zeros.

Padding guard: ell, bcsr and dia refuse (:class:`LayoutError`) when their arrays would take more
than ``PADDING_LIMIT`` (20) times the bytes of the source CSR (``indptr + indices + data``); the
check runs before anything is allocated. ``padding_limit=`` overrides it per call (``None``
disables it). :func:`check_fits_device` is the device-side counterpart (loops' SKIP_TOO_LARGE).

User layouts: ``register_layout("mine", builder)`` where ``builder(csr, **options)`` returns an
object with ``shape``, ``nnz``, ``nbytes`` and ``to_csr()``; ``convert(A, "mine")`` then works.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from teaal_loops.errors import DeviceError, LayoutError
from teaal_loops.matrix.convert import as_csr

PADDING_LIMIT = 20.0
LAYOUT_NAMES = ("csr", "csc", "coo", "ell", "bcsr", "dia")


# --------------------------------------------------------------------------------------------
# Layout classes


@dataclass(frozen=True, eq=False)
class Layout:
    """Common interface (see the module docstring). Subclasses set ``name`` and their arrays."""

    name: ClassVar[str] = "layout"
    shape: tuple[int, int]
    nnz: int

    def arrays(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.arrays().values())

    @property
    def stored(self) -> int:
        """Value slots the layout stores, padding included."""
        return self.nnz

    def to_csr(self) -> sp.csr_matrix:
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class CSRLayout(Layout):
    name: ClassVar[str] = "csr"
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return {"indptr": self.indptr, "indices": self.indices, "data": self.data}

    def to_csr(self) -> sp.csr_matrix:
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape, copy=True)


@dataclass(frozen=True, eq=False)
class CSCLayout(Layout):
    name: ClassVar[str] = "csc"
    indptr: np.ndarray  # cols + 1 offsets
    indices: np.ndarray  # row ids, ascending within a column
    data: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return {"indptr": self.indptr, "indices": self.indices, "data": self.data}

    def to_csr(self) -> sp.csr_matrix:
        csc = sp.csc_matrix((self.data, self.indices, self.indptr), shape=self.shape, copy=True)
        return _canonical(csc.tocsr())


@dataclass(frozen=True, eq=False)
class COOLayout(Layout):
    name: ClassVar[str] = "coo"
    row: np.ndarray
    col: np.ndarray
    data: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return {"row": self.row, "col": self.col, "data": self.data}

    def to_csr(self) -> sp.csr_matrix:
        indptr = np.zeros(self.shape[0] + 1, dtype=self.row.dtype)
        np.cumsum(np.bincount(self.row, minlength=self.shape[0]), out=indptr[1:])
        return sp.csr_matrix((self.data, self.col, indptr), shape=self.shape, copy=True)


@dataclass(frozen=True, eq=False)
class ELLLayout(Layout):
    name: ClassVar[str] = "ell"
    width: int
    order: str  # "col": slot * rows + row (default); "row": row * width + slot
    columns: np.ndarray  # flat, -1 marks padding
    values: np.ndarray  # flat, 0 in padding

    def arrays(self) -> dict[str, np.ndarray]:
        return {"columns": self.columns, "values": self.values}

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


@dataclass(frozen=True, eq=False)
class BCSRLayout(Layout):
    name: ClassVar[str] = "bcsr"
    block_rows: int
    block_cols: int
    indptr: np.ndarray  # ceil(rows / R) + 1 offsets into blocks
    indices: np.ndarray  # block-column id of every block
    blocks: np.ndarray  # (nblocks, R, C)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"indptr": self.indptr, "indices": self.indices, "blocks": self.blocks}

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
        return _canonical(coo.tocsr())


@dataclass(frozen=True, eq=False)
class DIALayout(Layout):
    name: ClassVar[str] = "dia"
    offsets: np.ndarray  # col - row of every stored diagonal, ascending
    data: np.ndarray  # (ndiag, rows): data[d, r] = A[r, r + offsets[d]]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"offsets": self.offsets, "data": self.data}

    @property
    def stored(self) -> int:
        return int(self.data.size)

    def to_csr(self) -> sp.csr_matrix:
        rows, cols = self.shape
        r = np.broadcast_to(np.arange(rows), self.data.shape)
        c = r + self.offsets[:, None]
        keep = (self.data != 0) & (c >= 0) & (c < cols)
        coo = sp.coo_matrix((self.data[keep], (r[keep], c[keep])), shape=self.shape)
        return _canonical(coo.tocsr())


# --------------------------------------------------------------------------------------------
# Guards


def csr_bytes(csr: sp.csr_matrix) -> int:
    """Bytes of a CSR matrix's three arrays: the reference the padding limit multiplies."""
    return int(csr.indptr.nbytes + csr.indices.nbytes + csr.data.nbytes)


def check_padding(
    name: str, padded_bytes: int, csr: sp.csr_matrix, limit: float | None = PADDING_LIMIT
) -> None:
    """Refuse a padded layout larger than ``limit`` times the CSR storage (None: no limit)."""
    if limit is None:
        return
    reference = max(csr_bytes(csr), 1)
    if padded_bytes > limit * reference:
        raise LayoutError(
            f"the {name} layout of this {csr.shape[0]}x{csr.shape[1]} matrix ({csr.nnz} nonzeros) "
            f"would take {_human(padded_bytes)}, {padded_bytes / reference:.1f}x its CSR storage "
            f"({_human(reference)}); the limit is {limit:g}x (SKIP_TOO_LARGE). Use csr, or pass "
            "padding_limit=None to build it anyway"
        )


def check_fits_device(nbytes: int, free_bytes: int, *, what: str = "the matrix") -> None:
    """Raise DeviceError (loops' SKIP_TOO_LARGE) when ``nbytes`` exceed the free device memory."""
    if nbytes > free_bytes:
        raise DeviceError(
            f"SKIP_TOO_LARGE: {what} needs {_human(nbytes)} of device memory but only "
            f"{_human(free_bytes)} is free"
        )


def _human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(nbytes) < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} GiB"  # pragma: no cover


# --------------------------------------------------------------------------------------------
# Builders


def _canonical(csr: sp.csr_matrix) -> sp.csr_matrix:
    csr = sp.csr_matrix(csr)
    csr.sum_duplicates()
    csr.sort_indices()
    return csr


def _padding_limit(options: dict[str, Any]) -> float | None:
    limit = options.pop("padding_limit", PADDING_LIMIT)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float))):
        raise LayoutError(f"padding_limit={limit!r} is not a number (or None)")
    return None if limit is None else float(limit)


def _no_options(name: str, options: dict[str, Any], valid: tuple[str, ...] = ()) -> None:
    if options:
        valid_text = ", ".join(valid) if valid else "none"
        raise LayoutError(
            f"layout {name}: unknown option(s) {', '.join(sorted(options))} "
            f"(valid options: {valid_text})"
        )


def _signed(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return np.dtype(np.int64) if dtype.itemsize > 4 else np.dtype(np.int32)


def _row_ids(csr: sp.csr_matrix) -> np.ndarray:
    lengths = np.diff(csr.indptr)
    return np.repeat(np.arange(csr.shape[0], dtype=csr.indices.dtype), lengths)


def _build_csr(csr: sp.csr_matrix, **options: Any) -> CSRLayout:
    _no_options("csr", options)
    return CSRLayout(csr.shape, int(csr.nnz), csr.indptr, csr.indices, csr.data)


def _build_csc(csr: sp.csr_matrix, **options: Any) -> CSCLayout:
    _no_options("csc", options)
    csc = csr.tocsc()
    csc.sort_indices()
    return CSCLayout(csr.shape, int(csr.nnz), csc.indptr, csc.indices, csc.data)


def _build_coo(csr: sp.csr_matrix, **options: Any) -> COOLayout:
    _no_options("coo", options)
    return COOLayout(csr.shape, int(csr.nnz), _row_ids(csr), csr.indices.copy(), csr.data.copy())


def _build_ell(csr: sp.csr_matrix, **options: Any) -> ELLLayout:
    limit = _padding_limit(options)
    order = options.pop("order", "col")
    _no_options("ell", options, ("order", "padding_limit"))
    if order not in ("col", "row"):
        raise LayoutError(f"layout ell: order={order!r} (expected 'col' or 'row')")
    rows = csr.shape[0]
    lengths = np.diff(csr.indptr)
    width = int(lengths.max()) if rows and csr.nnz else 0
    index = _signed(csr.indices.dtype)
    check_padding("ell", rows * width * (index.itemsize + csr.data.itemsize), csr, limit)
    slot = np.arange(csr.nnz, dtype=np.int64) - np.repeat(csr.indptr[:-1].astype(np.int64), lengths)
    row = _row_ids(csr).astype(np.int64)
    flat = slot * rows + row if order == "col" else row * width + slot
    columns = np.full(rows * width, -1, dtype=index)
    values = np.zeros(rows * width, dtype=csr.data.dtype)
    columns[flat] = csr.indices
    values[flat] = csr.data
    return ELLLayout(csr.shape, int(csr.nnz), width, order, columns, values)


def _block_shape(options: dict[str, Any]) -> tuple[int, int]:
    block = options.pop("block", None)
    R = options.pop("block_rows", None)
    C = options.pop("block_cols", None)
    if block is not None:
        if R is not None or C is not None:
            raise LayoutError("layout bcsr: give block=... or block_rows/block_cols, not both")
        R, C = (block, block) if isinstance(block, (int, np.integer)) else tuple(block)
    R = 2 if R is None else R
    C = 2 if C is None else C
    for label, value in (("block_rows", R), ("block_cols", C)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise LayoutError(f"layout bcsr: {label}={value!r} must be a positive integer")
    return int(R), int(C)


def _build_bcsr(csr: sp.csr_matrix, **options: Any) -> BCSRLayout:
    limit = _padding_limit(options)
    R, C = _block_shape(options)
    _no_options("bcsr", options, ("block", "block_rows", "block_cols", "padding_limit"))
    rows, cols = csr.shape
    n_block_rows = -(-rows // R)
    n_block_cols = -(-cols // C)
    row = _row_ids(csr).astype(np.int64)
    col = csr.indices.astype(np.int64)
    keys = (row // R) * n_block_cols + col // C
    unique_keys, which = np.unique(keys, return_inverse=True)
    index = _signed(csr.indices.dtype)
    padded = len(unique_keys) * (R * C * csr.data.itemsize + index.itemsize)
    check_padding("bcsr", padded + (n_block_rows + 1) * index.itemsize, csr, limit)
    blocks = np.zeros((len(unique_keys), R, C), dtype=csr.data.dtype)
    blocks[which, row % R, col % C] = csr.data
    indptr = np.zeros(n_block_rows + 1, dtype=index)
    np.cumsum(np.bincount(unique_keys // n_block_cols, minlength=n_block_rows), out=indptr[1:])
    indices = (unique_keys % n_block_cols).astype(index)
    return BCSRLayout(csr.shape, int(csr.nnz), R, C, indptr, indices, blocks)


def _build_dia(csr: sp.csr_matrix, **options: Any) -> DIALayout:
    limit = _padding_limit(options)
    _no_options("dia", options, ("padding_limit",))
    rows = csr.shape[0]
    row = _row_ids(csr).astype(np.int64)
    diagonal = csr.indices.astype(np.int64) - row
    offsets = np.unique(diagonal)
    index = _signed(csr.indices.dtype)
    check_padding("dia", len(offsets) * (rows * csr.data.itemsize + index.itemsize), csr, limit)
    data = np.zeros((len(offsets), rows), dtype=csr.data.dtype)
    data[np.searchsorted(offsets, diagonal), row] = csr.data
    return DIALayout(csr.shape, int(csr.nnz), offsets.astype(index), data)


# --------------------------------------------------------------------------------------------
# Registry

LayoutBuilder = Callable[..., Any]

_REGISTRY: dict[str, LayoutBuilder] = {
    "csr": _build_csr,
    "csc": _build_csc,
    "coo": _build_coo,
    "ell": _build_ell,
    "bcsr": _build_bcsr,
    "dia": _build_dia,
}
_REQUIRED = ("shape", "nnz", "nbytes", "to_csr")


def register_layout(name: str, from_csr: LayoutBuilder, *, replace: bool = False) -> None:
    """Make ``convert(A, name, **options)`` call ``from_csr(canonical_csr, **options)``.

    The builder returns an object with ``shape``, ``nnz``, ``nbytes`` and ``to_csr()`` (a
    :class:`Layout` subclass is the easy way). Built-in names can only be replaced with
    ``replace=True``.
    """
    key = name.strip().lower()
    if not key.isidentifier():
        raise LayoutError(f"layout name {name!r} must be an identifier")
    if not callable(from_csr):
        raise LayoutError(f"layout {name}: the builder {from_csr!r} is not callable")
    if key in _REGISTRY and not replace:
        raise LayoutError(f"layout {key!r} is already registered (pass replace=True)")
    _REGISTRY[key] = from_csr


def registered_layouts() -> tuple[str, ...]:
    """Built-in layouts (LAYOUT_NAMES order) followed by user-registered ones."""
    extra = tuple(sorted(set(_REGISTRY) - set(LAYOUT_NAMES)))
    return LAYOUT_NAMES + extra


def convert(csr: Any, name: str, **options: Any) -> Any:
    """Build layout ``name`` from ``csr`` (anything :func:`as_csr` accepts)."""
    key = name.strip().lower() if isinstance(name, str) else name
    builder = _REGISTRY.get(key)
    if builder is None:
        raise LayoutError(
            f"unknown layout {name!r} (known layouts: {', '.join(registered_layouts())})"
        )
    layout = builder(as_csr(csr), **options)
    missing = [attr for attr in _REQUIRED if not hasattr(layout, attr)]
    if missing:
        raise LayoutError(f"layout {key}: the builder returned an object without {missing}")
    return layout
