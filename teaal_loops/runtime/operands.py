"""The dense operands of SpMM and SDDMM kernels: checks, strides, outputs, launch arguments.

SpMV keeps its lean path in :mod:`teaal_loops.runtime.kernel`. The other forms
(:mod:`teaal_loops.ir.einsum`) take dense matrices:

* SpMM ``Z = A @ B``: ``B`` of shape ``(cols, N)``; ``Z`` comes back ``(rows, N)``;
* SDDMM ``Z = C * (A @ B)`` sampled at ``C``'s nonzeros: ``A`` of shape ``(rows, K)``, ``B``
  of shape ``(K, cols)``; ``Z`` comes back as a sparse matrix with ``C``'s pattern.

Dense inputs are read through their strides, so C-ordered (row-major) and Fortran-ordered
CuPy arrays and transposed views are used as they are, without a copy; row-major is the order
the fast mappings are written for (neighbouring threads read neighbouring elements of a row).
NumPy arrays (and other array-likes) are uploaded, and other real dtypes converted to the
kernel's, once per call. Shapes, dtypes and sizes are checked before any launch, each error
naming the operand by its name in the spec.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from teaal_loops.errors import MatrixError
from teaal_loops.ir.model import Schedule

MAX_DENSE_ELEMENTS = 1 << 40  # refused before asking the device for memory


@dataclass(frozen=True)
class DenseCall:
    """One call's dense operands, checked: the device arrays and the dense rank's size."""

    arrays: tuple[Any, ...]
    size: int  # D: SpMM's N, SDDMM's K


def _kind_name(kind: str) -> str:
    return {"c": "complex", "O": "Python object", "U": "string", "S": "byte string",
            "b": "boolean"}.get(kind, f"non-numeric ({kind})")


def device_dense(
    cupy: Any, value: Any, dtype: np.dtype[Any], shape: tuple[int | None, int | None], name: str
) -> Any:
    """``value`` as a 2-D CuPy array of ``dtype`` (a view when it already is one); ``shape``
    entries that are None are free (the dense rank's size, read from the operand)."""
    got = tuple(int(n) for n in getattr(value, "shape", np.shape(value)))
    if len(got) != 2 or any(w is not None and w != g for w, g in zip(shape, got, strict=True)):
        want = ", ".join("any" if w is None else str(w) for w in shape)
        raise MatrixError(f"operand {name} has shape {got}; expected ({want})")
    if got[0] * got[1] > MAX_DENSE_ELEMENTS:
        raise MatrixError(f"operand {name} of shape {got} is too large")
    kind = getattr(getattr(value, "dtype", None), "kind", None) or np.asarray(value).dtype.kind
    if kind not in "iuf":
        raise MatrixError(f"operand {name} holds {_kind_name(kind)} values; expected real numbers")
    array = value if isinstance(value, cupy.ndarray) else cupy.asarray(value)
    if array.dtype != dtype:
        array = array.astype(dtype)
    if any(s % array.itemsize for s in array.strides):
        array = cupy.ascontiguousarray(array)
    return array


def element_strides(array: Any) -> tuple[int, int]:
    """Strides of a 2-D array in elements (zero for a broadcast rank)."""
    return (int(array.strides[0]) // array.itemsize, int(array.strides[1]) // array.itemsize)


def dense_inputs(
    cupy: Any, schedule: Schedule, rows: int, cols: int, dtype: np.dtype[Any],
    operands: Sequence[Any],
) -> DenseCall:
    """Check and place the dense operands of one call (module docstring)."""
    form = schedule.form
    names = form.operands
    if len(operands) != len(names):
        raise MatrixError(
            f"{schedule.spec_name} takes {schedule.matrix} and {', '.join(names)}; got "
            f"{1 + len(operands)} operands"
        )
    if form.kind == "spmm":
        (b,) = operands
        array = device_dense(cupy, b, dtype, (cols, None), names[0])
        size = int(array.shape[1])
        arrays: tuple[Any, ...] = (array,)
    else:  # sddmm
        u_in, v_in = operands
        u = device_dense(cupy, u_in, dtype, (rows, None), names[0])
        size = int(u.shape[1])
        v = device_dense(cupy, v_in, dtype, (size, cols), names[1])
        arrays = (u, v)
    if size < 1:
        dense = form.dense.name if form.dense else "dense"
        raise MatrixError(f"the dense rank {dense} has size 0 (operand {names[-1]})")
    return DenseCall(arrays, size)


def new_dense_output(cupy: Any, schedule: Schedule, rows: int, size: int, nnz: int,
                     dtype: np.dtype[Any], zeroed: bool) -> Any:
    """SpMM: ``(rows, N)`` in the output's storage order; SDDMM: one value per atom."""
    make = cupy.zeros if zeroed else cupy.empty
    if schedule.form.kind == "sddmm":
        return make(nnz, dtype=dtype)
    storage = schedule.form.output_storage
    order = "F" if storage and storage[0] != schedule.form.output_ranks[0] else "C"
    return make((rows, size), dtype=dtype, order=order)


def check_dense_output(cupy: Any, out: Any, schedule: Schedule, rows: int, size: int,
                       nnz: int, dtype: np.dtype[Any]) -> Any:
    want = (nnz,) if schedule.form.kind == "sddmm" else (rows, size)
    if not isinstance(out, cupy.ndarray) or out.dtype != dtype or tuple(out.shape) != want:
        raise MatrixError(f"out must be a CuPy {dtype.name} array of shape {want}")
    if any(s % out.itemsize for s in out.strides) or (len(want) == 2 and 0 in out.strides):
        raise MatrixError("out must not be a broadcast view")
    return out


def trailing_arguments(
    schedule: Schedule, call: DenseCall, out: Any, owner: Any, space: int, time: int,
    offset: type,
) -> tuple[Any, ...]:
    """The form's kernel arguments (codegen's FORM_PARAMS order) after the schedule's."""
    if schedule.form.kind == "spmm":
        (b,) = call.arrays
        bk, bn = element_strides(b)
        zm, zn = element_strides(out)
        return (b, out, owner, offset(call.size), offset(space), offset(time),
                np.int64(bk), np.int64(bn), np.int64(zm), np.int64(zn))
    u, v = call.arrays
    um, uk = element_strides(u)
    vk, vn = element_strides(v)
    return (u, v, out, owner, offset(call.size),
            np.int64(um), np.int64(uk), np.int64(vk), np.int64(vn))


def transposed(A: Any) -> Any:
    """``A``'s transpose for the transposed forms (the same arrays read the other way for
    SciPy and cupyx sparse matrices and for NumPy/CuPy arrays)."""
    if not hasattr(A, "T") or not hasattr(A, "shape") or len(getattr(A, "shape", ())) != 2:
        raise MatrixError(
            f"the spec declares its matrix transposed ([K, M]): pass it as declared, as a "
            f"SciPy or cupyx sparse matrix or a 2-D array (got {type(A).__name__})"
        )
    return A.T
