"""Matrix Market reading (``.mtx`` and gzip-compressed ``.mtx.gz``) into SciPy CSR.

Supported: ``matrix coordinate`` and ``matrix array`` files with field ``real`` / ``double`` /
``integer`` / ``pattern`` and symmetry ``general`` / ``symmetric`` / ``skew-symmetric`` /
``hermitian`` (a real hermitian matrix is symmetric). Complex fields are refused.

Semantics of the result (what every caller may rely on):

* ``scipy.sparse.csr_matrix`` of dtype float64 with sorted column indices;
* pattern entries have the value 1.0; integer values become the nearest float64;
* symmetric / hermitian files are expanded (an off-diagonal entry ``(i, j)`` also yields
  ``(j, i)``; the diagonal is not doubled); skew-symmetric ones yield ``(j, i) = -a_ij`` and must
  store no diagonal entry;
* duplicate entries are summed; explicitly stored zeros are kept (they are part of the
  structure, and the corpus statistics count them); ``-0`` reads as ``0``;
* array files are dense: their zero values are dropped;
* NaN and infinities: explicit ``nan``, ``inf``, ``-inf`` and ``infinity`` values (any case) are
  accepted and kept as IEEE values, as SciPy does; a finite literal that overflows float64
  (``1e400``) is refused with its line and column instead of silently becoming infinity; a
  literal below the smallest subnormal (``1e-400``) reads as 0, its nearest float64.

Hostile input (nothing is executed; every fault is one located
:class:`~teaal_loops.errors.MatrixError`, ``FILE:LINE:COL: error: MESSAGE``):

* indices must be plain integers everywhere (``3.0``, ``1e0``, ``+1`` are refused), values must
  match the grammar of :mod:`teaal_loops.matrix.mm_slow`;
* only regular files are read; the header must lie in the first MiB; the size line's integers
  are bounded (2**62) before conversion; what it declares must fit the host's available memory,
  and it caps the text at 128 bytes and two lines per declared entry (plus 1 MiB and 65,536
  lines), so a decompression bomb or a flood of blank lines is stopped early (see
  :mod:`teaal_loops.matrix.mm_header` and :mod:`teaal_loops.matrix.mm_source`).

Speed: a vectorised scan (:mod:`teaal_loops.matrix.mm_scan`) proves a body plain, then SciPy's
C++ reader or one NumPy pass reads it (:mod:`teaal_loops.matrix.mm_fast`); anything else goes
to the line-by-line parser (:mod:`teaal_loops.matrix.mm_slow`), which reads the legal irregular
files (comments in the body, ``nan``) and finds the line of every fault. Both paths give the
same matrix and the same errors.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from teaal_loops.matrix import mm_fast
from teaal_loops.matrix.mm_header import Header, Source, display_name
from teaal_loops.matrix.mm_slow import Entries, read_slow
from teaal_loops.matrix.mm_source import read_bytes, read_file

USE_FAST_PATH = True  # tests switch it off to compare the two paths


def read_matrix_market(path: str | os.PathLike[str]) -> sp.csr_matrix:
    """Read a Matrix Market file (plain or gzip) into a float64 CSR matrix.

    Explicit ``nan`` / ``inf`` values are kept as IEEE values; a finite literal that overflows
    float64 (``1e400``) is an error. Every fault in the file (a malformed token, a decimal
    index, an out-of-range index, a size that cannot fit in memory, a text longer than its
    size line allows, a device or pipe instead of a file) raises one
    :class:`~teaal_loops.errors.MatrixError` whose text is ``FILE:LINE:COL: error: MESSAGE``
    (see the module docstring for the grammar and the limits).
    """
    name = os.fsdecode(os.fspath(path))
    source = Source(display_name(name))
    text, header = read_file(name, source)
    return _parse(text, header, source)


def read_matrix_market_bytes(data: bytes, *, name: str = "<bytes>") -> sp.csr_matrix:
    """:func:`read_matrix_market` for file contents already in memory (plain or gzip);
    ``name`` is the file name that errors show."""
    source = Source(display_name(name))
    text, header = read_bytes(data, source)
    return _parse(text, header, source)


def _parse(text: bytes, header: Header, source: Source) -> sp.csr_matrix:
    entries = mm_fast.read_fast(text, header) if USE_FAST_PATH else None
    if entries is None:
        entries = read_slow(text, header, source)
    del text
    if entries.rows is None or entries.cols is None:
        return _array_to_csr(entries.values, header)
    return _coordinate_to_csr(entries, header)


def _coordinate_to_csr(entries: Entries, header: Header) -> sp.csr_matrix:
    rows, cols, values = entries.rows, entries.cols, entries.values
    assert rows is not None and cols is not None
    if header.symmetry != "general" and not entries.expanded:
        off = rows != cols  # mirror every off-diagonal entry (negated for skew-symmetric)
        mirrored = -values[off] if header.symmetry == "skew-symmetric" else values[off]
        rows, cols, values = (
            np.concatenate((rows, cols[off])),
            np.concatenate((cols, rows[off])),
            np.concatenate((values, mirrored)),
        )
    np.add(values, 0.0, out=values)  # -0.0 -> 0.0, on every path alike
    coo = sp.coo_matrix((values, (rows, cols)), shape=(header.rows, header.cols))
    csr = coo.tocsr()  # sums duplicates; explicit zeros stay
    csr.sum_duplicates()
    csr.sort_indices()
    return sp.csr_matrix(csr)


def _array_to_csr(values: np.ndarray, header: Header) -> sp.csr_matrix:
    """Dense column-major values; symmetric variants store the lower triangle by columns."""
    n_rows, n_cols = header.rows, header.cols
    if header.symmetry == "general":
        dense = values.reshape((n_cols, n_rows)).T
    else:
        strict = int(header.symmetry == "skew-symmetric")
        # column j of the stored triangle holds rows j..n-1 (j+1..n-1 when skew)
        lengths = np.arange(n_rows - strict, -strict, -1, dtype=np.int64).clip(0)[:n_cols]
        col_idx = np.repeat(np.arange(n_cols, dtype=np.int64), lengths)
        first = np.repeat(np.cumsum(lengths) - lengths, lengths)
        row_idx = np.arange(len(col_idx), dtype=np.int64) - first + col_idx + strict
        dense = np.zeros((n_rows, n_cols), dtype=np.float64)
        dense[row_idx, col_idx] = values
        off = row_idx != col_idx
        dense[col_idx[off], row_idx[off]] = -values[off] if strict else values[off]
    csr = sp.csr_matrix(np.ascontiguousarray(dense, dtype=np.float64))
    csr.sort_indices()
    return csr
