"""Matrices: reading, generating, validating and converting them to GPU layouts.

Everything returns ``scipy.sparse.csr_matrix`` in canonical form (sorted column indices, no
duplicates); CuPy is only touched when the caller hands in CuPy objects.
"""

from teaal_loops.matrix.convert import as_csr, index_bits_for, matrix_shape, validate_csr
from teaal_loops.matrix.mmio import read_matrix_market
from teaal_loops.matrix.synthetic import SYNTHETIC_KINDS, synthetic, synthetic_from_string

__all__ = [
    "SYNTHETIC_KINDS",
    "as_csr",
    "index_bits_for",
    "matrix_shape",
    "read_matrix_market",
    "synthetic",
    "synthetic_from_string",
    "validate_csr",
]
