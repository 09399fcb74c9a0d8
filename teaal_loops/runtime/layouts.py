"""Matrices on the device in a layout's kernel-argument form (the Python side of a layout).

Each layout of :data:`teaal_loops.codegen.registry.LAYOUTS` has a converter here that returns
its device arrays and scalars by the names the registry declares. CSR has a direct path: host
inputs (SciPy, NumPy) are validated on the host before upload; device inputs
(cupyx.scipy.sparse, CuPy) are validated on the GPU with a few reductions and a single host
synchronisation. Every other layout is built on the host by
:func:`teaal_loops.matrix.layouts.convert` (device inputs are copied to the host first; a
padded layout over the documented limit is refused there with loops' SKIP_TOO_LARGE), packed
into its kernel arguments by a *packer* (:func:`register_packer`), cast to the types the
registry declares and uploaded, after checking that it fits in free device memory. A host
layout built by the user (``convert(A, "ell", padding_limit=None)``) is accepted as is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from teaal_loops.errors import DeviceError, LayoutError, MatrixError
from teaal_loops.ir.model import MatrixShape
from teaal_loops.runtime.backend import cupy_module, free_device_bytes


@dataclass
class DeviceMatrix:
    """A matrix resident on the GPU: layout arguments by name, plus its shape.

    ``shape`` is the matrix (rows, cols, stored nonzeros); ``tiles`` what a schedule binds to
    (tiles as rows, atoms as nnz; None: the same as ``shape``, as for CSR); ``scalars`` the
    layout's scalar kernel arguments beyond ``rows``, ``cols`` and ``nnz``.
    """

    layout: str
    shape: MatrixShape
    arrays: dict[str, Any]  # name -> cupy array (registry names: indptr, indices, values)
    dtype: np.dtype[Any]
    index_bits: int
    tiles: MatrixShape | None = None
    scalars: dict[str, int] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self.arrays.values()))

    @property
    def schedule_shape(self) -> MatrixShape:
        """The shape a schedule is bound to: tiles and atoms of the layout."""
        return self.tiles or self.shape

    def kernel_scalars(self) -> dict[str, int]:
        """Scalar kernel arguments by registry name."""
        out = {"rows": self.shape.rows, "cols": self.shape.cols, "nnz": self.shape.nnz}
        out.update(self.scalars)
        return out


def is_device_object(obj: Any) -> bool:
    """True for CuPy arrays and cupyx.scipy.sparse matrices (without importing CuPy)."""
    module = type(obj).__module__ or ""
    return module.startswith("cupy") or module.startswith("cupyx")


def csr_bytes(rows: int, nnz: int, value_bytes: int, index_bits: int) -> int:
    return (rows + 1) * (index_bits // 8) + nnz * (4 + value_bytes)


def ensure_fits(required: int, what: str) -> None:
    """DeviceError (not an out-of-memory crash) when ``required`` bytes cannot be allocated."""
    free = free_device_bytes()
    if required > free:
        raise DeviceError(
            f"{what} needs {required / 2**30:.2f} GiB of GPU memory but only "
            f"{free / 2**30:.2f} GiB is free"
        )


def to_device_csr(A: Any, dtype: np.dtype[Any], index_bits: int | None = None) -> DeviceMatrix:
    """Any supported matrix -> CSR arrays on the GPU with the kernel's dtypes.

    ``index_bits`` None picks 32 or 64 from the size (nnz or rows + nnz over 2^31 - 1).
    """
    if is_device_object(A):
        return _device_input(A, dtype, index_bits)
    return _host_input(A, dtype, index_bits)


def _choose_bits(rows: int, nnz: int, index_bits: int | None) -> int:
    from teaal_loops.ir import index_bits as needed_bits

    need = needed_bits(rows, nnz)
    if index_bits is None:
        return need
    if index_bits < need:
        raise LayoutError(
            f"a matrix with {rows} rows and {nnz} nonzeros needs 64-bit offsets, "
            f"but {index_bits}-bit was requested"
        )
    return index_bits


def _host_input(A: Any, dtype: np.dtype[Any], index_bits: int | None) -> DeviceMatrix:
    import scipy.sparse as sp

    from teaal_loops.matrix import validate_csr

    if sp.issparse(A):
        csr = A if A.format == "csr" else A.tocsr()
    else:
        dense = np.asarray(A)
        if dense.ndim != 2:
            raise MatrixError(f"expected a 2-D matrix, got an array of shape {dense.shape}")
        csr = sp.csr_matrix(dense)
    rows, cols = (int(n) for n in csr.shape)
    validate_csr(csr.indptr, csr.indices, (rows, cols))
    nnz = int(csr.indptr[-1]) if rows else 0
    bits = _choose_bits(rows, nnz, index_bits)
    offset = np.int64 if bits == 64 else np.int32
    cupy = cupy_module()
    ensure_fits(csr_bytes(rows, nnz, dtype.itemsize, bits), f"a {rows}x{cols} matrix ({nnz} nnz)")
    arrays = {
        "indptr": cupy.asarray(np.ascontiguousarray(csr.indptr, dtype=offset)),
        "indices": cupy.asarray(np.ascontiguousarray(csr.indices, dtype=np.int32)),
        "values": cupy.asarray(np.ascontiguousarray(csr.data, dtype=dtype)),
    }
    shape = MatrixShape(rows=rows, cols=cols, nnz=nnz, max_row=_max_row_host(csr.indptr))
    return DeviceMatrix("csr", shape, arrays, np.dtype(dtype), bits)


def _max_row_host(indptr: np.ndarray[Any, Any]) -> int:
    return int(np.diff(indptr).max()) if len(indptr) > 1 else 0


def _device_input(A: Any, dtype: np.dtype[Any], index_bits: int | None) -> DeviceMatrix:
    cupy = cupy_module()
    import cupyx.scipy.sparse as csp

    if csp.issparse(A):
        csr = A if A.format == "csr" else A.tocsr()
    else:
        dense = cupy.asarray(A)
        if dense.ndim != 2:
            raise MatrixError(f"expected a 2-D matrix, got an array of shape {dense.shape}")
        csr = csp.csr_matrix(dense.astype(dtype, copy=False))
    rows, cols = (int(n) for n in csr.shape)
    indptr, indices, data = csr.indptr, csr.indices, csr.data
    if indptr.ndim != 1 or len(indptr) != rows + 1:
        raise MatrixError(
            f"matrix: {len(indptr)} row offsets for {rows} rows (expected {rows + 1})"
        )
    nnz = int(indices.size)
    bits = _choose_bits(rows, nnz, index_bits)
    _validate_on_device(cupy, indptr, indices, rows, cols, nnz)
    offset = np.int64 if bits == 64 else np.int32
    converting = (
        (indptr.dtype != offset) * indptr.size * (bits // 8)
        + (indices.dtype != np.int32) * nnz * 4
        + (data.dtype != dtype) * nnz * dtype.itemsize
    )
    if converting:
        ensure_fits(int(converting), "converting the matrix to the kernel's types")
    arrays = {
        "indptr": cupy.ascontiguousarray(indptr.astype(offset, copy=False)),
        "indices": cupy.ascontiguousarray(indices.astype(np.int32, copy=False)),
        "values": cupy.ascontiguousarray(data.astype(dtype, copy=False)),
    }
    max_row = int(cupy.diff(indptr).max().get()) if rows else 0
    shape = MatrixShape(rows=rows, cols=cols, nnz=nnz, max_row=max_row)
    return DeviceMatrix("csr", shape, arrays, np.dtype(dtype), bits)


def _validate_on_device(
    cupy: Any, indptr: Any, indices: Any, rows: int, cols: int, nnz: int
) -> None:
    """The host checks of ``validate_csr`` as GPU reductions, read back in one transfer."""
    if rows == 0:
        if nnz:
            raise MatrixError(f"matrix: 0 rows but {nnz} column indices")
        return
    flags = cupy.stack(
        [
            (indptr[0] != 0).astype(cupy.int64),
            cupy.any(indptr[1:] < indptr[:-1]).astype(cupy.int64),
            (indptr[-1] != nnz).astype(cupy.int64),
            indices.min().astype(cupy.int64) if nnz else cupy.zeros((), cupy.int64),
            indices.max().astype(cupy.int64) if nnz else cupy.zeros((), cupy.int64),
        ]
    ).get()
    start_bad, decreasing, end_bad, lo, hi = (int(v) for v in flags)
    if start_bad:
        raise MatrixError(f"matrix: row offsets start at {int(indptr[0].get())}, expected 0")
    if decreasing:
        row = int(cupy.flatnonzero(indptr[1:] < indptr[:-1])[0].get())
        raise MatrixError(
            f"matrix: row offsets decrease at row {row} "
            f"({int(indptr[row].get())} -> {int(indptr[row + 1].get())})"
        )
    if end_bad:
        raise MatrixError(
            f"matrix: last row offset is {int(indptr[-1].get())} but there are {nnz} column indices"
        )
    if nnz and (lo < 0 or hi >= cols):
        bad = (indices < 0) | (indices >= cols)
        entry = int(cupy.flatnonzero(bad)[0].get())
        at = cupy.asarray([entry], dtype=indptr.dtype)
        row = int(cupy.searchsorted(indptr, at, side="right")[0].get()) - 1
        raise MatrixError(
            f"matrix: row {row} has column index {int(indices[entry].get())}, "
            f"outside 0..{cols - 1}"
        )


def to_device_vector(x: Any, dtype: np.dtype[Any], cols: int, *, name: str = "x") -> Any:
    """``x`` (NumPy or CuPy) as a contiguous CuPy vector of ``dtype``; shape checked first."""
    shape = tuple(getattr(x, "shape", np.shape(x)))
    if shape != (cols,) and not (len(shape) == 2 and shape in ((cols, 1),)):
        raise MatrixError(
            f"{name} has shape {shape} but the matrix has {cols} columns (expected ({cols},))"
        )
    cupy = cupy_module()
    vec = cupy.asarray(x).reshape(cols)
    return cupy.ascontiguousarray(vec.astype(dtype, copy=False))


# --------------------------------------------------------------------------------------------
# Every other layout: host layout -> packed kernel arguments -> device


@dataclass(frozen=True)
class Packed:
    """A host layout as kernel arguments: arrays and scalars by registry name (any integer
    dtype: they are cast to the declared types on upload) and what the schedule binds to."""

    arrays: Mapping[str, np.ndarray[Any, Any]]
    scalars: Mapping[str, int]
    tiles: MatrixShape  # rows = tiles, nnz = atoms, max_row = most atoms in a tile


# (host layout, its option) -> Packed
Packer = Callable[[Any, "str | None"], Packed]
_PACKERS: dict[str, Packer] = {}


def register_packer(name: str, packer: Packer, *, replace: bool = False) -> None:
    """Make layout ``name`` runnable: ``packer(host_layout, option)`` returns its :class:`Packed`
    arguments; the host layout comes from ``teaal_loops.matrix.layouts.convert(A, name)``."""
    key = name.strip().lower()
    if key in _PACKERS and not replace:
        raise LayoutError(f"layout {key!r} already has a runtime packer (pass replace=True)")
    _PACKERS[key] = packer


def _max_tile(tile_ptr: np.ndarray[Any, Any]) -> int:
    return int(np.diff(tile_ptr).max()) if len(tile_ptr) > 1 else 0


def _need(condition: bool, layout: str, what: str) -> None:
    if not condition:
        raise MatrixError(f"{layout} matrix: {what}")


def _check_ptr(ptr: np.ndarray[Any, Any], count: int, atoms: int, layout: str, of: str) -> None:
    _need(len(ptr) == count + 1, layout, f"{len(ptr)} {of} offsets, expected {count + 1}")
    _need(len(ptr) == 0 or int(ptr[0]) == 0, layout, f"{of} offsets do not start at 0")
    _need(bool(np.all(np.diff(ptr) >= 0)), layout, f"{of} offsets decrease")
    _need(len(ptr) == 0 or int(ptr[-1]) == atoms, layout, f"last {of} offset is not {atoms}")


def _in_range(values: np.ndarray[Any, Any], lo: int, hi: int) -> bool:
    return len(values) == 0 or (int(values.min()) >= lo and int(values.max()) < hi)


def _pack_csc(csc: Any, option: str | None) -> Packed:
    rows, cols = csc.shape
    _check_ptr(csc.indptr, cols, len(csc.indices), "csc", "column")
    _need(_in_range(csc.indices, 0, rows), "csc", "a row index lies outside the matrix")
    tiles = MatrixShape(rows=cols, cols=cols, nnz=len(csc.indices), max_row=_max_tile(csc.indptr))
    return Packed({"indptr": csc.indptr, "indices": csc.indices, "values": csc.data}, {}, tiles)


def _pack_coo(coo: Any, option: str | None) -> Packed:
    rows, cols = coo.shape
    _need(len(coo.row) == len(coo.col) == len(coo.data), "coo", "row, col, data lengths differ")
    _need(bool(np.all(np.diff(coo.row) >= 0)), "coo", "entries are not sorted by row")
    _need(_in_range(coo.row, 0, rows), "coo", "a row index lies outside the matrix")
    _need(_in_range(coo.col, 0, cols), "coo", "a column index lies outside the matrix")
    nnz = len(coo.row)
    counts = np.bincount(np.asarray(coo.row, dtype=np.int64), minlength=rows) if rows else [0]
    tiles = MatrixShape(rows=rows, cols=cols, nnz=nnz, max_row=int(np.max(counts)))
    return Packed({"row_ids": coo.row, "col_ids": coo.col, "values": coo.data}, {}, tiles)


def _pack_ell(ell: Any, option: str | None) -> Packed:
    rows, cols = ell.shape
    width = int(ell.width)
    _need(len(ell.columns) == rows * width == len(ell.values), "ell", "arrays are not rows*width")
    columns = ell.columns if ell.order == "col" else ell.grid(ell.columns).T.ravel()
    values = ell.values if ell.order == "col" else ell.grid(ell.values).T.ravel()
    _need(_in_range(columns, -1, cols), "ell", "a column index lies outside the matrix")
    tiles = MatrixShape(rows=rows, cols=cols, nnz=rows * width, max_row=width)
    scalars = {"width": width, "nnz": rows * width}
    return Packed({"columns": columns, "values": values}, scalars, tiles)


def _pack_dia(dia: Any, option: str | None) -> Packed:
    rows, cols = dia.shape
    ndiag = len(dia.offsets)
    _need(dia.data.shape == (ndiag, rows), "dia", f"data has shape {dia.data.shape}")
    _need(bool(np.all(np.diff(dia.offsets) > 0)), "dia", "offsets are not ascending")
    _need(_in_range(dia.offsets, -rows, cols), "dia", "a diagonal lies outside the matrix")
    tiles = MatrixShape(rows=rows, cols=cols, nnz=rows * ndiag, max_row=ndiag)
    scalars = {"ndiag": ndiag, "nnz": rows * ndiag}
    return Packed({"offsets": dia.offsets, "values": dia.data.ravel()}, scalars, tiles)


def _pack_bcsr(bcsr: Any, option: str | None) -> Packed:
    from teaal_loops.ir.layouts import bcsr_block_shape

    R, C = bcsr_block_shape(option)
    rows, cols = bcsr.shape
    _need(
        (bcsr.block_rows, bcsr.block_cols) == (R, C),
        "bcsr",
        f"blocks are {bcsr.block_rows}x{bcsr.block_cols}, the kernel's {R}x{C}",
    )
    nblocks = len(bcsr.indices)
    block_rows = -(-rows // R)
    _check_ptr(bcsr.indptr, block_rows, nblocks, "bcsr", "block-row")
    _need(_in_range(bcsr.indices, 0, -(-cols // C)), "bcsr", "a block column lies outside")
    _need(bcsr.blocks.shape == (nblocks, R, C), "bcsr", f"blocks have shape {bcsr.blocks.shape}")
    tiles = MatrixShape(rows=block_rows, cols=cols, nnz=nblocks, max_row=_max_tile(bcsr.indptr))
    arrays = {"indptr": bcsr.indptr, "indices": bcsr.indices, "blocks": bcsr.blocks.ravel()}
    return Packed(arrays, {"nnz": nblocks}, tiles)


for _name, _packer in (
    ("csc", _pack_csc),
    ("coo", _pack_coo),
    ("ell", _pack_ell),
    ("dia", _pack_dia),
    ("bcsr", _pack_bcsr),
):
    register_packer(_name, _packer)


def _host_options(name: str, option: str | None) -> dict[str, Any]:
    """Options of ``matrix.layouts.convert`` that a layout name carries (bcsr's block)."""
    if name == "bcsr":
        from teaal_loops.ir.layouts import bcsr_block_shape

        return {"block": bcsr_block_shape(option)}
    return {}


@dataclass(frozen=True)
class HostArguments:
    """A layout's kernel arguments on the host, cast to the kernel's types (what is uploaded)."""

    layout: str
    shape: MatrixShape  # the matrix
    tiles: MatrixShape  # what the schedule binds to
    arrays: dict[str, np.ndarray[Any, Any]]
    scalars: dict[str, int]
    index_bits: int

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.arrays.values())


def host_arguments(
    layout: str, A: Any, dtype: np.dtype[Any], index_bits: int | None = None
) -> HostArguments:
    """Build ``layout`` from ``A`` on the host (or take ``A`` if it already is that host
    layout), pack it and cast every array to the type its registry entry declares."""
    from teaal_loops.codegen.registry import layout_entry
    from teaal_loops.ir.views import host_layout

    name, _, option_text = layout.partition(":")
    name = name.strip().lower()
    option = option_text.strip() or None
    packer = _PACKERS.get(name)
    if packer is None:
        raise LayoutError(
            f"layout {layout!r} has no runtime converter (supported: "
            f"{', '.join(['csr', *_PACKERS])})"
        )
    host = host_layout(A, name, **_host_options(name, option))
    packed = packer(host, option)
    rows, cols = (int(n) for n in host.shape)
    tiles = packed.tiles
    bits = _choose_bits(tiles.rows, tiles.nnz, index_bits)
    offset = np.dtype(np.int64 if bits == 64 else np.int32)
    types: dict[str, np.dtype[Any]] = {
        "offset_t": offset, "index_t": np.dtype(np.int32), "value_t": np.dtype(dtype)
    }
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    scalars: dict[str, int] = {}
    for p in layout_entry(name).params:
        if not p.is_pointer:
            if p.name in packed.scalars:
                scalars[p.name] = int(packed.scalars[p.name])
            continue
        source = np.asarray(packed.arrays[p.name])
        target = types.get(p.scalar_type, source.dtype)
        if target.kind == "i" and source.size and (
            int(source.max()) > np.iinfo(target).max or int(source.min()) < np.iinfo(target).min
        ):
            raise LayoutError(f"{layout}: {p.name} does not fit {p.scalar_type} ({target})")
        arrays[p.name] = np.ascontiguousarray(source, dtype=target)
    shape = MatrixShape(rows=rows, cols=cols, nnz=int(host.nnz), max_row=tiles.max_row)
    return HostArguments(layout, shape, tiles, arrays, scalars, bits)


def to_device_layout(
    layout: str, A: Any, dtype: np.dtype[Any], index_bits: int | None = None
) -> DeviceMatrix:
    """``A`` (any matrix, or a host layout of that name) in ``layout``, on the GPU. Refuses
    (DeviceError, SKIP_TOO_LARGE) a layout that does not fit in free device memory."""
    from teaal_loops.matrix.layouts import check_fits_device

    host = host_arguments(layout, A, dtype, index_bits)
    cupy = cupy_module()
    check_fits_device(host.nbytes, free_device_bytes(), what=f"the {layout} layout of this matrix")
    arrays = {name: cupy.asarray(a) for name, a in host.arrays.items()}
    return DeviceMatrix(
        layout, host.shape, arrays, np.dtype(dtype), host.index_bits, host.tiles, host.scalars
    )


def converter(layout: str) -> Callable[..., DeviceMatrix]:
    """``convert(A, dtype, index_bits=None) -> DeviceMatrix`` for a layout name."""
    name = layout.split(":", 1)[0].strip().lower()
    if name == "csr":
        return to_device_csr
    if name not in _PACKERS:
        raise LayoutError(
            f"layout {layout!r} has no runtime converter (supported: "
            f"{', '.join(['csr', *_PACKERS])})"
        )
    return functools.partial(to_device_layout, layout)


CONVERTERS = {"csr": to_device_csr}  # the direct paths; other layouts go through packers
