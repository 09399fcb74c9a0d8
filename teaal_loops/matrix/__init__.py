"""Matrices: reading, generating, validating and converting them to GPU layouts.

Everything returns ``scipy.sparse.csr_matrix`` in canonical form (sorted column indices, no
duplicates, float32 or float64 values); CuPy is only touched when the caller hands in CuPy
objects. Sparse layouts built from these matrices live in :mod:`teaal_loops.layouts`.

Note: ``matrix.synthetic`` is the generator function; its module is
``teaal_loops.matrix.synthetic`` (reach it with ``importlib.import_module`` if you need it).
"""

from teaal_loops.matrix.convert import as_csr, index_bits_for, matrix_shape, validate_csr
from teaal_loops.matrix.mmio import read_matrix_market, read_matrix_market_bytes
from teaal_loops.matrix.stats import RowStats, row_stats
from teaal_loops.matrix.synthetic import SYNTHETIC_KINDS, synthetic, synthetic_from_string

__all__ = [
    "SYNTHETIC_KINDS",
    "RowStats",
    "as_csr",
    "index_bits_for",
    "matrix_shape",
    "read_matrix_market",
    "read_matrix_market_bytes",
    "row_stats",
    "synthetic",
    "synthetic_from_string",
    "validate_csr",
]
