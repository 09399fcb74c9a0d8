"""A vectorised proof that a Matrix Market body is plain, so the fast number parsers may read it.

The fast parsers (SciPy's C++ reader, ``numpy.fromstring``) silently accept garbage: SciPy
reads ``3 3.0 1`` as the entry (3, 3) = 0.0 and ``1-2`` as 1. They only run on bodies that
:func:`is_plain` has shown to be made of these and nothing else, which the line-by-line parser
(:mod:`teaal_loops.matrix.mm_slow`) reads to the same values:

* bytes: digits, space, tab, LF, CR only before LF; in value tokens also ``+``/``-``, and
  for real fields ``.``, ``e``, ``E`` (so no comment, no ``nan``/``inf``: they go the slow way);
* lines: every line holds exactly the tokens of one entry, or none;
* tokens: index tokens are digits only, at most 18 of them (so they fit int64 exactly);
  integer values are ``[+-]digits``, at most 18 characters; real values match
  ``[+-]?(digits[.digits]|.digits)([eE][+-]?digits)?``, at most 64 characters;
* exactly ``entries`` entries.

The work is done a line-aligned chunk at a time (about 1 MiB), so it stays in cache and takes
a few small arrays of memory whatever the size of the body.
"""

from __future__ import annotations

import numpy as np

from teaal_loops.matrix.mm_header import Header

_BAD, _BLANK, _CR, _LF, _DIGIT, _SIGN, _DOT, _EXP = range(8)
_SEPARATOR_MAX = _LF  # classes _BLANK, _CR and _LF separate tokens
_INDEX_CHARS = 18
_INTEGER_CHARS = 18  # sign included: at most 18 digits, so int64 holds it
_REAL_CHARS = 64
CHUNK = 1 << 20


def _classes(field: str) -> np.ndarray:
    table = np.full(256, _BAD, dtype=np.uint8)
    table[list(b" \t")] = _BLANK
    table[ord("\r")] = _CR
    table[ord("\n")] = _LF
    table[list(b"0123456789")] = _DIGIT
    if field != "pattern":
        table[list(b"+-")] = _SIGN
    if field in ("real", "double"):
        table[ord(".")] = _DOT
        table[list(b"eE")] = _EXP
    return table


def _bad_class_pairs() -> np.ndarray:
    """``bad[a << 3 | b]`` for the classes of two adjacent bytes ``a`` then ``b``."""
    a = np.repeat(np.arange(8), 8)
    b = np.tile(np.arange(8), 8)
    bad = (a == _BAD) | (b == _BAD)
    bad |= (a == _CR) & (b != _LF)
    # a sign starts a token or an exponent
    bad |= (b == _SIGN) & (a != _BLANK) & (a != _LF) & (a != _EXP)
    bad |= (a == _SIGN) & (b != _DIGIT) & (b != _DOT)
    bad |= (b == _EXP) & (a != _DIGIT) & (a != _DOT)
    bad |= (a == _EXP) & (b != _DIGIT) & (b != _SIGN)
    bad |= (a == _DOT) & (b == _DOT)
    return bad


def _bad_byte_pairs(classes: np.ndarray) -> np.ndarray:
    """``bad[first | second << 8]`` for two adjacent bytes: one lookup per little-endian uint16."""
    first = np.tile(classes, 256)  # the low byte varies fastest
    second = np.repeat(classes, 256)
    return _CLASS_PAIRS[(first.astype(np.intp) << 3) | second]


_CLASS_PAIRS = _bad_class_pairs()
_TABLES = {field: _classes(field) for field in ("real", "double", "integer", "pattern")}
_BYTE_PAIRS = {field: _bad_byte_pairs(table) for field, table in _TABLES.items()}


class _Progress:
    """What the chunks before have shown: tokens so far."""

    def __init__(self) -> None:
        self.tokens = 0


def is_plain(text: bytes, header: Header) -> bool:
    """True when the body of ``text`` (from ``header.body_start``) is plain (module doc)."""
    view = memoryview(text)
    n = len(text)
    progress = _Progress()
    lo = header.body_start
    while lo < n:
        hi = n if n - lo <= CHUNK else text.rfind(b"\n", lo, lo + CHUNK) + 1
        if hi <= lo:
            return False  # a line of over a MiB: not a plain entry line
        if not _chunk_is_plain(view[lo:hi], header, progress):
            return False
        lo = hi
    return progress.tokens == header.entries * header.per_line


def _pairs_are_plain(chunk: memoryview, field: str) -> bool:
    """No bad pair of adjacent bytes; the chunk is preceded and followed by a line end."""
    pairs = _BYTE_PAIRS[field]
    n = len(chunk)
    classes = _TABLES[field]
    if _CLASS_PAIRS[_LF << 3 | int(classes[chunk[0]])]:
        return False
    if _CLASS_PAIRS[int(classes[chunk[-1]]) << 3 | _LF]:
        return False
    for offset in (0, 1):  # pairs starting at even offsets, then at odd ones
        count = (n - offset) // 2
        if count and np.take(pairs, np.frombuffer(chunk, "<u2", count, offset)).any():
            return False
    return True


def _chunk_is_plain(chunk: memoryview, header: Header, progress: _Progress) -> bool:
    """Check one line-aligned chunk; advance ``progress``."""
    if not _pairs_are_plain(chunk, header.field):
        return False
    codes = np.take(_TABLES[header.field], np.frombuffer(chunk, dtype=np.uint8))
    separator = codes <= _SEPARATOR_MAX
    edge = np.empty(len(codes) + 1, dtype=bool)  # separator -> token (or back) between bytes
    edge[0] = not separator[0]
    edge[-1] = not separator[-1]
    np.not_equal(separator[:-1], separator[1:], out=edge[1:-1])
    flips = np.flatnonzero(edge)  # token starts and token ends alternate
    starts, ends = flips[0::2], flips[1::2]
    line_starts = np.flatnonzero(codes == _LF) + 1
    line_starts = np.concatenate(([0], line_starts[line_starts < len(codes)]))
    per_line = header.per_line
    counts = np.diff(np.searchsorted(starts, line_starts), append=len(starts))
    if np.any((counts != 0) & (counts != per_line)):
        return False
    if not _tokens_are_plain(codes, starts, ends, header):
        return False
    progress.tokens += len(starts)
    return True


def _tokens_are_plain(
    codes: np.ndarray, starts: np.ndarray, ends: np.ndarray, header: Header
) -> bool:
    """Token lengths, and where the signs, '.' and exponent marks are."""
    per_line, n_index = header.per_line, header.n_index
    lengths = ends - starts
    value_limit = _INTEGER_CHARS if header.field == "integer" else _REAL_CHARS
    # lines hold per_line tokens each (or none), and a chunk starts a line: so token k of the
    # chunk is token k % per_line of its line
    by_line = lengths.reshape(-1, per_line)
    if np.any(by_line[:, :n_index] > _INDEX_CHARS) or np.any(by_line[:, n_index:] > value_limit):
        return False
    marks = np.flatnonzero(codes >= _SIGN)
    if not len(marks):
        return True
    token_of = np.searchsorted(starts, marks, side="right") - 1
    if n_index and np.any(token_of % per_line < n_index):
        return False  # a sign, '.' or exponent in an index token
    # per token at most one '.' and one exponent mark, '.' first: of the marks that are not
    # signs, two in a row in one token must be '.' then 'e'
    kinds = codes[marks]
    dots_exps = kinds != _SIGN
    kinds, token_of, positions = kinds[dots_exps], token_of[dots_exps], marks[dots_exps]
    same = token_of[1:] == token_of[:-1]
    if np.any(same & ~((kinds[:-1] == _DOT) & (kinds[1:] == _EXP))):
        return False
    dots = positions[kinds == _DOT]  # a '.' needs a digit beside it
    last = len(codes) - 1
    before = np.where(dots > 0, codes[np.maximum(dots - 1, 0)], _LF)
    after = np.where(dots < last, codes[np.minimum(dots + 1, last)], _LF)
    return not np.any((before != _DIGIT) & (after != _DIGIT))
