"""A matrix split into its light rows and its heavy rows, to run as two launches.

``heavy:W`` runs every row under one schedule, and none suits both kinds of row: a light row of
one or two nonzeros wants a lane, a heavy row's piece of a hundred a warp. Split, the light
rows (a CSR matrix whose heavy rows are empty) run under the schedule that suits them and
store every row, heavy ones as 0; the heavy rows (layout ``pieces:W``) then run under theirs
and add into that output::

    light, heavy = teaal_loops.split_heavy(A, width=1024)
    Z = light_kernel(light, B)                      # a CSR spec: stores every row
    pieces_kernel.bind_dense(heavy, B, out=Z, accumulate=True).launch()  # adds the pieces

Both matrices are of A's kind (SciPy on the host, cupyx on the GPU, split there); their sum is
A, each row's entries in their order. A row is heavy as in ``heavy:W``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from teaal_loops.layouts.pieces import panel_width
from teaal_loops.matrix.convert import as_csr
from teaal_loops.matrix.heavy_rows import (
    DEFAULT_WIDTH,
    HEAVY_MIN_NNZ,
    min_nnz_option,
    split_rows,
)
from teaal_loops.runtime import backend
from teaal_loops.runtime.device_matrix import is_device_object


def split_heavy(A: Any, width: int = DEFAULT_WIDTH, *,
                min_nnz: int = HEAVY_MIN_NNZ) -> tuple[Any, Any]:
    """(light, heavy) of ``A`` (a SciPy sparse matrix or anything
    :func:`~teaal_loops.matrix.as_csr` takes; a cupyx sparse matrix stays on the GPU) for
    panels of ``width`` columns; ``min_nnz``: the fewest nonzeros of a heavy row (module
    docstring)."""
    width = panel_width(width)
    min_nnz = min_nnz_option(min_nnz, "split_heavy")
    if _is_cupyx_sparse(A):
        import cupyx.scipy.sparse as csp

        csr = A.tocsr()
        xp, make = backend.cupy_module(), csp.csr_matrix
    else:
        csr = as_csr(A)
        xp, make = np, sp.csr_matrix
    light, heavy = split_rows(xp, csr.indptr, csr.indices, csr.data, csr.shape, width,
                              min_nnz)
    return tuple(make((values, indices, indptr), shape=csr.shape)  # type: ignore[return-value]
                 for indptr, indices, values in (light, heavy))


def _is_cupyx_sparse(A: Any) -> bool:
    return is_device_object(A) and hasattr(A, "tocsr")

