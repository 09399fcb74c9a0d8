"""Getting a Matrix Market text into memory without letting it take more than it declares.

Only regular files are read (a device such as ``/dev/zero``, a pipe or a socket is refused
before it is opened, so nothing blocks or runs forever). The header is parsed from the first
``HEADER_BYTES`` of text; its budgets (see :mod:`teaal_loops.matrix.mm_header`) then bound the
rest: a plain file larger than its budget is refused before it is read, and a gzip stream is
inflated chunk by chunk and stopped as soon as its text or its line count outgrows the budget.
"""

from __future__ import annotations

import io
import os
import stat
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from teaal_loops.errors import Location
from teaal_loops.matrix import limits
from teaal_loops.matrix.limits import check_memory, format_bytes
from teaal_loops.matrix.mm_header import (
    BYTES_PER_ENTRY,
    HEADER_BYTES,
    SLACK_LINES,
    Header,
    Source,
    parse_header,
)

GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20


def read_file(path: str, source: Source) -> tuple[bytes, Header]:
    """The decompressed text of the regular file ``path`` and its header (budgets enforced)."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise source.error("no such file") from None
    except OSError as exc:
        raise source.error(f"cannot read the file: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise source.error("is a directory, not a Matrix Market file")
    if not stat.S_ISREG(info.st_mode):
        raise source.error(
            "is not a regular file (a device, pipe or socket); give a .mtx or .mtx.gz file"
        )
    try:
        with open(path, "rb") as handle:
            return read_stream(handle, info.st_size, source)
    except OSError as exc:
        raise source.error(f"cannot read the file: {exc.strerror or exc}") from None


def read_stream(handle: BinaryIO, size: int, source: Source) -> tuple[bytes, Header]:
    """Like :func:`read_file` for an open binary stream of ``size`` bytes."""
    magic = handle.read(2)
    handle.seek(0)
    if magic == GZIP_MAGIC:
        return _read_gzip(handle, size, source)
    return _read_plain(handle, size, source)


def read_bytes(data: bytes, source: Source) -> tuple[bytes, Header]:
    """Like :func:`read_file` for text (or gzip data) already in memory."""
    if not data.startswith(GZIP_MAGIC):
        return _checked_plain(bytes(data), source)
    return read_stream(io.BytesIO(data), len(data), source)


def _read_plain(handle: BinaryIO, size: int, source: Source) -> tuple[bytes, Header]:
    prefix = handle.read(HEADER_BYTES + 1)
    header = parse_header(prefix, source, complete=len(prefix) <= HEADER_BYTES)
    _check_size(header, size, source)
    handle.seek(0)
    text = handle.read(header.text_budget() + 1)  # +1: a file that grew since stat() shows
    return _checked_plain(text, source, header)


def _checked_plain(
    text: bytes, source: Source, header: Header | None = None
) -> tuple[bytes, Header]:
    if header is None:
        header = parse_header(text[: HEADER_BYTES + 1], source, complete=len(text) <= HEADER_BYTES)
        _check_size(header, len(text), source)
    if len(text) > header.text_budget():
        raise _too_much_text(header, text.count(b"\n", 0, header.text_budget()) + 1, source)
    if text.count(b"\n") > header.line_budget():
        raise _too_many_lines(header, source)
    return text, header


def _check_size(header: Header, size: int, source: Source) -> None:
    where = header.body_first_line - 1
    if size > header.text_budget():
        raise source.error(
            f"the file holds {format_bytes(size)}, more than {header.describe()} can take "
            f"({format_bytes(header.text_budget())}: {BYTES_PER_ENTRY} bytes per entry and "
            f"{format_bytes(HEADER_BYTES)} for the header)",
            where,
        )
    check_memory(
        size + header.working_set(),
        f"the size line declares {header.describe()}; reading it",
        Location(source.name, where),
    )


def _read_gzip(handle: BinaryIO, size: int, source: Source) -> tuple[bytes, Header]:
    """Inflate chunk by chunk: the header from the first MiB, then the rest within budget."""
    out = bytearray()
    newlines = 0
    header: Header | None = None
    budget = 0  # set with the header
    stream = _inflate(handle)
    try:
        for chunk in stream:
            out += chunk
            newlines += chunk.count(b"\n")
            if header is None and len(out) > HEADER_BYTES:
                header, budget = _gzip_header(out, size, source, complete=False)
            if header is not None and len(out) > budget:
                raise _too_much_text(header, newlines + 1, source, budget)
            if header is not None and newlines > header.line_budget():
                raise _too_many_lines(header, source)
    except (zlib.error, EOFError) as exc:
        raise source.error(
            f"broken gzip stream: {exc} (decompressed text ends inside line {newlines + 1})",
            newlines + 1,
        ) from None
    if header is None:
        header, _ = _gzip_header(out, size, source, complete=True)
        if newlines > header.line_budget():
            raise _too_many_lines(header, source)
    return bytes(out), header


def _gzip_header(
    out: bytearray, size: int, source: Source, *, complete: bool
) -> tuple[Header, int]:
    """The header of the text inflated so far, and how much text the stream may still yield."""
    header = parse_header(bytes(out[: HEADER_BYTES + 1]), source, complete=complete)
    where = header.body_first_line - 1
    if size > header.text_budget():
        raise source.error(
            f"the compressed file holds {format_bytes(size)}, more than the text of "
            f"{header.describe()} can take",
            where,
        )
    working = header.working_set() + 2 * len(out)
    check_memory(
        working,
        f"the size line declares {header.describe()}; reading it",
        Location(source.name, where),
    )
    budget = header.text_budget()
    if 2 * budget + working > (256 << 20):  # the text is held twice while it is copied out
        budget = min(budget, max(HEADER_BYTES, (limits.available_memory() - working) // 2))
    return header, budget


def _inflate(handle: BinaryIO) -> Iterator[bytes]:
    """Decompressed chunks of every gzip member; up to ``_CHUNK`` NUL bytes of padding may
    follow the last member (tape-block padding), anything else must be another member."""
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    pending = handle.read(_CHUNK)
    while True:
        chunk = decompressor.decompress(pending, _CHUNK)
        pending = decompressor.unconsumed_tail
        if chunk:
            yield chunk
        if decompressor.eof:
            pending = _after_member(decompressor.unused_data, handle)
            if not pending:
                return
            decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        elif len(chunk) < _CHUNK and not pending:  # all output out: zlib needs more input
            pending = handle.read(_CHUNK)
            if not pending:
                raise EOFError("compressed data ends before the end-of-stream marker")


def _after_member(rest: bytes, handle: BinaryIO) -> bytes:
    """The start of the next member after a member's end, or b"" at the end of the file."""
    padding = 0
    while not rest.strip(b"\x00"):
        padding += len(rest)
        if padding > _CHUNK:
            raise EOFError("more than 1 MiB of NUL bytes after the last gzip member")
        rest = handle.read(_CHUNK)
        if not rest:
            return b""
    return rest


def _too_much_text(
    header: Header, line: int, source: Source, budget: int | None = None
) -> Exception:
    budget = header.text_budget() if budget is None else budget
    if budget < header.text_budget():
        return source.error(
            f"the decompressed text passes {format_bytes(budget)} and no more memory is "
            f"available (reading stopped)",
            line,
        )
    return source.error(
        f"the text outgrows its size line: more than {format_bytes(budget)} for "
        f"{header.describe()} (at most {BYTES_PER_ENTRY} bytes per entry and "
        f"{format_bytes(HEADER_BYTES)} for the header)",
        line,
    )


def _too_many_lines(header: Header, source: Source) -> Exception:
    return source.error(
        f"more than {header.line_budget()} lines for {header.describe()} (at most two lines "
        f"per entry and {SLACK_LINES} more, blank and comment lines included)",
        header.line_budget() + 1,
    )
