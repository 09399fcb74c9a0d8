"""Turning whatever the user holds into one canonical, validated SciPy CSR matrix.

``as_csr`` accepts any ``scipy.sparse`` matrix or array, ``cupyx.scipy.sparse`` matrices (copied to
the host), dense NumPy arrays and CuPy arrays. The result is a ``scipy.sparse.csr_matrix`` in
canonical form (sorted column indices, no duplicates) with a float32 or float64 dtype; the
caller's object is never modified (it is returned unchanged when it already is such a matrix).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from teaal_loops.errors import MatrixError
from teaal_loops.matrix.csr_arrays import CsrArrays
from teaal_loops.types import MatrixShape

INT32_MAX = 2**31 - 1
_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def index_bits_for(rows: int, nnz: int) -> int:
    """32 or 64: the index width a kernel needs for a matrix of ``rows`` rows and ``nnz`` nonzeros.

    64 when ``nnz`` or ``rows + nnz`` exceeds ``2**31 - 1``: row offsets hold values up to nnz,
    and merge-path coordinates (a row end plus a nonzero id) run up to ``rows + nnz``.
    """
    if rows < 0 or nnz < 0:
        raise MatrixError(f"negative matrix size: rows={rows}, nnz={nnz}")
    return 64 if nnz > INT32_MAX or rows + nnz > INT32_MAX else 32


def validate_csr(
    indptr: Any, indices: Any, shape: tuple[int, int], *, where: str = "matrix"
) -> None:
    """Raise MatrixError unless (indptr, indices) is a well-formed CSR structure of ``shape``.

    Checks: non-negative sizes, ``len(indptr) == rows + 1``, ``indptr[0] == 0``, offsets never
    decrease, ``indptr[-1] == len(indices)``, every column index in ``0..cols-1``. The message
    names ``where`` and the first offending row.
    """
    if len(shape) != 2:
        raise MatrixError(f"{where}: shape {shape!r} is not two-dimensional")
    rows, cols = int(shape[0]), int(shape[1])
    if rows < 0 or cols < 0:
        raise MatrixError(f"{where}: negative shape {rows}x{cols}")
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    if indptr.ndim != 1 or indices.ndim != 1:
        raise MatrixError(f"{where}: row offsets and column indices must be one-dimensional")
    for name, array in (("row offsets", indptr), ("column indices", indices)):
        if array.size and array.dtype.kind not in "iu":
            raise MatrixError(f"{where}: {name} have dtype {array.dtype}, expected integers")
    if len(indptr) != rows + 1:
        raise MatrixError(
            f"{where}: {len(indptr)} row offsets for {rows} rows (expected {rows + 1})"
        )
    if indptr[0] != 0:
        raise MatrixError(f"{where}: row offsets start at {int(indptr[0])}, expected 0")
    steps = np.diff(indptr.astype(np.int64))
    if np.any(steps < 0):
        row = int(np.flatnonzero(steps < 0)[0])
        raise MatrixError(
            f"{where}: row offsets decrease at row {row} "
            f"({int(indptr[row])} -> {int(indptr[row + 1])})"
        )
    if int(indptr[-1]) != len(indices):
        raise MatrixError(
            f"{where}: last row offset is {int(indptr[-1])} but there are {len(indices)} "
            "column indices"
        )
    if len(indices):
        bad = (indices < 0) | (indices >= cols)
        if np.any(bad):
            entry = int(np.flatnonzero(bad)[0])
            row = int(np.searchsorted(indptr, entry, side="right")) - 1
            raise MatrixError(
                f"{where}: row {row} has column index {int(indices[entry])}, outside 0..{cols - 1}"
            )


def as_csr(A: Any, *, dtype: Any = None) -> sp.csr_matrix:
    """Any supported matrix -> a validated, canonical ``scipy.sparse.csr_matrix`` (see module doc).

    ``dtype`` (float32 / float64, or the strings ``f32`` / ``f64``) converts the values; by default
    float32 and float64 are kept and other real dtypes (ints, bools) become float64. A
    ``csr_matrix`` that is already canonical with the wanted dtype is returned as it is (not
    copied); anything else is converted into a new matrix.
    """
    target = _target_dtype(dtype)
    host = _to_host(A)
    if type(host) is sp.csr_matrix:
        # Validate before anything reads the structure: SciPy's own routines trust it.
        validate_csr(host.indptr, host.indices, host.shape)
        if _is_canonical_float_csr(host, target):
            return host
    if sp.issparse(host):
        _check_value_dtype(host.dtype)
        if host.format == "csr":
            validate_csr(host.indptr, host.indices, host.shape)
        elif host.format == "csc":
            rows, cols = host.shape
            validate_csr(host.indptr, host.indices, (cols, rows), where="matrix (CSC, by column)")
        try:
            # copy: canonicalising must not touch the caller's matrix
            csr = sp.csr_matrix(host, copy=True)
        except ValueError as exc:  # SciPy's own format checks (COO indices out of range, ...)
            raise MatrixError(f"malformed {host.format.upper()} matrix: {exc}") from None
    else:
        try:
            dense = np.asarray(host)
        except (ValueError, TypeError) as exc:  # ragged nested lists, unconvertible objects
            raise MatrixError(f"expected a matrix: {str(exc).splitlines()[0]}") from None
        if dense.ndim != 2:
            raise MatrixError(f"expected a 2-D matrix, got an array of shape {dense.shape}")
        _check_value_dtype(dense.dtype)
        csr = sp.csr_matrix(dense)
    _check_value_dtype(csr.dtype)
    validate_csr(csr.indptr, csr.indices, csr.shape)
    if not csr.has_canonical_format:
        csr.sum_duplicates()  # also sorts the column indices
    csr.sort_indices()
    value_dtype = target or (csr.dtype if csr.dtype in _FLOAT_DTYPES else np.dtype(np.float64))
    if csr.dtype != value_dtype:
        csr = csr.astype(value_dtype)
    return csr


def _is_canonical_float_csr(A: Any, target: np.dtype[Any] | None) -> bool:
    """True when ``A`` can be returned as it is (nothing to convert, nothing to canonicalise)."""
    return (
        type(A) is sp.csr_matrix
        and A.dtype in _FLOAT_DTYPES
        and (target is None or A.dtype == target)
        and bool(A.has_canonical_format)
    )


def matrix_shape(A: Any) -> MatrixShape:
    """Rows, columns, stored nonzeros and the longest row of ``A`` (anything as_csr accepts)."""
    csr = as_csr(A)  # no copy when A already is a canonical float CSR matrix
    rows, cols = csr.shape
    max_row = int(np.diff(csr.indptr).max()) if rows else 0
    return MatrixShape(rows=int(rows), cols=int(cols), nnz=int(csr.nnz), max_row=max_row)


def _target_dtype(dtype: Any) -> np.dtype[Any] | None:
    if dtype is None:
        return None
    aliases = {"f32": np.float32, "f64": np.float64}
    try:
        resolved = np.dtype(aliases.get(dtype, dtype) if isinstance(dtype, str) else dtype)
    except TypeError:
        raise MatrixError(f"unknown dtype {dtype!r} (expected float32 or float64)") from None
    if resolved not in _FLOAT_DTYPES:
        raise MatrixError(f"dtype {resolved} is not supported (expected float32 or float64)")
    return resolved


def _check_value_dtype(dtype: np.dtype[Any]) -> None:
    if dtype.kind == "c":
        raise MatrixError(f"complex values ({dtype}) are not supported; pass the real part")
    if dtype.kind not in "fiub":
        raise MatrixError(f"values of dtype {dtype} are not numbers")


def _to_host(A: Any) -> Any:
    """CuPy / cupyx objects (and CSR arrays) -> their SciPy / NumPy counterparts; others
    unchanged."""
    if isinstance(A, CsrArrays):
        return A.to_scipy()
    module = type(A).__module__ or ""
    if module.startswith(("cupy", "cupyx")) and hasattr(A, "get"):
        return A.get()
    if A is None:
        raise MatrixError("expected a matrix, got None")
    return A
