"""Inputs, references, rounding bounds and compulsory bytes for the cuSPARSE baselines.

Rounding bound: a sum of ``n`` products computed in any order in precision ``eps`` is within
``gamma_n |A| |x|`` (``gamma_n ~ n eps``) of the exact value, so two such results (a baseline
and cupyx, which sum in different orders) are within ``2 (n + 2) eps (|A| |x|)`` of each other
per entry (``+ 2``: slack for the final rounding of each and the SDDMM's scaling by C). ``n``
is the row's number of nonzeros (SpMV, SpMM) or K (SDDMM, whose reference is computed in
float64).

Compulsory bytes (what any kernel must move through device memory, as
:mod:`teaal_loops.bench.roofline` defines for SpMV), with ``v`` the value size, ``i`` = 4 the
column index size and ``o`` the row offset size:

* SpMM ``C = A B`` (B ``cols x N``): ``nnz (v + i) + (rows + 1) o + cols N v + rows N v``;
* SDDMM ``Z = C * (A B)`` (A ``rows x K``, B ``K x cols``): ``nnz i + (rows + 1) o + nnz v``
  (C's values) ``+ rows K v + K cols v + nnz v`` (Z).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from teaal_loops.bench.cusparse.descriptors import CusparseBaselineError, value_type
from teaal_loops.bench.roofline import INDEX_BYTES, compulsory_bytes, value_bytes

REFERENCE_CHUNK_BYTES = 1 << 27  # SDDMM reference: gathered rows per chunk, in bytes


def widths(values: Sequence[int], what: str) -> tuple[int, ...]:
    """Dense widths as positive ints, or one line naming the bad one."""
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < 1:
            raise CusparseBaselineError(f"{what}: {v!r} is not a positive integer width")
        out.append(int(v))
    return tuple(out)


def spmm_compulsory_bytes(rows: int, cols: int, nnz: int, n: int, dtype: Any = "float32", *,
                          offset_bytes: int = 4) -> int:
    """``nnz (v + i) + (rows + 1) o + cols N v + rows N v`` (module docstring)."""
    if min(rows, cols, nnz, n) < 0:
        raise ValueError(f"negative size: rows={rows}, cols={cols}, nnz={nnz}, n={n}")
    v = value_bytes(dtype)
    return nnz * (v + INDEX_BYTES) + (rows + 1) * offset_bytes + (cols + rows) * n * v


def sddmm_compulsory_bytes(rows: int, cols: int, nnz: int, k: int, dtype: Any = "float32", *,
                           offset_bytes: int = 4) -> int:
    """``nnz i + (rows + 1) o + 2 nnz v + (rows + cols) K v`` (module docstring)."""
    if min(rows, cols, nnz, k) < 0:
        raise ValueError(f"negative size: rows={rows}, cols={cols}, nnz={nnz}, k={k}")
    v = value_bytes(dtype)
    return (nnz * (INDEX_BYTES + 2 * v) + (rows + 1) * offset_bytes
            + (rows + cols) * k * v)


def spmv_bytes(A: Any) -> int:
    rows, cols = A.shape
    return compulsory_bytes(rows, cols, int(A.nnz), A.dtype, offset_bytes=A.indptr.itemsize)


def spmm_bytes(A: Any, n: int) -> int:
    rows, cols = A.shape
    return spmm_compulsory_bytes(rows, cols, int(A.nnz), n, A.dtype,
                                 offset_bytes=A.indptr.itemsize)


def sddmm_bytes(C: Any, k: int) -> int:
    rows, cols = C.shape
    return sddmm_compulsory_bytes(rows, cols, int(C.nnz), k, C.dtype,
                                  offset_bytes=C.indptr.itemsize)


# --------------------------------------------------------------------------------------------
# device inputs


def device_copies(cp: Any, matrix: Any, dtype: Any, copies: int) -> list[Any]:
    """``copies`` cupyx CSR matrices (own arrays each) of ``matrix`` (SciPy or cupyx) in
    ``dtype``; anything else is one line."""
    import cupyx.scipy.sparse as csp
    import scipy.sparse as sp

    value_type(dtype)
    if len(getattr(matrix, "shape", ())) != 2:
        raise CusparseBaselineError(
            f"expected a 2-D SciPy or cupyx sparse matrix, got {type(matrix).__name__}")
    if csp.issparse(matrix):
        A = matrix.tocsr().astype(dtype)
    elif sp.issparse(matrix):
        A = csp.csr_matrix(sp.csr_matrix(matrix).astype(dtype))
    else:
        raise CusparseBaselineError(
            f"expected a SciPy or cupyx sparse matrix, got {type(matrix).__name__}")
    out = [A]
    for _ in range(copies - 1):
        out.append(csp.csr_matrix((A.data.copy(), A.indices.copy(), A.indptr.copy()),
                                  shape=A.shape))
    return out


def random_dense(cp: Any, shape: tuple[int, ...], dtype: Any, seed: int) -> Any:
    """Uniform values in [-1, 1), C-ordered, seeded."""
    rng = cp.random.RandomState(seed)
    return cp.ascontiguousarray((rng.random_sample(shape) * 2.0 - 1.0).astype(dtype))


# --------------------------------------------------------------------------------------------
# references and bounds


def _eps(dtype: Any) -> float:
    return float(np.finfo(np.dtype(dtype)).eps)


def _abs_csr(cp: Any, A: Any) -> Any:
    import cupyx.scipy.sparse as csp

    return csp.csr_matrix((cp.abs(A.data).astype(cp.float64), A.indices, A.indptr),
                          shape=A.shape)


def spmv_bound(cp: Any, A: Any, x: Any) -> Any:
    """Per-row bound on the difference of two float results of ``A @ x``."""
    terms = cp.diff(A.indptr).astype(cp.float64) + 2.0
    return 2.0 * terms * _eps(A.dtype) * (_abs_csr(cp, A) @ cp.abs(x).astype(cp.float64))


def spmm_bound(cp: Any, A: Any, B: Any) -> Any:
    terms = cp.diff(A.indptr).astype(cp.float64)[:, None] + 2.0
    absB = cp.asfortranarray(cp.abs(B).astype(cp.float64))
    return 2.0 * terms * _eps(A.dtype) * (_abs_csr(cp, A) @ absB)


def sddmm_reference(cp: Any, C: Any, A: Any, B: Any) -> tuple[Any, Any]:
    """``C.data * sum(A[row] * B[:, col])`` in float64, and its bound, in chunks of nonzeros
    (gathering every nonzero's row of A and column of B at once would need nnz x K values)."""
    nnz = int(C.nnz)
    # the row of nonzero j: how many row ends are <= j
    rows = cp.searchsorted(C.indptr[1:], cp.arange(nnz, dtype=C.indptr.dtype), side="right")
    cols = C.indices.astype(cp.int64)
    a = A.astype(cp.float64)
    bt = cp.ascontiguousarray(B.T.astype(cp.float64))  # cols x K: one column of B per row
    k = A.shape[1]
    ref = cp.empty(nnz, dtype=cp.float64)
    mag = cp.empty(nnz, dtype=cp.float64)
    step = max(1, REFERENCE_CHUNK_BYTES // (8 * k))
    for s in range(0, nnz, step):
        e = min(nnz, s + step)
        ga, gb = a[rows[s:e]], bt[cols[s:e]]
        ref[s:e] = (ga * gb).sum(axis=1)
        mag[s:e] = (cp.abs(ga) * cp.abs(gb)).sum(axis=1)
    values = C.data.astype(cp.float64)
    bound = 2.0 * (k + 2.0) * _eps(C.dtype) * cp.abs(values) * mag
    return values * ref, bound


def compare(cp: Any, got: Any, ref: Any, bound: Any) -> dict[str, Any]:
    """Entries outside the bound (NaN counts as outside) and the largest error over bound."""
    diff = cp.abs(got.astype(cp.float64) - ref.astype(cp.float64))
    tiny = float(np.finfo(np.float64).tiny)
    outside = ~(diff <= bound + tiny)
    bad = int(outside.sum())
    worst = cp.nan_to_num(diff / (bound + tiny), nan=np.inf)
    return {
        "valid": bad == 0,
        "mismatches": bad,
        "max_abs_error": float(cp.nan_to_num(diff, nan=np.inf).max()) if diff.size else 0.0,
        "max_error_over_bound": float(worst.max()) if diff.size else 0.0,
    }
