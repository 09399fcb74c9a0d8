"""The fast Matrix Market body readers, run only on bodies proven plain.

:func:`read_fast` first asks :func:`teaal_loops.matrix.mm_scan.is_plain` whether the body is
made of plain entry lines only. Only then does a fast parser read it: SciPy's multithreaded C++
reader (``scipy.io.mmread``, SciPy >= 1.12) for coordinate bodies of a MiB or more, else one
``numpy.fromstring`` pass. On a plain body both give exactly the values of the line-by-line
parser (all three round decimal text to the nearest float64). The fast path never reports an
error: anything it does not like (an index out of range, a diagonal entry in a skew-symmetric
file, a value that overflows float64, a count that does not match) returns None, and the
line-by-line parser then finds the first fault and names its line.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import scipy.io

from teaal_loops.matrix.mm_header import Header
from teaal_loops.matrix.mm_scan import is_plain
from teaal_loops.matrix.mm_slow import Entries

try:  # SciPy >= 1.12 reads Matrix Market bodies with a multithreaded C++ parser
    from scipy.io import _fast_matrix_market  # noqa: F401

    HAVE_SCIPY_READER = True
except ImportError:  # pragma: no cover - older SciPy: the NumPy reader does the work
    HAVE_SCIPY_READER = False
# SciPy starts a thread pool per call (about a millisecond): below this body size one NumPy
# pass is faster
SCIPY_MIN_BODY = 1 << 20


def read_fast(text: bytes, header: Header) -> Entries | None:
    """The stored entries of a plain body, or None (see the module docstring)."""
    if not is_plain(text, header):
        return None
    entries = None
    big = len(text) - header.body_start >= SCIPY_MIN_BODY
    # SciPy 1.17's reader crashes the process (SIGSEGV) on a last line that ends in a blank,
    # a tab or a CR without a LF after it (found by tests/fuzz): it only sees texts ending in LF
    if header.fmt == "coordinate" and HAVE_SCIPY_READER and big and text.endswith(b"\n"):
        entries = _with_scipy(text, header)
    if entries is None:
        entries = _with_numpy(text, header)
    if entries is None or not _plausible(entries, header):
        return None
    return entries


def _with_scipy(text: bytes, header: Header) -> Entries | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            coo = scipy.io.mmread(io.BytesIO(text))
    except Exception:  # noqa: BLE001 - any complaint: the line-by-line parser will explain it
        return None
    if not hasattr(coo, "row") or coo.shape != (header.rows, header.cols):
        return None
    n = header.entries
    diagonal = int(np.count_nonzero(coo.row[:n] == coo.col[:n]))
    # SciPy appends the mirror of every stored off-diagonal entry after the stored ones, in
    # their order (negated for skew-symmetric files): just what the reader does itself
    expected = n if header.symmetry == "general" else 2 * n - diagonal
    if len(coo.row) != expected:
        return None
    values = np.asarray(coo.data, dtype=np.float64)
    return Entries(coo.row, coo.col, values, expanded=header.symmetry != "general")


def _with_numpy(text: bytes, header: Header) -> Entries | None:
    per_line, n_index = header.per_line, header.n_index
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            numbers = np.fromstring(text[header.body_start :], dtype=np.float64, sep=" ")
        except (DeprecationWarning, ValueError):
            return None
    if len(numbers) != header.entries * per_line:
        return None
    if per_line > n_index:
        values = np.ascontiguousarray(numbers[n_index::per_line])
    else:
        values = np.ones(header.entries)
    if not n_index:
        return Entries(None, None, values)
    rows, cols = numbers[0::per_line], numbers[1::per_line]
    if np.any((rows < 1) | (rows > header.rows) | (cols < 1) | (cols > header.cols)):
        return None
    return Entries(rows.astype(np.int64) - 1, cols.astype(np.int64) - 1, values)


def _plausible(entries: Entries, header: Header) -> bool:
    """No value overflowed (the body holds no nan/inf literal), no skew-symmetric diagonal."""
    if not np.all(np.isfinite(entries.values)):
        return False
    rows, cols = entries.rows, entries.cols
    if header.symmetry == "skew-symmetric" and rows is not None and cols is not None:
        n = header.entries
        return not np.any(rows[:n] == cols[:n])
    return True
