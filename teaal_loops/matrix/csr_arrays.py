"""A CSR matrix as its three arrays, of any array module (NumPy on the host, CuPy on a GPU).

SciPy's and cupyx's ``csr_matrix`` are the usual inputs. This is the one for matrices made
where they are used: a distributed rank generates its shard on its GPU and hands the arrays to
the kernel as they are, without a copy. Unlike cupyx's ``csr_matrix`` (32-bit indices only) its
row offsets may be 64-bit, so a shard may pass 2^31 nonzeros. Column indices are int32 (what
every layout's kernel reads). Nothing here checks the structure: the runtime validates the
arrays when a kernel prepares the matrix (on the GPU for device arrays).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class CsrArrays:
    """``indptr`` (rows + 1 offsets), ``indices`` and ``data`` (nnz each), and the shape."""

    indptr: Any
    indices: Any
    data: Any
    shape: tuple[int, int]

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    @property
    def dtype(self) -> np.dtype[Any]:
        return np.dtype(self.data.dtype)

    def to_scipy(self) -> sp.csr_matrix:
        """The same matrix as a SciPy ``csr_matrix`` on the host (device arrays copied)."""
        arrays = [a.get() if hasattr(a, "get") else np.asarray(a)
                  for a in (self.data, self.indices, self.indptr)]
        return sp.csr_matrix(tuple(arrays), shape=self.shape)


__all__ = ["CsrArrays"]
