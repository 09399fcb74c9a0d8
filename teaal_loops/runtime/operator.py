"""A generated kernel as a ``cupyx.scipy.sparse.linalg.LinearOperator``, for CuPy's solvers.

    op = kernel.linear_operator(A)                     # A prepared once, here
    x, info = cupyx.scipy.sparse.linalg.cg(op, b, maxiter=500)
    w, v = cupyx.scipy.sparse.linalg.eigsh(op, k=4, which="LA")
    w, v = cupyx.scipy.sparse.linalg.lobpcg(op, X0)   # X0: an (n, k) block

The operator's ``shape`` is the matrix's ``(rows, cols)`` and its ``dtype`` the kernel's (or
``dtype=``, see :func:`linear_operator`). ``matvec`` accepts ``(cols,)`` and ``(cols, 1)``
vectors of any strides and returns a **new** array each call, because solvers keep references
to the vectors they are given (``cg`` holds ``p`` and ``q`` across iterations): one allocation
from CuPy's pool and one launch on the current stream, no synchronisation. ``matmat`` (what
``lobpcg`` calls with its blocks) copies the block to column-major order once, when it is not
already, and launches the kernel once per column straight into the columns of a column-major
result. ``rmatvec`` (the adjoint) is not provided: ``cg``, ``minres``, ``gmres``, ``eigsh`` and
``lobpcg`` do not use it; for a non-symmetric matrix build a second kernel call on ``A.T``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from teaal_loops.errors import MatrixError, ParameterError
from teaal_loops.runtime import backend

_FLOAT_KINDS = ("float32", "float64")


def operator_dtype(kernel_dtype: np.dtype[Any], dtype: object) -> np.dtype[Any]:
    """The operator's dtype: the kernel's, or a float dtype the solver's vectors have."""
    if dtype is None:
        return kernel_dtype
    try:
        chosen = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        raise ParameterError(f"linear_operator: dtype {dtype!r} is not a dtype") from None
    if chosen.name not in _FLOAT_KINDS:
        raise ParameterError(
            f"linear_operator: dtype {chosen.name} is not supported (float32 or float64)"
        )
    return chosen


def linear_operator(kernel: Any, prepared: Any, *, dtype: object = None) -> Any:
    """A ``cupyx.scipy.sparse.linalg.LinearOperator`` computing ``A @ x`` with ``kernel`` on
    the prepared matrix ``prepared``.

    ``dtype=None`` gives the kernel's dtype. Another float dtype makes a mixed-precision
    operator: each product converts its input to the kernel's dtype and its result to
    ``dtype`` (two extra element-wise kernels a call), e.g. a float32 kernel serving a float64
    solver. Attributes ``kernel`` and ``prepared`` name what it runs.
    """
    cupy = backend.cupy_module()
    from cupyx.scipy.sparse.linalg import LinearOperator

    rows, cols = prepared.shape.rows, prepared.shape.cols
    kernel_dtype = kernel.dtype
    out_dtype = operator_dtype(kernel_dtype, dtype)
    convert = out_dtype != kernel_dtype

    def matvec(x: Any) -> Any:
        xd = kernel.vector(prepared, x)
        y = kernel.new_output(prepared)
        kernel.launch(prepared, xd, y)
        return y.astype(out_dtype) if convert else y

    def matmat(X: Any) -> Any:
        shape = tuple(getattr(X, "shape", ()))
        if len(shape) != 2 or shape[0] != cols:
            raise MatrixError(
                f"matmat: a block of shape {shape} for a matrix of {cols} columns "
                f"(expected ({cols}, k))"
            )
        kind = getattr(getattr(X, "dtype", None), "kind", "O")
        if kind not in "biuf":
            raise MatrixError(f"matmat: the block holds values of kind {kind!r}; expected real")
        block = cupy.asfortranarray(cupy.asarray(X).astype(kernel_dtype, copy=False))
        if prepared.accumulates:
            Y = cupy.zeros((rows, shape[1]), dtype=kernel_dtype, order="F")
        else:
            Y = cupy.empty((rows, shape[1]), dtype=kernel_dtype, order="F")
        for j in range(shape[1]):  # each column of a column-major array is contiguous
            kernel.launch(prepared, block[:, j], Y[:, j])
        return Y.astype(out_dtype) if convert else Y

    op = LinearOperator((rows, cols), matvec=matvec, matmat=matmat, dtype=out_dtype)
    op.kernel = kernel
    op.prepared = prepared
    return op
