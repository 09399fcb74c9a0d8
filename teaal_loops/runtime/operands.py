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

A form with a scalar epilogue (``Z = alpha * T1 + beta * C``) takes its addend ``C`` after the
product's operands, shaped like ``Z``, and its scalars by their names in the spec, as keywords:
``kernel(A, x, C, a=2.0, b=0.5)``. Scalars must be finite real numbers (Python or NumPy, not
booleans), and finite once rounded to the kernel's dtype: the kernel takes them as ``value_t``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from teaal_loops.errors import DeviceError, MatrixError
from teaal_loops.ir.model import ScalarEpilogue, Schedule
from teaal_loops.types import KernelParam

MAX_DENSE_ELEMENTS = 1 << 40  # refused before asking the device for memory
# Work-oriented SpMM's walk ahead and group-mapped SpMM of one lane or a warp a row address row c
# of B as c times a byte stride held in 32 bits (templates/schedules/work_oriented.cu.j2 and
# TEAAL_BYTE_STRIDES in templates/common/dense.cuh.j2: one wide multiply-add an element). B's
# rows further apart are read from a Fortran-ordered copy (rows then one element apart), made
# once per call.
MAX_ROW_STRIDE_BYTES = 2**31 - 1


@dataclass(frozen=True)
class DenseCall:
    """One call's dense operands, checked: the device arrays and the dense rank's size."""

    arrays: tuple[Any, ...]
    size: int  # D: SpMM's N, SDDMM's K


def _kind_name(kind: str) -> str:
    return {"c": "complex", "O": "Python object", "U": "string", "S": "byte string",
            "b": "boolean"}.get(kind, f"non-numeric ({kind})")


def device_dense(
    cupy: Any, value: Any, dtype: np.dtype[Any], shape: tuple[int | None, ...], name: str
) -> Any:
    """``value`` as a CuPy array of ``dtype`` with ``len(shape)`` axes (a view when it already
    is one); ``shape`` entries that are None are free (the dense rank's size, read from the
    operand)."""
    got = tuple(int(n) for n in getattr(value, "shape", np.shape(value)))
    if len(got) != len(shape) or any(
        w is not None and w != g for w, g in zip(shape, got, strict=True)
    ):
        want = ", ".join("any" if w is None else str(w) for w in shape)
        want += "," if len(shape) == 1 else ""
        raise MatrixError(f"operand {name} has shape {got}; expected ({want})")
    if math.prod(got) > MAX_DENSE_ELEMENTS:
        raise MatrixError(f"operand {name} of shape {got} is too large")
    kind = getattr(getattr(value, "dtype", None), "kind", None) or np.asarray(value).dtype.kind
    if kind not in "iuf":
        raise MatrixError(f"operand {name} holds {_kind_name(kind)} values; expected real numbers")
    if not isinstance(value, cupy.ndarray):  # uploaded: refuse what cannot fit, naming it
        ensure_fits(cupy, math.prod(got) * np.dtype(dtype).itemsize, f"operand {name}")
    array = value if isinstance(value, cupy.ndarray) else cupy.asarray(value)
    if array.dtype != dtype:
        array = array.astype(dtype)
    if any(s % array.itemsize for s in array.strides):
        array = cupy.ascontiguousarray(array)
    return array


def ensure_fits(cupy: Any, nbytes: int, what: str) -> None:
    """A one-line DeviceError, naming ``what``, when ``nbytes`` exceed the free device memory
    plus CuPy's pooled free blocks (a host stand-in without ``cuda`` checks nothing)."""
    runtime = getattr(getattr(cupy, "cuda", None), "runtime", None)
    if runtime is None:
        return
    free = int(runtime.memGetInfo()[0]) + int(cupy.get_default_memory_pool().free_bytes())
    if nbytes > free:
        raise DeviceError(
            f"{what} needs {nbytes / 2**30:.2f} GiB of GPU memory but only "
            f"{free / 2**30:.2f} GiB is free"
        )


def stored_transposed(form: Any, index: int) -> bool:
    """Whether the spec stores dense operand ``index`` the other way round from the shape a
    call takes it in (SpMM's B as (K, N); SDDMM's A as (M, K) and B as (K, N)): then the
    layout its mapping is written for is that shape in Fortran order. Kernels read through
    strides, so either layout computes the same values; this says which one is fast."""
    if form.dense is None or index >= len(form.operand_storage):
        return False
    storage = form.operand_storage[index]
    dense = form.dense.name
    if form.kind == "sddmm" and index == 1:
        first = dense  # SDDMM's B is called (K, N)
    else:
        first = next((r for r in form.operand_ranks[index] if r != dense), None)
    return len(storage) == 2 and first is not None and storage[0] != first


def element_strides(array: Any) -> tuple[int, ...]:
    """Strides of an array in elements (zero for a broadcast rank)."""
    return tuple(int(s) // array.itemsize for s in array.strides)


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
        if not rows_within_reach(array):
            array = cupy.asfortranarray(array)
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
    """SpMM: ``(rows, N)`` in the output's storage order; SDDMM: one value per atom. An
    output that cannot fit in free device memory is refused first, naming it."""
    make = cupy.zeros if zeroed else cupy.empty
    count = nnz if schedule.form.kind == "sddmm" else rows * size
    ensure_fits(cupy, count * np.dtype(dtype).itemsize,
                f"the output {schedule.output} ({count} values)")
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


def rows_within_reach(array: Any) -> bool:
    """Whether neighbouring rows of SpMM's B (a 2-D ``array``) lie at most
    :data:`MAX_ROW_STRIDE_BYTES` apart, as its kernels address them (one row: always)."""
    return int(array.shape[0]) <= 1 or abs(int(array.strides[0])) <= MAX_ROW_STRIDE_BYTES


def sampled_result(arrays: Mapping[str, Any], shape: Any, values: Any) -> Any:
    """SDDMM's output: a cupyx sparse matrix with the sampler's pattern (CSR for a CSR
    layout, COO for COO), ``values`` in its atom order."""
    import cupyx.scipy.sparse as csp

    size = (shape.rows, shape.cols)
    if "indptr" in arrays:
        return csp.csr_matrix((values, arrays["indices"], arrays["indptr"]), shape=size)
    return csp.coo_matrix((values, (arrays["row"], arrays["col"])), shape=size)


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


# -- the scalar epilogue ------------------------------------------------------------------------


def split_epilogue_operands(
    schedule: Schedule, operands: Sequence[Any]
) -> tuple[tuple[Any, ...], Any]:
    """(the product's operands, the addend or None) of a call with an epilogue; a wrong count
    is one line naming every operand."""
    form = schedule.form
    epi = form.epilogue
    assert epi is not None
    names = form.operands or (schedule.vector,)
    wanted = len(names) + (epi.addend is not None)
    if len(operands) != wanted:
        addend = f", then the addend {epi.addend} of {epi.text}" if epi.addend else ""
        missing = (f"; operand {epi.addend} is missing" if epi.addend and
                   len(operands) == len(names) else "")
        raise MatrixError(
            f"{schedule.spec_name} takes {schedule.matrix}, {', '.join(names)}{addend}; got "
            f"{1 + len(operands)} operands{missing}"
        )
    product = tuple(operands[: len(names)])
    return product, (operands[-1] if epi.addend is not None else None)


def epilogue_scalars(
    schedule: Schedule, given: Mapping[str, Any], dtype: np.dtype[Any]
) -> tuple[float, float]:
    """(alpha, beta) from the scalars given by name (1 for an absent factor): every scalar of
    the epilogue given, nothing else, each a finite real number, finite in ``dtype``."""
    epi = schedule.form.epilogue
    if epi is None:
        if given:
            raise MatrixError(
                f"{schedule.spec_name} has no epilogue and takes no scalars (got "
                f"{', '.join(sorted(given))})"
            )
        return 1.0, 1.0
    unknown = sorted(set(given) - set(epi.scalars))
    if unknown:
        raise MatrixError(
            f"scalar {unknown[0]} is not a scalar of {epi.text} (its scalars: "
            f"{', '.join(epi.scalars) or 'none'})"
        )
    values = {}
    for name in epi.scalars:
        if name not in given:
            raise MatrixError(
                f"scalar {name} of {epi.text} is missing: pass it by name, "
                f"kernel(..., {', '.join(f'{n}=...' for n in epi.scalars)})"
            )
        values[name] = _scalar(name, given[name], dtype)
    return (values[epi.alpha] if epi.alpha else 1.0, values[epi.beta] if epi.beta else 1.0)


def _scalar(name: str, value: Any, dtype: np.dtype[Any]) -> float:
    real = isinstance(value, numbers.Real) or (
        isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf"
    )
    if not real or isinstance(value, (bool, np.bool_)):
        raise MatrixError(
            f"scalar {name} must be a real number, got {type(value).__name__}"
        )
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    with np.errstate(over="ignore"):
        rounded = dtype.type(number)
    if not math.isfinite(number) or not np.isfinite(rounded):
        raise MatrixError(
            f"scalar {name} = {number!r} is not a finite {dtype.name} number"
        )
    return number


def epilogue_addend(cupy: Any, value: Any, dtype: np.dtype[Any], z: Any,
                    epilogue: ScalarEpilogue) -> Any:
    """The addend ``C`` on the device, shaped like ``z`` (the output), not overlapping it."""
    assert epilogue.addend is not None
    c = device_dense(cupy, value, dtype, tuple(int(n) for n in z.shape), epilogue.addend)
    if _overlap(c, z):
        raise MatrixError(
            f"operand {epilogue.addend} shares memory with the output: the product overwrites "
            "it before the epilogue reads it; pass a copy"
        )
    return c


def _overlap(a: Any, b: Any) -> bool:
    """Whether the byte ranges two strided arrays span intersect."""
    def span(x: Any) -> tuple[int, int]:
        ptr = getattr(getattr(x, "data", None), "ptr", None)  # CuPy; NumPy on the CPU
        lo = hi = int(ptr if ptr is not None else x.__array_interface__["data"][0])
        for n, s in zip(x.shape, x.strides, strict=True):
            if n > 1:
                lo, hi = (lo + (n - 1) * s, hi) if s < 0 else (lo, hi + (n - 1) * s)
        return lo, hi + x.itemsize
    if a.size == 0 or b.size == 0:
        return False
    (alo, ahi), (blo, bhi) = span(a), span(b)
    return alo < bhi and blo < ahi


def epilogue_grid(elements: int, threads: int, max_blocks: int) -> int:
    """Blocks of ``threads`` for one thread per element (grid-stride beyond ``max_blocks``)."""
    return min(-(-elements // threads), max_blocks)


def epilogue_arguments(
    params: Sequence[KernelParam], z: Any, c: Any, alpha: float, beta: float,
) -> tuple[tuple[Any, ...], int]:
    """The epilogue kernel's arguments in ``params`` order (codegen's EPILOGUE_PARAMS, as the
    config keeps them) and the element count. ``inner`` is the rank along which ``z`` has
    its smallest stride, so that neighbouring threads write neighbouring elements."""
    zs = element_strides(z)
    cs = element_strides(c) if c is not None else (0,) * z.ndim
    shape = tuple(int(n) for n in z.shape)
    if z.ndim == 1:
        shape, zs, cs = (1, *shape), (0, *zs), (0, *cs)
    elif abs(zs[0]) < abs(zs[1]):
        shape, zs, cs = shape[::-1], zs[::-1], cs[::-1]
    value = z.dtype.type
    values: dict[str, Any] = {
        "z": z, "c": c, "alpha": value(alpha), "beta": value(beta),
        "outer": np.int64(shape[0]), "inner": np.int64(shape[1]),
        "z_stride_outer": np.int64(zs[0]), "z_stride_inner": np.int64(zs[1]),
        "c_stride_outer": np.int64(cs[0]), "c_stride_inner": np.int64(cs[1]),
    }
    return tuple(values[p.name] for p in params), shape[0] * shape[1]
