"""Matrices on the device in a layout's kernel-argument form.

A layout whose kernel arguments are CSR's (``direct_csr``) has a direct path: host inputs
(SciPy, NumPy) are validated on the host before upload; device inputs (cupyx.scipy.sparse,
CuPy) are validated on the GPU with a few reductions and a single host synchronisation. Every
other layout is built on the host by :func:`teaal_loops.layouts.convert` (device inputs are
copied to the host first; a padded layout over the documented limit is refused there with
loops' SKIP_TOO_LARGE), packed into its kernel arguments by the layout definition's packer,
cast to the types its parameters declare and uploaded, after checking that it fits in free
device memory. A host layout built by the user (``convert(A, "ell", padding_limit=None)``) is
accepted as is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from teaal_loops.errors import DeviceError, LayoutError, MatrixError
from teaal_loops.layouts import (
    DEVICE_BUILD_BYTES_PER_NONZERO,
    build_options,
    check_fits_device,
    get_layout,
    host_layout,
    split_name,
    tile_shape,
)
from teaal_loops.matrix import validate_csr
from teaal_loops.matrix.csr_arrays import CsrArrays
from teaal_loops.runtime.backend import cupy_module, free_device_bytes
from teaal_loops.types import MatrixShape
from teaal_loops.types import index_bits as needed_bits


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


def to_device_csr(
    A: Any, dtype: np.dtype[Any], index_bits: int | None = None, *, layout: str
) -> DeviceMatrix:
    """Any supported matrix -> CSR arrays on the GPU with the kernel's dtypes, for a layout
    whose kernel arguments are CSR's (``direct_csr``) named ``layout``.

    ``index_bits`` None picks 32 or 64 from the size (nnz or rows + nnz over 2^31 - 1).
    """
    if isinstance(A, CsrArrays):  # arrays made where they are used: taken as they are
        if is_device_object(A.indptr):
            return _device_arrays(A.indptr, A.indices, A.data, A.shape, dtype, index_bits,
                                  layout)
        return _host_input(A.to_scipy(), dtype, index_bits, layout)
    if is_device_object(A):
        return _device_input(A, dtype, index_bits, layout)
    return _host_input(A, dtype, index_bits, layout)


def _choose_bits(rows: int, nnz: int, index_bits: int | None) -> int:
    need = needed_bits(rows, nnz)
    if index_bits is None:
        return need
    if index_bits < need:
        raise LayoutError(
            f"a matrix with {rows} rows and {nnz} nonzeros needs 64-bit offsets, "
            f"but {index_bits}-bit was requested"
        )
    return index_bits


def _host_input(
    A: Any, dtype: np.dtype[Any], index_bits: int | None, layout: str
) -> DeviceMatrix:
    import scipy.sparse as sp

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
    return DeviceMatrix(layout, shape, arrays, np.dtype(dtype), bits)


def _max_row_host(indptr: np.ndarray[Any, Any]) -> int:
    return int(np.diff(indptr).max()) if len(indptr) > 1 else 0


def _device_input(
    A: Any, dtype: np.dtype[Any], index_bits: int | None, layout: str
) -> DeviceMatrix:
    cupy = cupy_module()
    import cupyx.scipy.sparse as csp

    if csp.issparse(A):
        csr = A if A.format == "csr" else A.tocsr()
    else:
        dense = cupy.asarray(A)
        if dense.ndim != 2:
            raise MatrixError(f"expected a 2-D matrix, got an array of shape {dense.shape}")
        csr = csp.csr_matrix(dense.astype(dtype, copy=False))
    return _device_arrays(csr.indptr, csr.indices, csr.data, csr.shape, dtype, index_bits,
                          layout)


def _device_arrays(
    indptr: Any, indices: Any, data: Any, shape: tuple[int, int], dtype: np.dtype[Any],
    index_bits: int | None, layout: str,
) -> DeviceMatrix:
    """CSR arrays already on the GPU: validated there, converted only where the kernel's
    types differ (so a shard made in them is not copied)."""
    cupy = cupy_module()
    rows, cols = (int(n) for n in shape[:2])
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
    bound = MatrixShape(rows=rows, cols=cols, nnz=nnz, max_row=max_row)
    return DeviceMatrix(layout, bound, arrays, np.dtype(dtype), bits)


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
    """``x`` (NumPy or CuPy, shape ``(cols,)`` or ``(cols, 1)``, any strides) as a contiguous
    CuPy vector of ``dtype``; shape and kind checked first (complex values are refused rather
    than silently losing their imaginary parts)."""
    shape = tuple(getattr(x, "shape", np.shape(x)))
    if shape != (cols,) and shape != (cols, 1):
        raise MatrixError(
            f"{name} has shape {shape} but the matrix has {cols} columns (expected ({cols},))"
        )
    kind = getattr(getattr(x, "dtype", None), "kind", None) or np.asarray(x).dtype.kind
    if kind not in "biuf":
        raise MatrixError(f"{name} holds {_kind_name(kind)} values; expected real numbers")
    cupy = cupy_module()
    vec = cupy.asarray(x).reshape(cols)
    return cupy.ascontiguousarray(vec.astype(dtype, copy=False))


def _kind_name(kind: str) -> str:
    return {"c": "complex", "O": "Python object", "U": "string", "S": "byte string"}.get(
        kind, f"non-numeric ({kind})"
    )


def check_device_vector(cupy: Any, v: Any, dtype: np.dtype[Any], size: int, name: str) -> Any:
    """``v`` itself if it is a contiguous CuPy vector of ``dtype`` and ``size`` elements (a
    kernel is handed its raw address), else a one-line MatrixError saying what it is."""
    if not isinstance(v, cupy.ndarray):
        raise MatrixError(
            f"{name} must be a CuPy array (the kernel writes and reads device memory), "
            f"got {type(v).__name__}"
        )
    if v.dtype != dtype or v.shape != (size,) or not v.flags.c_contiguous:
        layout = "contiguous" if v.flags.c_contiguous else "non-contiguous"
        raise MatrixError(
            f"{name} must be a contiguous {dtype.name} vector of {size} elements, got a "
            f"{layout} {v.dtype} array of shape {tuple(v.shape)}"
        )
    return v


# --------------------------------------------------------------------------------------------
# Every other layout: host layout -> packed kernel arguments -> device


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


def kernel_types(bits: int, dtype: np.dtype[Any]) -> dict[str, np.dtype[Any]]:
    """The array type of each kernel scalar type a layout may declare, for offsets of ``bits``
    bits (C's ``int``: 32 bits on every CUDA target)."""
    return {"offset_t": np.dtype(np.int64 if bits == 64 else np.int32),
            "index_t": np.dtype(np.int32), "value_t": np.dtype(dtype), "int": np.dtype(np.int32)}


def host_arguments(
    layout: str,
    A: Any,
    dtype: np.dtype[Any],
    index_bits: int | None = None,
    build: Mapping[str, Any] | None = None,
) -> HostArguments:
    """Build ``layout`` from ``A`` on the host (or take ``A`` if it already is that host
    layout), pack it and cast every array to the type its kernel parameter declares.
    ``build`` adds options of the layout's builder (``padding_limit``)."""
    definition = get_layout(layout)
    _, option = split_name(layout)
    host = host_layout(A, layout, **{**build_options(layout), **(build or {})})
    packed = definition.pack(host, option)
    rows, cols = (int(n) for n in host.shape)
    tiles = tile_shape(host.tile_ptr(), cols)
    bits = _choose_bits(tiles.rows, tiles.nnz, index_bits)
    types = kernel_types(bits, dtype)
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    scalars: dict[str, int] = {}
    for p in definition.params:
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
    layout: str,
    A: Any,
    dtype: np.dtype[Any],
    index_bits: int | None = None,
    build: Mapping[str, Any] | None = None,
) -> DeviceMatrix:
    """``A`` (any matrix, or a host layout of that name) in ``layout``, on the GPU. Refuses
    (DeviceError, SKIP_TOO_LARGE) a layout that does not fit in free device memory."""
    host = host_arguments(layout, A, dtype, index_bits, build)
    cupy = cupy_module()
    check_fits_device(host.nbytes, free_device_bytes(), what=f"the {layout} layout of this matrix")
    arrays = {name: cupy.asarray(a) for name, a in host.arrays.items()}
    return DeviceMatrix(
        layout, host.shape, arrays, np.dtype(dtype), host.index_bits, host.tiles, host.scalars
    )


def converter(layout: str, build: Mapping[str, Any] | None = None) -> Callable[..., DeviceMatrix]:
    """``convert(A, dtype, index_bits=None) -> DeviceMatrix`` for a layout name."""
    definition = get_layout(layout)
    if definition.direct_csr:
        return functools.partial(to_device_csr, layout=definition.name)
    if definition.device_build is not None:
        return functools.partial(_device_or_host_layout, layout, build=dict(build or {}))
    return functools.partial(to_device_layout, layout, build=dict(build or {}))


def _on_device(A: Any) -> bool:
    return is_device_object(A.indptr) if isinstance(A, CsrArrays) else is_device_object(A)


def _device_or_host_layout(
    layout: str,
    A: Any,
    dtype: np.dtype[Any],
    index_bits: int | None = None,
    build: Mapping[str, Any] | None = None,
) -> DeviceMatrix:
    """A layout with a device builder: device inputs are validated as CSR on the GPU and
    rebuilt there; host inputs take the host builder."""
    if not _on_device(A):
        return to_device_layout(layout, A, dtype, index_bits, build)
    definition = get_layout(layout)
    assert definition.device_build is not None
    _, option = split_name(layout)
    csr = to_device_csr(A, dtype, 64, layout=layout)  # validated as CSR; 64-bit offsets
    cupy = cupy_module()
    rows, cols, nnz = csr.shape.rows, csr.shape.cols, csr.shape.nnz
    ensure_fits(DEVICE_BUILD_BYTES_PER_NONZERO * nnz,
                f"building the {layout} layout of a matrix of {nnz} nonzeros")
    built = definition.device_build(
        cupy, csr.arrays["indptr"], csr.arrays["indices"], csr.arrays["values"],
        (rows, cols), option,
    )
    del csr
    tile_ptr = built["indptr"]
    tiles = len(tile_ptr) - 1
    max_tile = int(cupy.diff(tile_ptr).max().get()) if tiles else 0
    bits = _choose_bits(tiles, nnz, index_bits)
    types = kernel_types(bits, dtype)
    arrays = {
        p.name: cupy.ascontiguousarray(built[p.name].astype(types[p.scalar_type], copy=False))
        for p in definition.params if p.is_pointer
    }
    # scalars beyond rows, cols and nnz that the builder counted (heavy: H and P)
    scalars = {p.name: int(built[p.name]) for p in definition.params
               if not p.is_pointer and p.name in built}
    shape = MatrixShape(rows=rows, cols=cols, nnz=nnz, max_row=max_tile)
    tiles_shape = MatrixShape(rows=tiles, cols=cols, nnz=nnz, max_row=max_tile)
    return DeviceMatrix(layout, shape, arrays, np.dtype(dtype), bits, tiles_shape, scalars)
