"""Matrix Market header: the banner, the comment lines, the size line, and what they permit.

The header is read from at most the first ``HEADER_BYTES`` of text, so a stream without a
valid header (a binary file, a decompression bomb of zeros) is refused after one MiB. The size
line's integers are bounded where they are read (see :mod:`teaal_loops.matrix.limits`), and
what they declare fixes three budgets before the body is read or anything is allocated:

* text: at most ``HEADER_BYTES`` (1 MiB) plus ``BYTES_PER_ENTRY`` (128) bytes per declared
  entry (array files: per declared value) in the whole file, after decompression;
* lines: at most two lines per declared entry plus ``SLACK_LINES`` (blank lines and comments
  included), so a flood of blank lines stops early;
* memory: the parsed arrays and the CSR result must fit in the memory the host has available.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from teaal_loops.errors import Location, MatrixError
from teaal_loops.matrix.limits import NotAnInteger, TooLarge, format_bytes, parse_count, shown

FORMATS = ("coordinate", "array")
FIELDS = ("real", "double", "integer", "pattern")
SYMMETRIES = ("general", "symmetric", "skew-symmetric", "hermitian")
HEADER_BYTES = 1 << 20
BYTES_PER_ENTRY = 128
SLACK_LINES = 1 << 16
_BANNER = "'%%MatrixMarket matrix coordinate|array real|integer|pattern general|symmetric|...'"
_FIELD_RE = re.compile(rb"[^ \t]+")


def display_name(name: str) -> str:
    """A file name safe to print on one line (control characters escaped)."""
    return name if name.isprintable() else ascii(name)[1:-1]


@dataclass(frozen=True)
class Source:
    """Where the text came from: builds located errors."""

    name: str

    def error(
        self, message: str, line: int | None = None, column: int | None = None
    ) -> MatrixError:
        return MatrixError(message, location=Location(self.name, line, column))


@dataclass(frozen=True)
class Header:
    """What the banner and the size line say, and where the body starts."""

    fmt: str
    field: str
    symmetry: str
    rows: int
    cols: int
    entries: int  # coordinate: stored entries; array: stored values
    body_start: int  # byte offset of the first byte after the size line
    body_first_line: int  # 1-based line number of the first line after the size line

    @property
    def n_index(self) -> int:
        """Index tokens per entry: 2 (row, column) for coordinate files, 0 for array files."""
        return 2 if self.fmt == "coordinate" else 0

    @property
    def per_line(self) -> int:
        """Tokens per entry line."""
        return self.n_index + (0 if self.field == "pattern" else 1)

    def text_budget(self) -> int:
        return HEADER_BYTES + BYTES_PER_ENTRY * self.entries

    def line_budget(self) -> int:
        return 2 * self.entries + SLACK_LINES

    def working_set(self) -> int:
        """Bytes the parsed arrays, the CSR result and its dense operand vectors take (rough,
        on the high side): what reading must be able to allocate besides the text."""
        vectors = 24 * (self.rows + 1) + 8 * self.cols
        if self.fmt == "array":
            return 32 * self.rows * self.cols + vectors
        expanded = 1 if self.symmetry == "general" else 2
        return self.entries * (24 + 64 * expanded) + vectors

    def describe(self) -> str:
        what = "entries" if self.fmt == "coordinate" else "values"
        return f"a {self.rows}x{self.cols} matrix with {self.entries} stored {what}"


def fields(line: bytes) -> list[tuple[int, bytes]]:
    """(1-based column, token) of every space- or tab-separated token of ``line``."""
    return [(m.start() + 1, m.group()) for m in _FIELD_RE.finditer(line)]


def next_line(text: bytes, pos: int) -> tuple[bytes, int]:
    """The line starting at ``pos`` (without its LF and a CR before it), and the offset after."""
    end = text.find(b"\n", pos)
    line, after = (text[pos:], len(text)) if end < 0 else (text[pos:end], end + 1)
    return (line[:-1] if line.endswith(b"\r") else line), after


def parse_header(text: bytes, source: Source, *, complete: bool) -> Header:
    """Parse the header at the start of ``text`` (the whole file when ``complete``, else its
    first ``HEADER_BYTES`` or more)."""
    if not text:
        raise source.error(f"empty file (expected a banner {_BANNER})", 1)
    banner, pos = next_line(text, 0)
    fmt, field, symmetry = _parse_banner(banner, source)
    line_no = 1
    while True:
        if pos >= len(text) and complete:
            raise source.error("file ends before the size line", line_no + 1)
        if pos > HEADER_BYTES or (not complete and text.find(b"\n", pos) < 0):
            raise source.error(
                f"no size line within the first {format_bytes(HEADER_BYTES)} of text", line_no + 1
            )
        line, pos = next_line(text, pos)
        line_no += 1
        first = line.lstrip(b" \t")[:1]
        if first and first != b"%":  # not blank, not a comment: the size line
            break
    sizes = _parse_sizes(fields(line), line, 3 if fmt == "coordinate" else 2, source, line_no)
    rows, cols = sizes[0], sizes[1]
    if symmetry != "general" and rows != cols:
        raise source.error(
            f"a {symmetry} matrix must be square, the size line says {rows}x{cols}", line_no
        )
    if fmt == "coordinate":
        entries = sizes[2]
        if entries > rows * cols:
            raise source.error(
                f"size line declares {entries} entries, more than {rows}x{cols} can hold", line_no
            )
    elif symmetry == "general":
        entries = rows * cols
    elif symmetry == "skew-symmetric":
        entries = rows * (rows - 1) // 2
    else:
        entries = rows * (rows + 1) // 2
    return Header(fmt, field, symmetry, rows, cols, entries, pos, line_no + 1)


def _parse_banner(banner: bytes, source: Source) -> tuple[str, str, str]:
    words = [token.decode("latin-1") for _, token in fields(banner)]
    if not words or words[0].lower() != "%%matrixmarket":
        raise source.error(f"not a Matrix Market file: the first line must be {_BANNER}", 1)
    if len(words) != 5:
        raise source.error(f"malformed banner {shown(banner, 80)}: expected {_BANNER}", 1)
    obj, fmt, field, symmetry = (w.lower() for w in words[1:])
    if obj != "matrix":
        raise source.error(f"object {shown(obj)} is not supported (only 'matrix')", 1)
    if fmt not in FORMATS:
        raise source.error(
            f"format {shown(fmt)} is not supported (expected coordinate or array)", 1
        )
    if field == "complex":
        raise source.error(
            "complex matrices are not supported (teaal-loops handles real values only)", 1
        )
    if field not in FIELDS:
        raise source.error(f"field {shown(field)} is not supported (expected one of {FIELDS})", 1)
    if symmetry not in SYMMETRIES:
        raise source.error(
            f"symmetry {shown(symmetry)} is not supported (expected one of {SYMMETRIES})", 1
        )
    if fmt == "array" and field == "pattern":
        raise source.error("'array pattern' is not a valid Matrix Market combination", 1)
    return fmt, field, symmetry


def _parse_sizes(
    tokens: list[tuple[int, bytes]], line: bytes, want: int, source: Source, line_no: int
) -> list[int]:
    what = "'ROWS COLS ENTRIES'" if want == 3 else "'ROWS COLS'"
    if len(tokens) != want:
        raise source.error(f"malformed size line {shown(line, 80)}: expected {what}", line_no)
    sizes = []
    for column, token in tokens:
        try:
            sizes.append(parse_count(token))
        except NotAnInteger:
            raise source.error(
                f"malformed size line {shown(line, 80)}: {shown(token)} is not a non-negative "
                f"integer (expected {what})",
                line_no,
                column,
            ) from None
        except TooLarge:
            raise source.error(
                f"size {shown(token)} is too large (sizes are limited to 2^62)", line_no, column
            ) from None
    return sizes
