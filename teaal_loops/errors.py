"""One exception family for everything a user can get wrong.

Every error a user can cause (a malformed spec, an unsupported mapping, a broken matrix file,
an unbound parameter, a missing GPU) is a :class:`TeaalLoopsError`. The CLI catches exactly this
family and prints ``FILE:LINE:COL: error: MESSAGE`` (or ``error: MESSAGE`` where no location
applies) and exits with status 2; anything else escaping is a bug in teaal-loops.

Locating errors that a spec caused
----------------------------------
Code after the front end (lowering, binding, code generation) knows *which* spec value is at
fault but not where it was written. It raises with ``key_path`` alone, the dotted path of the
value in the spec (``mapping.partitioning.Z.M``, ``x-teaal-loops.block_threads``, a list item as
``mapping.spacetime.Z.space[1]``), and the caller that holds the spec fills in the position::

    from teaal_loops.errors import spec_errors

    with spec_errors(spec):          # any TeaalLoopsError raised inside gets spec's position
        schedule = lower(spec)       # for its key_path (the longest prefix the spec knows)

``err.located(spec)`` does the same for one error; it also remembers ``spec``, so the CLI's
``main()`` (which calls ``err.located()`` before printing) can still fill a location for a
``key_path`` set later. An error that already has a line, or has no ``key_path``, is left alone.
"""

from __future__ import annotations

import contextlib
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar


def printable(text: str) -> str:
    """``text`` with control and line-separator characters escaped (``\\n``, ``\\x1b``), so that
    a message quoting user input is always one line and cannot drive a terminal."""
    if all(unicodedata.category(ch) not in ("Cc", "Zl", "Zp") for ch in text):
        return text
    return "".join(
        ch.encode("unicode_escape").decode("ascii")
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp")
        else ch
        for ch in text
    )


@dataclass(frozen=True)
class Location:
    """Where in a source file something was written (1-based line and column)."""

    file: str | None
    line: int | None = None
    column: int | None = None

    def prefix(self) -> str:
        parts = [printable(self.file or "<string>")]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)


class KeyLocator(Protocol):
    """Anything that can say where a spec value was written (a parsed ``Spec`` does)."""

    def location_of(self, key_path: str) -> Location | None: ...


_E = TypeVar("_E", bound="TeaalLoopsError")


class TeaalLoopsError(Exception):
    """Base of every user-facing error. ``str(err)`` is the one-line CLI message.

    ``key_path`` names the spec value at fault (see the module docstring); where the error has
    no line yet, :meth:`located` fills it from a parsed spec.
    """

    def __init__(
        self, message: str, *, location: Location | None = None, key_path: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.key_path = key_path
        self.locator: KeyLocator | None = None

    def located(self: _E, where: KeyLocator | None = None) -> _E:
        """Fill a missing location (or one naming only the file) from ``where`` (default: the
        locator remembered by an earlier call) for ``key_path``; return ``self``.

        The error is changed in place, so ``raise err.located(spec)`` and a bare ``raise``
        after ``err.located(spec)`` both work. ``where`` is remembered."""
        if where is not None and self.locator is None:
            self.locator = where
        where = where or self.locator
        if where is None or not self.key_path:
            return self
        if self.location is not None and self.location.line is not None:
            return self
        found = where.location_of(self.key_path)
        if found is None:
            return self
        if self.location is not None and self.location.file not in (None, found.file):
            return self  # the error is about another file than this spec
        self.location = found
        return self

    def __str__(self) -> str:
        """``FILE:LINE:COL: MESSAGE`` (or the message alone): what a traceback shows after the
        class name, so it does not say "error" twice."""
        if self.location is None:
            return printable(self.message)
        return f"{self.location.prefix()}: {printable(self.message)}"

    def cli_line(self) -> str:
        """The command line's one line: ``FILE:LINE:COL: error: MESSAGE``."""
        if self.location is None:
            return f"error: {printable(self.message)}"
        return f"{self.location.prefix()}: error: {printable(self.message)}"


@contextlib.contextmanager
def spec_errors(spec: KeyLocator) -> Iterator[None]:
    """``with spec_errors(spec): ...``: every :class:`TeaalLoopsError` raised inside leaves with
    the position of its ``key_path`` in ``spec`` (see :meth:`TeaalLoopsError.located`)."""
    try:
        yield
    except TeaalLoopsError as err:
        err.located(spec)
        raise


class SpecError(TeaalLoopsError):
    """A spec that does not parse or does not validate.

    ``key_path`` is the dotted path of the offending key (``mapping.partitioning.Z.K``),
    ``expected`` says what would have been accepted there. Both are part of the message.
    """

    def __init__(
        self,
        message: str,
        *,
        location: Location | None = None,
        key_path: str | None = None,
        expected: str | None = None,
    ) -> None:
        self.expected = expected
        self.detail = message  # the message without the key path and expectation
        full = message
        if key_path:
            shown = key_path if len(key_path) <= 200 else f"{key_path[:120]}...{key_path[-40:]}"
            full = f"{shown}: {full}"
        if expected:
            full = f"{full} (expected {expected})"
        super().__init__(full, location=location, key_path=key_path)


class UnsupportedMappingError(SpecError):
    """A valid TeAAL mapping that the GPU generator cannot honour exactly."""


class ParameterError(TeaalLoopsError):
    """A size parameter that is unbound, unused, or out of range."""


class MatrixError(TeaalLoopsError):
    """A matrix file or array that is broken, out of range, or too large."""


class LayoutError(TeaalLoopsError):
    """A layout that is unknown, does not fit the format, or would be too large."""


class DeviceError(TeaalLoopsError):
    """No CUDA device or CuPy where one is needed, or not enough device memory."""


class ValidationError(TeaalLoopsError):
    """Two views of one computation disagree (values or owners)."""
