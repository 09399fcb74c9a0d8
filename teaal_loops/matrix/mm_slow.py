"""The line-by-line Matrix Market body parser: the reference grammar and every located error.

It reads any body the fast path reads, to the same values, and also the legal irregular ones
(comment lines in the body, ``nan`` / ``inf`` values, blank lines, long tokens); at the first
thing that is wrong it raises a :class:`~teaal_loops.errors.MatrixError` naming the file, the
line and, for a bad token, its column. The grammar:

* lines end at LF (a CR before it is dropped); tokens are separated by spaces and tabs; a line
  whose first token starts with ``%`` is a comment; a line without tokens is blank;
* an index is ``[0-9]+`` within 1..rows (or 1..cols), checked from its digits before any
  conversion (a hundred-digit index is "out of range", not a slow ``int()``);
* a real value is ``[+-]?(digits[.digits]|.digits)([eE][+-]?digits)?`` or, case-insensitively,
  ``[+-]?(nan|inf|infinity)``: explicit NaN and infinities are kept as IEEE values, but a finite
  literal beyond float64 (``1e400``) is refused rather than read as infinity;
* an integer value is ``[+-]?[0-9]+`` within the int64 range (it becomes the nearest float64);
* a skew-symmetric file stores no diagonal entry.
"""

from __future__ import annotations

import math
import re
from array import array
from dataclasses import dataclass

import numpy as np

from teaal_loops.matrix.limits import MAX_DIGITS, shown
from teaal_loops.matrix.mm_header import Header, Source, fields, next_line

_INDEX = re.compile(rb"[0-9]+")
_REAL = re.compile(
    rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)
_INTEGER = re.compile(rb"[+-]?[0-9]+")
# a run of blank lines: one character-class repeat (a repeated group would make the regex
# engine keep a backtracking frame per line: a hundred MB for a flood of blank lines)
_BLANK_RUN = re.compile(rb"[ \t\r\n]*\n")
_LONE_CR = re.compile(rb"\r(?!\n)")
_INT64_MAX = 2**63 - 1


@dataclass
class Entries:
    """Stored entries in file order: 0-based integer ``rows`` / ``cols`` (None for array
    files) and float64 ``values`` (ones for pattern files). ``expanded``: the mirror of every
    off-diagonal entry of a symmetric file already follows the stored entries, in their order.
    """

    rows: np.ndarray | None
    cols: np.ndarray | None
    values: np.ndarray
    expanded: bool = False


def read_slow(text: bytes, header: Header, source: Source) -> Entries:
    """Parse the body of ``text`` line by line; raise a located MatrixError at the first fault."""
    rows, cols, values = array("q"), array("q"), array("d")
    per_line, n_index = header.per_line, header.n_index
    shape = " ".join(("ROW", "COL")[:n_index] + (("VALUE",) if per_line > n_index else ()))
    count, pos, line_no = 0, header.body_start, header.body_first_line - 1
    while pos < len(text):
        end = _blank_run_end(text, pos)  # a run of blank lines in one step
        if end > pos:
            line_no += text.count(b"\n", pos, end)
            pos = end
            continue
        line, pos = next_line(text, pos)
        line_no += 1
        tokens = fields(line)
        if not tokens or tokens[0][1].startswith(b"%"):
            continue
        if count >= header.entries:
            raise source.error(
                f"more entries than the {header.entries} the size line declares", line_no
            )
        if len(tokens) != per_line:
            raise source.error(
                f"expected {per_line} value(s) ({shape}), found {len(tokens)}: {shown(line, 60)}",
                line_no,
                tokens[per_line][0] if len(tokens) > per_line else None,
            )
        if n_index:
            (row_col, row_tok), (col_col, col_tok) = tokens[0], tokens[1]
            row = _index(row_tok, header.rows, "row", source, line_no, row_col)
            col = _index(col_tok, header.cols, "column", source, line_no, col_col)
            if header.symmetry == "skew-symmetric" and row == col:
                raise source.error(
                    f"a skew-symmetric file must not store diagonal entries (found ({row}, {col}))",
                    line_no,
                )
            rows.append(row - 1)
            cols.append(col - 1)
        if per_line > n_index:
            column, token = tokens[-1]
            values.append(_value(token, header.field, source, line_no, column))
        count += 1
    if count < header.entries:
        raise source.error(
            f"file ends after {count} of the {header.entries} entries the size line declares",
            line_no + 1,
        )
    value_array = np.frombuffer(values, dtype=np.float64) if per_line > n_index else np.ones(count)
    if not n_index:
        return Entries(None, None, value_array)
    return Entries(
        np.frombuffer(rows, dtype=np.int64), np.frombuffer(cols, dtype=np.int64), value_array
    )


def _blank_run_end(text: bytes, pos: int) -> int:
    """The end of the blank lines starting at ``pos`` (``pos`` itself when there are none),
    stopping before a line holding a CR that does not end it (that line is an error)."""
    run = _BLANK_RUN.match(text, pos)
    if not run:
        return pos
    lone = _LONE_CR.search(text, pos, run.end())
    return run.end() if lone is None else text.rfind(b"\n", pos, lone.start()) + 1 or pos


def _index(token: bytes, limit: int, what: str, source: Source, line: int, column: int) -> int:
    if not _INDEX.fullmatch(token):
        raise source.error(
            f"{what} index {shown(token)} is not an integer (expected 1..{limit})", line, column
        )
    digits = token.lstrip(b"0")
    if len(digits) > MAX_DIGITS:
        raise source.error(f"{what} index {shown(token)} is out of range 1..{limit}", line, column)
    value = int(digits or b"0")
    if not 1 <= value <= limit:
        raise source.error(f"{what} index {value} is out of range 1..{limit}", line, column)
    return value


def _value(token: bytes, field: str, source: Source, line: int, column: int) -> float:
    if field == "integer":
        if not _INTEGER.fullmatch(token):
            raise source.error(
                f"value {shown(token)} is not an integer in an 'integer' file", line, column
            )
        digits = token.lstrip(b"+-").lstrip(b"0")
        if len(digits) > MAX_DIGITS or abs(int(token)) > _INT64_MAX:
            raise source.error(
                f"value {shown(token)} is outside the int64 range of an 'integer' file",
                line,
                column,
            )
        return float(int(token))
    if not _REAL.fullmatch(token):
        raise source.error(f"{shown(token)} is not a valid number", line, column)
    value = float(token)
    if math.isinf(value) and b"n" not in token.lower():
        raise source.error(
            f"value {shown(token)} overflows float64 (largest finite value 1.8e308)", line, column
        )
    return value
