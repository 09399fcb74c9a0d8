"""cuSPARSE's generic API as Python reaches it: constants, two bindings behind one interface,
and descriptors made once and destroyed with their owner.

Two bindings call the same C library:

``cupy``
    CuPy's low-level binding ``cupy_backends.cuda.libs.cusparse`` (installed with CuPy) on
    CuPy's per-device cuSPARSE handle. It has ``spMV``, ``spMM``, their buffer sizes and
    ``dnVecSetValues`` / ``dnMatSetValues`` / ``spMatSetValues``, but (CuPy 14) neither
    ``cusparseSpMV_preprocess`` / ``cusparseSpMM_preprocess`` nor ``cusparseSDDMM``. Each of its
    compute calls first points the handle at CuPy's current stream.
``nvmath``
    nvmath-python's ``nvmath.bindings.cusparse`` (an optional extra, ``pip install
    nvmath-python``) on a handle of its own: every cuSPARSE entry point, preprocessing and
    SDDMM included. Its handle is pointed at CuPy's current stream before each call whose
    stream differs from the last one.

Descriptors of one binding are used with that binding only (each may load its own copy of the
library). The enum values below are cuSPARSE's (``cusparse.h`` of CUDA 12 and 13): CuPy's
``.pxd`` still names the CUDA 10 spellings, so they are written out here.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from teaal_loops.errors import TeaalLoopsError

CUDA_R_32F, CUDA_R_64F = 0, 1  # cudaDataType_t
INDEX_32I, INDEX_64I = 2, 3  # cusparseIndexType_t
INDEX_BASE_ZERO = 0
OP_N, OP_T = 0, 1  # cusparseOperation_t: non-transpose, transpose
ORDER_COL, ORDER_ROW = 1, 2  # cusparseOrder_t
SPMV_ALGS = {"DEFAULT": 0, "CSR_ALG1": 2, "CSR_ALG2": 3}  # cusparseSpMVAlg_t
SPMM_ALGS = {"DEFAULT": 0, "CSR_ALG1": 4, "CSR_ALG2": 6, "CSR_ALG3": 12}  # cusparseSpMMAlg_t
SDDMM_ALG_DEFAULT = 0  # cusparseSDDMMAlg_t has one value
BINDINGS = ("cupy", "nvmath")


class CusparseBaselineError(TeaalLoopsError):
    """A baseline that cannot be built or run as asked (bad input, missing library)."""


@dataclass(frozen=True)
class Availability:
    """Whether something can run here; ``reason`` is one line when it cannot."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class Algorithm:
    """One way to run a baseline: a cuSPARSE algorithm through one binding, preprocessed or
    not. ``label`` is unique within a baseline and names all three."""

    label: str
    binding: str
    code: int
    preprocess: bool = False
    layout: str = "row"  # SDDMM: how the dense operands are described (see sddmm.py)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def value_type(dtype: Any) -> int:
    """cudaDataType_t of float32 / float64; anything else is a one-line error."""
    name = np.dtype(dtype).name
    if name == "float32":
        return CUDA_R_32F
    if name == "float64":
        return CUDA_R_64F
    raise CusparseBaselineError(f"cuSPARSE baselines run float32 or float64, not {name}")


def index_type(dtype: Any) -> int:
    name = np.dtype(dtype).name
    if name == "int32":
        return INDEX_32I
    if name == "int64":
        return INDEX_64I
    raise CusparseBaselineError(f"CSR index arrays must be int32 or int64, not {name}")


# --------------------------------------------------------------------------------------------
# availability


def cupy_binding_available() -> Availability:
    """CuPy with a device and its cuSPARSE binding with the generic SpMV/SpMM entry points."""
    try:
        import cupy
    except Exception as exc:
        return Availability(False, f"CuPy is not importable ({first_line(exc)})")
    try:
        if int(cupy.cuda.runtime.getDeviceCount()) < 1:
            return Availability(False, "no CUDA device")
        from cupy_backends.cuda.libs import cusparse as lib
    except Exception as exc:
        return Availability(False, f"CuPy's cuSPARSE binding is not usable ({first_line(exc)})")
    missing = [n for n in ("spMV", "spMM", "createCsr", "createDnMat", "dnVecSetValues")
               if not hasattr(lib, n)]
    if missing:
        return Availability(False, f"CuPy's cuSPARSE binding lacks {', '.join(missing)}")
    return Availability(True)


def nvmath_available() -> Availability:
    """nvmath-python's cuSPARSE binding, importable and able to load libcusparse."""
    try:
        from nvmath.bindings import cusparse as nv
    except Exception as exc:
        return Availability(False, f"nvmath-python is not importable ({first_line(exc)})")
    try:
        nv.get_version(nvmath_handle())
    except Exception as exc:
        return Availability(False, f"nvmath-python cannot use cuSPARSE ({first_line(exc)})")
    return Availability(True)


def cupy_sddmm_entry_points() -> list[str]:
    """Names in CuPy's cuSPARSE binding that look like SDDMM (none in CuPy 14)."""
    try:
        from cupy_backends.cuda.libs import cusparse as lib
    except Exception:
        return []
    return sorted(n for n in dir(lib) if "sddmm" in n.lower())


_NVMATH_HANDLES: dict[int, int] = {}


def nvmath_handle() -> int:
    """One nvmath cuSPARSE handle per device, kept for the process (handles are cheap and a
    baseline may outlive any object that would own one)."""
    import cupy
    from nvmath.bindings import cusparse as nv

    device = int(cupy.cuda.runtime.getDevice())
    if device not in _NVMATH_HANDLES:
        _NVMATH_HANDLES[device] = int(nv.create())
    return _NVMATH_HANDLES[device]


# --------------------------------------------------------------------------------------------
# bindings


class Binding:
    """The generic-API calls the baselines make, on one handle. Subclasses map them to a
    binding's function names; a call the binding lacks raises :class:`CusparseBaselineError`."""

    name = ""
    preprocess = False  # SpMV/SpMM/SDDMM preprocessing available
    tracks_stream = False  # set_stream must be called before each compute call
    sddmm_available = False

    def __init__(self, lib: Any, handle: int) -> None:
        self.lib = lib
        self.handle = handle

    def set_stream(self, stream_ptr: int) -> None:
        """Point the handle at ``stream_ptr`` (no-op where each call does it itself)."""

    def _call(self, name: str, *args: Any) -> Any:
        fn = getattr(self.lib, name, None)
        if fn is None:
            raise CusparseBaselineError(f"the {self.name} cuSPARSE binding has no {name}")
        return fn(*args)


class CupyBinding(Binding):
    name = "cupy"

    def __init__(self) -> None:
        import cupy
        from cupy_backends.cuda.libs import cusparse as lib

        super().__init__(lib, int(cupy.cuda.device.get_cusparse_handle()))

    def csr(self, *args: Any) -> int:
        return int(self.lib.createCsr(*args))

    def dn_vec(self, size: int, ptr: int, vtype: int) -> int:
        return int(self.lib.createDnVec(size, ptr, vtype))

    def dn_mat(self, rows: int, cols: int, ld: int, ptr: int, vtype: int, order: int) -> int:
        return int(self.lib.createDnMat(rows, cols, ld, ptr, vtype, order))

    def set_vec(self, desc: int, ptr: int) -> None:
        self.lib.dnVecSetValues(desc, ptr)

    def set_mat(self, desc: int, ptr: int) -> None:
        self.lib.dnMatSetValues(desc, ptr)

    def set_sp_values(self, desc: int, ptr: int) -> None:
        self.lib.spMatSetValues(desc, ptr)

    def destroyer(self, kind: str) -> Callable[[int], None]:
        return {"sp": self.lib.destroySpMat, "vec": self.lib.destroyDnVec,
                "mat": self.lib.destroyDnMat}[kind]  # type: ignore[no-any-return]

    def spmv_buffer_size(self, *args: Any) -> int:
        return int(self.lib.spMV_bufferSize(self.handle, *args))

    def spmv(self, *args: Any) -> None:
        self.lib.spMV(self.handle, *args)

    def spmm_buffer_size(self, *args: Any) -> int:
        return int(self.lib.spMM_bufferSize(self.handle, *args))

    def spmm(self, *args: Any) -> None:
        self.lib.spMM(self.handle, *args)

    def spmv_preprocess(self, *args: Any) -> None:
        self._call("spMV_preprocess", self.handle, *args)

    def spmm_preprocess(self, *args: Any) -> None:
        self._call("spMM_preprocess", self.handle, *args)

    def sddmm_buffer_size(self, *args: Any) -> int:
        raise CusparseBaselineError("CuPy's cuSPARSE binding has no SDDMM")

    def sddmm(self, *args: Any) -> None:
        raise CusparseBaselineError("CuPy's cuSPARSE binding has no SDDMM")

    def sddmm_preprocess(self, *args: Any) -> None:
        raise CusparseBaselineError("CuPy's cuSPARSE binding has no SDDMM")


class NvmathBinding(Binding):
    name = "nvmath"
    preprocess = True
    tracks_stream = True
    sddmm_available = True

    def __init__(self) -> None:
        from nvmath.bindings import cusparse as nv

        super().__init__(nv, nvmath_handle())
        self._stream: int | None = None

    def set_stream(self, stream_ptr: int) -> None:
        if stream_ptr != self._stream:
            self.lib.set_stream(self.handle, stream_ptr)
            self._stream = stream_ptr

    def csr(self, *args: Any) -> int:
        return int(self.lib.create_csr(*args))

    def dn_vec(self, size: int, ptr: int, vtype: int) -> int:
        return int(self.lib.create_dn_vec(size, ptr, vtype))

    def dn_mat(self, rows: int, cols: int, ld: int, ptr: int, vtype: int, order: int) -> int:
        return int(self.lib.create_dn_mat(rows, cols, ld, ptr, vtype, order))

    def set_vec(self, desc: int, ptr: int) -> None:
        self.lib.dn_vec_set_values(desc, ptr)

    def set_mat(self, desc: int, ptr: int) -> None:
        self.lib.dn_mat_set_values(desc, ptr)

    def set_sp_values(self, desc: int, ptr: int) -> None:
        self.lib.sp_mat_set_values(desc, ptr)

    def destroyer(self, kind: str) -> Callable[[int], None]:
        return {"sp": self.lib.destroy_sp_mat, "vec": self.lib.destroy_dn_vec,
                "mat": self.lib.destroy_dn_mat}[kind]  # type: ignore[no-any-return]

    def spmv_buffer_size(self, *args: Any) -> int:
        return int(self.lib.sp_mv_buffer_size(self.handle, *args))

    def spmv(self, *args: Any) -> None:
        self.lib.sp_mv(self.handle, *args)

    def spmv_preprocess(self, *args: Any) -> None:
        self.lib.sp_mv_preprocess(self.handle, *args)

    def spmm_buffer_size(self, *args: Any) -> int:
        return int(self.lib.sp_mm_buffer_size(self.handle, *args))

    def spmm(self, *args: Any) -> None:
        self.lib.sp_mm(self.handle, *args)

    def spmm_preprocess(self, *args: Any) -> None:
        self.lib.sp_mm_preprocess(self.handle, *args)

    def sddmm_buffer_size(self, *args: Any) -> int:
        # nvmath 1.0 takes the address of a host size_t here instead of returning the size
        out = np.zeros(1, dtype=np.uint64)
        got = self.lib.sddmm_buffer_size(self.handle, *args, out.ctypes.data)
        return int(got) if isinstance(got, int) else int(out[0])

    def sddmm(self, *args: Any) -> None:
        self.lib.sddmm(self.handle, *args)

    def sddmm_preprocess(self, *args: Any) -> None:
        self.lib.sddmm_preprocess(self.handle, *args)


_BINDINGS: dict[str, Callable[[], Any]] = {"cupy": CupyBinding, "nvmath": NvmathBinding}
_INSTANCES: dict[tuple[str, int], Any] = {}


def binding(name: str) -> Any:
    """The binding ``name`` (``cupy`` or ``nvmath``) on the current device, one instance per
    process and device: baselines share its handle, so they must share what it remembers of
    the handle's stream too. A missing binding is a one-line error."""
    if name not in _BINDINGS:
        raise CusparseBaselineError(f"unknown cuSPARSE binding {name!r} (valid: cupy, nvmath)")
    check = cupy_binding_available() if name == "cupy" else nvmath_available()
    if not check:
        raise CusparseBaselineError(check.reason)
    import cupy

    key = (name, int(cupy.cuda.runtime.getDevice()))
    if key not in _INSTANCES:
        _INSTANCES[key] = _BINDINGS[name]()
    return _INSTANCES[key]


# --------------------------------------------------------------------------------------------
# descriptor lifetime


def _destroy_all(owned: list[tuple[Callable[[int], None], int]]) -> None:
    for destroy, desc in reversed(owned):
        try:
            destroy(desc)
        except Exception:  # at interpreter exit the library may be gone: nothing to free
            pass
    owned.clear()


class Descriptors:
    """The descriptors one baseline made through one binding, destroyed when it is collected
    (or at :meth:`close`)."""

    def __init__(self, bind: Any) -> None:
        self.binding = bind
        self._owned: list[tuple[Callable[[int], None], int]] = []
        self._finalizer = weakref.finalize(self, _destroy_all, self._owned)

    def own(self, kind: str, desc: int) -> int:
        self._owned.append((self.binding.destroyer(kind), desc))
        return desc

    def csr(self, A: Any, values: Any = None) -> int:
        """A CSR descriptor over a cupyx ``csr_matrix``'s own arrays (its values, or
        ``values``: an array of the same size and dtype, e.g. an SDDMM's output)."""
        rows, cols = A.shape
        values = A.data if values is None else values
        return self.own("sp", self.binding.csr(
            rows, cols, int(A.nnz), A.indptr.data.ptr, A.indices.data.ptr, values.data.ptr,
            index_type(A.indptr.dtype), index_type(A.indices.dtype), INDEX_BASE_ZERO,
            value_type(values.dtype)))

    def vec(self, v: Any) -> int:
        return self.own("vec", self.binding.dn_vec(v.size, v.data.ptr, value_type(v.dtype)))

    def row_major(self, M: Any) -> int:
        """A dense descriptor of a C-ordered 2-D array as the row-major matrix it is."""
        rows, cols = M.shape
        return self.own("mat", self.binding.dn_mat(rows, cols, cols, M.data.ptr,
                                                   value_type(M.dtype), ORDER_ROW))

    def col_major_view(self, M: Any) -> int:
        """The same memory as a column-major ``cols x rows`` matrix (its transpose)."""
        rows, cols = M.shape
        return self.own("mat", self.binding.dn_mat(cols, rows, cols, M.data.ptr,
                                                   value_type(M.dtype), ORDER_COL))

    def close(self) -> None:
        self._finalizer()
