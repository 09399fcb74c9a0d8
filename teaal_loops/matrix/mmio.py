"""Matrix Market reading (``.mtx`` and gzip-compressed ``.mtx.gz``) into SciPy CSR.

Supported: ``matrix coordinate`` and ``matrix array`` files with field ``real`` / ``double`` /
``integer`` / ``pattern`` and symmetry ``general`` / ``symmetric`` / ``skew-symmetric`` /
``hermitian`` (a real hermitian matrix is symmetric). Complex fields are refused.

Semantics of the result (what every caller may rely on):

* ``scipy.sparse.csr_matrix`` of dtype float64 with sorted column indices;
* pattern entries have the value 1.0;
* symmetric / hermitian files are expanded (an off-diagonal entry ``(i, j)`` also yields
  ``(j, i)``; the diagonal is not doubled); skew-symmetric ones yield ``(j, i) = -a_ij`` and must
  store no diagonal entry;
* duplicate entries are summed; explicitly stored zeros are kept (they are part of the
  structure, and the corpus statistics count them);
* array files are dense: their zero values are dropped.

Speed, in three tiers (a 10M-entry real file: about 1 s instead of tens of seconds):

1. SciPy's C++ reader (``scipy.io.mmread``, fast_matrix_market, SciPy >= 1.12) parses coordinate
   bodies. It silently accepts some garbage (``1-2`` reads as 1, ``0.5`` in an integer file as
   0, extra tokens on a pattern line), so it only runs on bodies that a chunked, vectorised
   scan has shown to be plain numbers: only digits, signs, ``.``, ``e``/``E`` and whitespace,
   signs only at a token start or after an exponent mark, exponent marks between a digit and a
   digit or sign, per token at most one ``.`` and one exponent mark (in that order), and
   exactly ``entries * tokens-per-entry`` tokens. Its result is cross-checked
   against the header (shape, entry count, no skew-symmetric diagonal).
2. Otherwise NumPy parses the body in one pass (``np.fromstring``) after a vectorised check that
   every line holds the right number of tokens.
3. Anything irregular (a bad token, a comment in the body, a wrong count) falls back to a
   line-by-line parser whose job is to find the first offending line and say what is wrong
   with it, so every broken file gets a :class:`~teaal_loops.errors.MatrixError` naming the
   file and the line.
"""

from __future__ import annotations

import io
import os
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from teaal_loops.errors import Location, MatrixError

try:  # SciPy >= 1.12 reads Matrix Market bodies with a multithreaded C++ parser
    from scipy.io import _fast_matrix_market  # noqa: F401

    _HAVE_FAST_READER = True
except ImportError:  # pragma: no cover - older SciPy: the NumPy tier does the work
    _HAVE_FAST_READER = False

_FORMATS = ("coordinate", "array")
_FIELDS = ("real", "double", "integer", "pattern")
_SYMMETRIES = ("general", "symmetric", "skew-symmetric", "hermitian")
_GZIP_MAGIC = b"\x1f\x8b"
_READ_CHUNK = 1 << 24


@dataclass(frozen=True)
class _Header:
    """What the banner and the size line say."""

    fmt: str
    field: str
    symmetry: str
    rows: int
    cols: int
    entries: int  # coordinate: stored entries; array: stored values
    body_start: int  # byte offset of the first byte after the size line
    body_first_line: int  # 1-based line number of the first line after the size line


class _Reader:
    """Error helper bound to one file name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def error(self, message: str, line: int | None = None) -> MatrixError:
        return MatrixError(message, location=Location(self.name, line))


def read_matrix_market(path: str | os.PathLike[str]) -> sp.csr_matrix:
    """Read a Matrix Market file (plain or gzip) into a float64 CSR matrix (see module doc)."""
    name = os.fspath(path)
    reader = _Reader(name)
    raw = _read_bytes(Path(name), reader)
    header = _parse_header(raw, reader)
    if header.fmt == "coordinate" and _HAVE_FAST_READER:
        fast = _read_with_scipy(raw, memoryview(raw)[header.body_start :], header)
        if fast is not None:
            return fast
    body = raw[header.body_start :]
    del raw
    if header.fmt == "coordinate":
        return _read_coordinate(body, header, reader)
    return _read_array(body, header, reader)


# --------------------------------------------------------------------------------------------
# Bytes


def _read_bytes(path: Path, reader: _Reader) -> bytes:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise reader.error("no such file") from None
    except IsADirectoryError:
        raise reader.error("is a directory, not a Matrix Market file") from None
    except OSError as exc:
        raise reader.error(f"cannot read the file: {exc.strerror or exc}") from None
    if not raw.startswith(_GZIP_MAGIC):
        return raw
    return _gunzip(raw, reader)


def _gunzip(raw: bytes, reader: _Reader) -> bytes:
    """Decompress all gzip members; a broken stream names the line it breaks in."""
    parts: list[bytes] = []
    newlines = 0
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    data = raw
    try:
        while True:
            chunk = decompressor.decompress(data, _READ_CHUNK)
            while chunk:
                parts.append(chunk)
                newlines += chunk.count(b"\n")
                chunk = decompressor.decompress(decompressor.unconsumed_tail, _READ_CHUNK)
            if not decompressor.eof:
                raise EOFError("compressed data ends before the end-of-stream marker")
            data = decompressor.unused_data
            if not data.strip(b"\x00"):
                break
            decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # next member
    except (zlib.error, EOFError) as exc:
        line = newlines + 1
        raise reader.error(
            f"broken gzip stream: {exc} (decompressed text ends inside line {line})", line
        ) from None
    return b"".join(parts)


# --------------------------------------------------------------------------------------------
# Header


def _next_line(raw: bytes, pos: int) -> tuple[bytes, int]:
    """The line starting at ``pos`` (without its newline) and the offset after it."""
    end = raw.find(b"\n", pos)
    if end < 0:
        return raw[pos:], len(raw)
    return raw[pos:end], end + 1


def _parse_header(raw: bytes, reader: _Reader) -> _Header:
    if not raw:
        raise reader.error("empty file (expected a '%%MatrixMarket matrix ...' banner)", 1)
    banner, pos = _next_line(raw, 0)
    words = banner.decode("latin-1").split()
    expected = "'%%MatrixMarket matrix coordinate|array real|integer|pattern general|symmetric|...'"
    if not words or words[0].lower() != "%%matrixmarket":
        raise reader.error(f"not a Matrix Market file: the first line must be {expected}", 1)
    if len(words) != 5:
        raise reader.error(f"malformed banner {banner.decode('latin-1')!r}: expected {expected}", 1)
    obj, fmt, field, symmetry = (w.lower() for w in words[1:])
    if obj != "matrix":
        raise reader.error(f"object {obj!r} is not supported (only 'matrix')", 1)
    if fmt not in _FORMATS:
        raise reader.error(f"format {fmt!r} is not supported (expected coordinate or array)", 1)
    if field == "complex":
        raise reader.error(
            "complex matrices are not supported (teaal-loops handles real values only)", 1
        )
    if field not in _FIELDS:
        raise reader.error(f"field {field!r} is not supported (expected one of {_FIELDS})", 1)
    if symmetry not in _SYMMETRIES:
        raise reader.error(
            f"symmetry {symmetry!r} is not supported (expected one of {_SYMMETRIES})", 1
        )
    if fmt == "array" and field == "pattern":
        raise reader.error("'array pattern' is not a valid Matrix Market combination", 1)

    line_no = 1
    while True:
        if pos >= len(raw):
            raise reader.error("file ends before the size line", line_no + 1)
        line, pos = _next_line(raw, pos)
        line_no += 1
        stripped = line.strip()
        if stripped and not stripped.startswith(b"%"):
            break
    want = 3 if fmt == "coordinate" else 2
    what = "'ROWS COLS ENTRIES'" if want == 3 else "'ROWS COLS'"
    tokens = stripped.decode("latin-1").split()
    if len(tokens) != want:
        raise reader.error(
            f"malformed size line {stripped.decode('latin-1')!r}: expected {what}", line_no
        )
    try:
        sizes = [int(t) for t in tokens]
    except ValueError:
        raise reader.error(
            f"malformed size line {stripped.decode('latin-1')!r}: expected {what} as integers",
            line_no,
        ) from None
    if any(s < 0 for s in sizes):
        raise reader.error(f"negative size in size line {stripped.decode('latin-1')!r}", line_no)
    rows, cols = sizes[0], sizes[1]
    if symmetry != "general" and rows != cols:
        raise reader.error(
            f"a {symmetry} matrix must be square, the size line says {rows}x{cols}", line_no
        )
    if fmt == "coordinate":
        entries = sizes[2]
        if entries > rows * cols:
            raise reader.error(
                f"size line declares {entries} entries, more than {rows}x{cols} can hold", line_no
            )
    elif symmetry == "general":
        entries = rows * cols
    elif symmetry == "skew-symmetric":
        entries = rows * (rows - 1) // 2
    else:
        entries = rows * (rows + 1) // 2
    return _Header(fmt, field, symmetry, rows, cols, entries, pos, line_no + 1)


# --------------------------------------------------------------------------------------------
# Body: tier 1, SciPy's C++ reader behind a vectorised plausibility scan

# Byte classes for the scan.
_INVALID, _SPACE, _DIGIT, _SIGN, _DOT, _EXP = range(6)
_SCAN_CHUNK = 1 << 20


def _byte_classes(allow_fraction: bool) -> np.ndarray:
    classes = np.full(256, _INVALID, dtype=np.uint8)
    classes[list(b" \t\r\n\v\f")] = _SPACE
    classes[list(b"0123456789")] = _DIGIT
    classes[list(b"+-")] = _SIGN
    if allow_fraction:
        classes[list(b".")] = _DOT
        classes[list(b"eE")] = _EXP
    return classes


def _pair_tables(allow_fraction: bool) -> tuple[np.ndarray, np.ndarray]:
    """(bad, token_start) flags for every little-endian uint16 ``first | second << 8``.

    A pair is bad when either byte is not allowed, a sign is not at a token start or after an
    exponent mark, a sign is not followed by a digit or ``.``, or an exponent mark is not
    between a digit / ``.`` and a digit / sign. ``token_start`` marks space -> non-space.
    """
    classes = _byte_classes(allow_fraction)
    first = np.tile(classes, 256)  # low byte varies fastest
    second = np.repeat(classes, 256)
    bad = (first == _INVALID) | (second == _INVALID)
    bad |= (second == _SIGN) & (first != _SPACE) & (first != _EXP)
    bad |= (first == _SIGN) & (second != _DIGIT) & (second != _DOT)
    bad |= (second == _EXP) & (first != _DIGIT) & (first != _DOT)
    bad |= (first == _EXP) & (second != _DIGIT) & (second != _SIGN)
    bad |= (first >= _DOT) & (second == _DOT)  # "..", "e."
    start = (first == _SPACE) & (second != _SPACE)
    return bad, start


_BAD_WEIGHT = 1 << 24  # > the pairs of one chunk view, so one sum says "bad" and counts starts


def _pair_weights(allow_fraction: bool) -> np.ndarray:
    bad, start = _pair_tables(allow_fraction)
    return np.where(bad, np.int32(_BAD_WEIGHT), start.astype(np.int32))


_PAIR_WEIGHTS = {allow: _pair_weights(allow) for allow in (False, True)}


def _plain_token_count(body: bytes | memoryview, allow_fraction: bool) -> int | None:
    """Tokens in ``body`` if it is made of plain numbers only (see module doc), else None.

    Every adjacent byte pair is looked up in a 64K-entry weight table (1 for a token start,
    ``_BAD_WEIGHT`` for a bad pair) through two uint16 views (pairs at even and at odd offsets),
    chunk by chunk into one reused buffer so the work stays in cache; one sum per view then
    gives both answers.
    """
    weights = _PAIR_WEIGHTS[allow_fraction]
    if not body:
        return 0
    edges = np.frombuffer(b" " + body[:1] + body[-1:] + b" ", dtype="<u2")
    edge_weights = weights[edges]  # the first byte after a space, the last before one
    if np.any(edge_weights >= _BAD_WEIGHT):
        return None
    tokens = int(edge_weights[0])
    n = len(body)
    buffer = np.empty(_SCAN_CHUNK // 2 + 1, dtype=np.int32)
    for lo in range(0, n - 1, _SCAN_CHUNK):
        length = min(n, lo + _SCAN_CHUNK + 1) - lo  # this chunk plus the next chunk's first byte
        for offset in (lo, lo + 1):
            count = (length - (offset - lo)) // 2
            if count <= 0:
                continue
            pairs = np.frombuffer(body, dtype="<u2", count=count, offset=offset)
            out = buffer[:count]
            np.take(weights, pairs, out=out)
            total = int(out.sum(dtype=np.int64))
            if total >= _BAD_WEIGHT:
                return None
            tokens += total
    if allow_fraction and not _marks_are_plain(body):
        return None
    return tokens


_FRACTION_CLASSES = _byte_classes(allow_fraction=True)
# Bytes that end a run of digits and signs: whitespace, "." and exponent marks (0 elsewhere).
_STOPS = np.where(_FRACTION_CLASSES >= _DOT, _FRACTION_CLASSES, 0).astype(np.uint8)
_STOPS[_FRACTION_CLASSES == _SPACE] = _SPACE


def _marks_are_plain(body: bytes | memoryview) -> bool:
    """Per token: at most one ``.`` and one exponent mark, ``.`` first, a digit beside the ``.``.

    Byte pairs cannot see ``1.2.3`` or ``1e2e3`` (which SciPy's reader would read as 1.2 and
    100). Listing the "stops" (whitespace, ``.``, ``e``) in order, two marks of one token are
    adjacent stops with no whitespace between them, and the only allowed such pair is ``.``
    then ``e``. Chunked; ``previous`` is the last stop of the chunks before.
    """
    n = len(body)
    whole = np.frombuffer(body, dtype=np.uint8)
    buffer = np.empty(_SCAN_CHUNK, dtype=np.uint8)
    is_stop = np.empty(_SCAN_CHUNK, dtype=bool)
    previous = _SPACE
    for lo in range(0, n, _SCAN_CHUNK):
        hi = min(n, lo + _SCAN_CHUNK)
        kinds_of = buffer[: hi - lo]
        np.take(_STOPS, whole[lo:hi], out=kinds_of)
        # nonzero() of a bool array is much faster than of a uint8 one
        stops = np.flatnonzero(np.not_equal(kinds_of, 0, out=is_stop[: hi - lo]))
        if len(stops) == 0:
            continue
        kinds = np.concatenate(([previous], kinds_of[stops]))
        first, second = kinds[:-1], kinds[1:]
        if np.any((first >= _DOT) & (second >= _DOT) & ((first != _DOT) | (second != _EXP))):
            return False
        dots = stops[kinds[1:] == _DOT] + lo
        if len(dots):
            before = np.where(dots > 0, _FRACTION_CLASSES[whole[np.maximum(dots - 1, 0)]], _SPACE)
            after_index = np.minimum(dots + 1, n - 1)
            after = np.where(dots < n - 1, _FRACTION_CLASSES[whole[after_index]], _SPACE)
            if np.any((before != _DIGIT) & (after != _DIGIT)):
                return False
        previous = int(kinds[-1])
    return True


def _read_with_scipy(raw: bytes, body: bytes | memoryview, header: _Header) -> sp.csr_matrix | None:
    """Tier 1 (see module doc); None means "let the NumPy and line-by-line tiers decide"."""
    per_line = 2 if header.field == "pattern" else 3
    allow_fraction = header.field in ("real", "double")
    if _plain_token_count(body, allow_fraction) != header.entries * per_line:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            coo = sp.coo_matrix(scipy.io.mmread(io.BytesIO(raw)))
    except Exception:  # noqa: BLE001 - any complaint: the located tiers will explain it
        return None
    if coo.shape != (header.rows, header.cols):
        return None
    diagonal = int(np.count_nonzero(coo.row == coo.col))
    if header.symmetry == "general":
        stored = coo.nnz
    else:
        if header.symmetry == "skew-symmetric" and diagonal:
            return None
        stored = (coo.nnz + diagonal) // 2 if (coo.nnz + diagonal) % 2 == 0 else -1
    if stored != header.entries:
        return None
    values = coo.data.astype(np.float64, copy=False)
    return _to_csr(coo.row, coo.col, values, (header.rows, header.cols))


# --------------------------------------------------------------------------------------------
# Body: tier 2, NumPy


def _tokens_per_line(body: bytes) -> np.ndarray:
    """Number of whitespace-separated tokens on every line of ``body`` (vectorised)."""
    if not body:
        return np.zeros(0, dtype=np.int64)
    text = np.frombuffer(body, dtype=np.uint8)
    space = text <= 32  # blank, tab, CR, LF, and other control bytes
    starts = np.empty(len(text), dtype=np.bool_)
    starts[0] = not space[0]
    np.greater(space[:-1], space[1:], out=starts[1:])  # space followed by non-space
    newline = np.flatnonzero(text == 10)
    line_starts = np.concatenate(([0], newline + 1))
    line_starts = line_starts[line_starts < len(text)]
    counts: np.ndarray = np.add.reduceat(starts.view(np.uint8), line_starts, dtype=np.int64)
    return counts


def _parse_numbers(body: bytes, as_int: bool, expected: int) -> np.ndarray | None:
    """All numbers of ``body`` in one pass, or None when the text is not purely numeric."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            values = np.fromstring(body, dtype=np.int64 if as_int else np.float64, sep=" ")
        except (DeprecationWarning, ValueError):
            return None
    if len(values) != expected:
        return None
    return values


def _fast_tokens(body: bytes, per_line: int, entries: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(numbers, file-line offset of every entry) when the body is regular, else None.

    Regular means: every non-blank line holds exactly ``per_line`` tokens, there are exactly
    ``entries`` such lines, and every token is a number. The caller treats None as "let the
    line-by-line parser find out what is wrong".
    """
    counts = _tokens_per_line(body)
    data_lines = np.flatnonzero(counts)
    if len(data_lines) != entries or np.any(counts[data_lines] != per_line):
        return None
    total = entries * per_line
    numbers = _parse_numbers(body, as_int=True, expected=total) if per_line == 2 else None
    if numbers is None:
        numbers = _parse_numbers(body, as_int=False, expected=total)
    if numbers is None:
        return None
    return numbers, data_lines


# --------------------------------------------------------------------------------------------
# Body: tier 3, line by line (diagnosis, and the rare legal irregular file)


def _parse_index(token: str) -> int:
    try:
        return int(token)
    except ValueError:
        number = float(token)  # "3.0" is accepted as 3, like the fast path does
        if not number.is_integer():
            raise
        return int(number)


def _slow_tokens(
    body: bytes, header: _Header, per_line: int, reader: _Reader
) -> tuple[np.ndarray, np.ndarray]:
    """Parse line by line; raise a located MatrixError at the first irregular line."""
    numbers = np.empty(header.entries * per_line, dtype=np.float64)
    lines = np.empty(header.entries, dtype=np.int64)
    n_index = 2 if header.fmt == "coordinate" else 0
    shape = "ROW COL" if n_index else ""
    if header.field != "pattern":
        shape = f"{shape} VALUE".strip()
    entry = 0
    pos = 0
    offset = 0
    while pos < len(body):
        raw_line, pos = _next_line(body, pos)
        line_no = header.body_first_line + offset
        offset += 1
        text = raw_line.decode("latin-1").strip()
        if not text or text.startswith("%"):
            continue
        tokens = text.split()
        if entry >= header.entries:
            raise reader.error(
                f"more entries than the {header.entries} the size line declares", line_no
            )
        if len(tokens) != per_line:
            raise reader.error(
                f"expected {per_line} value(s) ({shape}), found {len(tokens)}: {text!r}", line_no
            )
        for k, token in enumerate(tokens):
            try:
                if "_" in token:
                    raise ValueError(token)
                value = float(_parse_index(token)) if k < n_index else float(token)
            except ValueError:
                kind = "integer index" if k < n_index else "number"
                raise reader.error(f"{token!r} is not a valid {kind}", line_no) from None
            numbers[entry * per_line + k] = value
        lines[entry] = line_no - header.body_first_line
        entry += 1
    if entry < header.entries:
        line_no = header.body_first_line + offset
        raise reader.error(
            f"file ends after {entry} of the {header.entries} entries the size line declares",
            line_no,
        )
    return numbers, lines


# --------------------------------------------------------------------------------------------
# Coordinate and array bodies


def _read_coordinate(body: bytes, header: _Header, reader: _Reader) -> sp.csr_matrix:
    per_line = 2 if header.field == "pattern" else 3
    parsed = _fast_tokens(body, per_line, header.entries)
    if parsed is None:
        parsed = _slow_tokens(body, header, per_line, reader)
    numbers, lines = parsed
    rows = _indices(numbers[0::per_line], header.rows, "row", lines, header, reader)
    cols = _indices(numbers[1::per_line], header.cols, "column", lines, header, reader)
    if per_line == 3:
        values = np.ascontiguousarray(numbers[2::3], dtype=np.float64)
    else:
        values = np.ones(header.entries, dtype=np.float64)
    del numbers
    if header.field == "integer" and not np.all(np.isfinite(values) & (values == np.round(values))):
        bad = int(np.flatnonzero(~(np.isfinite(values) & (values == np.round(values))))[0])
        raise reader.error(
            f"value {float(values[bad]):g} is not an integer in an 'integer' file",
            header.body_first_line + int(lines[bad]),
        )
    if header.symmetry != "general":
        rows, cols, values = _expand_symmetric(rows, cols, values, lines, header, reader)
    return _to_csr(rows, cols, values, (header.rows, header.cols))


def _indices(
    raw: np.ndarray, limit: int, what: str, lines: np.ndarray, header: _Header, reader: _Reader
) -> np.ndarray:
    """1-based indices -> 0-based int64, every one checked to lie in 1..limit."""
    if raw.dtype.kind == "f":
        integral = raw == np.floor(raw)
        bad_where = np.flatnonzero(~integral)
        if len(bad_where):
            bad = int(bad_where[0])
            raise reader.error(
                f"{what} index {float(raw[bad]):g} is not an integer",
                header.body_first_line + int(lines[bad]),
            )
    out_of_range = (raw < 1) | (raw > limit)
    if np.any(out_of_range):
        bad = int(np.flatnonzero(out_of_range)[0])
        value = int(raw[bad]) if np.isfinite(raw[bad]) else raw[bad]
        raise reader.error(
            f"{what} index {value} is out of range 1..{limit}",
            header.body_first_line + int(lines[bad]),
        )
    return raw.astype(np.int64) - 1


def _expand_symmetric(
    rows: np.ndarray,
    cols: np.ndarray,
    values: np.ndarray,
    lines: np.ndarray,
    header: _Header,
    reader: _Reader,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Add the mirrored entry of every off-diagonal entry (negated for skew-symmetric)."""
    diagonal = rows == cols
    if header.symmetry == "skew-symmetric" and np.any(diagonal):
        bad = int(np.flatnonzero(diagonal)[0])
        raise reader.error(
            "a skew-symmetric file must not store diagonal entries "
            f"(found ({rows[bad] + 1}, {cols[bad] + 1}))",
            header.body_first_line + int(lines[bad]),
        )
    off = ~diagonal
    mirrored = -values[off] if header.symmetry == "skew-symmetric" else values[off]
    return (
        np.concatenate((rows, cols[off])),
        np.concatenate((cols, rows[off])),
        np.concatenate((values, mirrored)),
    )


def _to_csr(
    rows: np.ndarray, cols: np.ndarray, values: np.ndarray, shape: tuple[int, int]
) -> sp.csr_matrix:
    """COO triplets -> canonical CSR (duplicates summed, sorted columns, zeros kept)."""
    coo = sp.coo_matrix((values, (rows, cols)), shape=shape)
    csr = coo.tocsr()  # sums duplicates; explicit zeros stay
    csr.sum_duplicates()
    csr.sort_indices()
    return sp.csr_matrix(csr)


def _read_array(body: bytes, header: _Header, reader: _Reader) -> sp.csr_matrix:
    """Dense column-major values; symmetric variants store the lower triangle by columns."""
    parsed = _fast_tokens(body, 1, header.entries)
    if parsed is None:
        parsed = _slow_tokens(body, header, 1, reader)
    values = parsed[0]
    n_rows, n_cols = header.rows, header.cols
    if header.field == "integer" and not np.all(values == np.round(values)):
        bad = int(np.flatnonzero(values != np.round(values))[0])
        raise reader.error(
            f"value {float(values[bad]):g} is not an integer in an 'integer' file",
            header.body_first_line + int(parsed[1][bad]),
        )
    if header.symmetry == "general":
        dense = values.reshape((n_cols, n_rows)).T
        return _to_csr_dense(dense)
    strict = header.symmetry == "skew-symmetric"
    # Column j of the stored triangle holds rows j..n-1 (j+1..n-1 when skew), column by column.
    cols_list = [np.full(n_rows - j - int(strict), j) for j in range(n_cols)]
    rows_list = [np.arange(j + int(strict), n_rows) for j in range(n_cols)]
    col_idx = np.concatenate(cols_list) if cols_list else np.zeros(0, dtype=np.int64)
    row_idx = np.concatenate(rows_list) if rows_list else np.zeros(0, dtype=np.int64)
    dense = np.zeros((n_rows, n_cols), dtype=np.float64)
    dense[row_idx, col_idx] = values
    mirrored = -values if strict else values
    off = row_idx != col_idx
    dense[col_idx[off], row_idx[off]] = mirrored[off]
    return _to_csr_dense(dense)


def _to_csr_dense(dense: np.ndarray) -> sp.csr_matrix:
    csr = sp.csr_matrix(np.ascontiguousarray(dense, dtype=np.float64))
    csr.sort_indices()
    return csr
