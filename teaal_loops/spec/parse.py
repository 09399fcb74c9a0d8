"""YAML -> a :class:`~teaal_loops.spec.draft.Draft`: the structure of every section, located.

Parsing checks *shape* (which keys, which types) and the small languages inside strings
(einsums, partitioning functions, spacetime ranks); each section has its own module
(``section_*.py``, ``partition_functions.py``). Cross-references (is this rank declared? is the
loop order a permutation of the final ranks?) are checked by :mod:`teaal_loops.spec.validate`.

Unknown keys are warnings (TeAAL silently ignores them; we say so, with the close match).
"""

from __future__ import annotations

import errno
import os
import stat

from teaal_loops.errors import Location, SpecError
from teaal_loops.spec.context import Context, suggest
from teaal_loops.spec.draft import Draft
from teaal_loops.spec.key_paths import value_locations
from teaal_loops.spec.section_einsum import parse_einsum_section
from teaal_loops.spec.section_extensions import EXTENSION_SECTION, parse_extensions
from teaal_loops.spec.section_format import parse_format
from teaal_loops.spec.section_hardware import parse_architecture, parse_bindings
from teaal_loops.spec.section_mapping import parse_mapping
from teaal_loops.spec.yaml_positions import load_yaml

__all__ = ["Context", "Draft", "parse_document", "read_spec_text", "MAX_SPEC_BYTES"]

TOP_KEYS = ("einsum", "mapping", "format", "architecture", "bindings", EXTENSION_SECTION)
# Specs are a few kilobytes; this bounds the memory a hostile file can take.
MAX_SPEC_BYTES = 16 * 1024 * 1024


def parse_document(text: str, ctx: Context) -> Draft:
    root = load_yaml(text, ctx.source)
    if root is None:
        ctx.fail("the spec is empty", None, None, expected="a mapping with an einsum section")
    top = ctx.want_map(root, "", "a mapping with an einsum section at the top level")
    ctx.check_keys(top, TOP_KEYS, "")

    einsum_entry = top.get("einsum")
    if einsum_entry is None:
        found = ", ".join(top.keys()[:20]) or "no keys"
        close = suggest("einsum", top.keys())
        hint = f"; is {close[0]!r} a misspelling?" if close else ""
        ctx.fail(
            f"the spec has no einsum section (found: {found}){hint}",
            top,
            "einsum",
            expected="an einsum section with declaration and expressions",
        )
    draft = parse_einsum_section(einsum_entry, ctx)
    draft.locations = value_locations(root)

    if (entry := top.get("mapping")) is not None:
        parse_mapping(entry, ctx, draft)
    if (entry := top.get("format")) is not None:
        parse_format(entry, ctx, draft)
    if (entry := top.get("architecture")) is not None:
        draft.architecture = parse_architecture(entry, ctx)
    if (entry := top.get("bindings")) is not None:
        draft.bindings = parse_bindings(entry, ctx, draft)
    if (entry := top.get(EXTENSION_SECTION)) is not None:
        draft.extensions = parse_extensions(entry, ctx)
    return draft


def read_spec_text(path: str | os.PathLike[str]) -> str:
    """Read a spec file as UTF-8.

    Anything that is not a readable regular file of at most :data:`MAX_SPEC_BYTES` (a
    directory, a FIFO or device, a symlink loop, a name too long, ``/proc/self/mem``) is a
    :class:`SpecError` naming the file; so is text that is not UTF-8 (with its line)."""
    name = os.fspath(path)
    data = _read_bounded(name)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        col = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise SpecError(
            f"the file is not UTF-8 text (byte 0x{data[err.start]:02x})",
            location=Location(name, line, col),
        ) from None
    return text.removeprefix("\ufeff")


def _read_bounded(name: str) -> bytes:
    def refuse(why: str) -> SpecError:
        return SpecError(why, location=Location(name))

    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError) as err:  # ValueError: a NUL byte in the name
        raise refuse(_reason(err)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise refuse("is a directory, expected a file")
        if not stat.S_ISREG(info.st_mode):
            raise refuse("not a regular file (a FIFO, device or socket), expected a spec file")
        if info.st_size > MAX_SPEC_BYTES:
            raise refuse(_TOO_LARGE)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_SPEC_BYTES + 1)  # files in /proc report size 0
    except OSError as err:
        raise refuse(_reason(err)) from None
    finally:
        os.close(fd)
    if len(data) > MAX_SPEC_BYTES:
        raise refuse(_TOO_LARGE)
    return data


_TOO_LARGE = f"larger than {MAX_SPEC_BYTES // (1024 * 1024)} MiB, which no spec needs"
_REASONS = {
    errno.ENOENT: "no such file",
    errno.EISDIR: "is a directory, expected a file",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOTDIR: "a component of the path is not a directory",
    errno.ELOOP: "too many levels of symbolic links",
    errno.ENAMETOOLONG: "the file name is too long",
}


def _reason(err: Exception) -> str:
    if isinstance(err, OSError):
        if err.errno in _REASONS:
            return _REASONS[err.errno]
        if err.strerror:
            return f"cannot read the file: {err.strerror}"
    return f"cannot read the file: {err}"
