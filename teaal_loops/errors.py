"""One exception family for everything a user can get wrong.

Every error a user can cause (a malformed spec, an unsupported mapping, a broken matrix file,
an unbound parameter, a missing GPU) is a :class:`TeaalLoopsError`. The CLI catches exactly this
family and prints ``FILE:LINE:COL: error: MESSAGE`` (or ``error: MESSAGE`` where no location
applies) and exits with status 2; anything else escaping is a bug in teaal-loops.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """Where in a source file something was written (1-based line and column)."""

    file: str | None
    line: int | None = None
    column: int | None = None

    def prefix(self) -> str:
        parts = [self.file or "<string>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)


class TeaalLoopsError(Exception):
    """Base of every user-facing error. ``str(err)`` is the one-line CLI message."""

    def __init__(self, message: str, *, location: Location | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        if self.location is None:
            return f"error: {self.message}"
        return f"{self.location.prefix()}: error: {self.message}"


class SpecError(TeaalLoopsError):
    """A spec that does not parse or does not validate.

    ``key_path`` is the dotted path of the offending key (``mapping.partitioning.Z.K``),
    ``expected`` says what would have been accepted there.
    """

    def __init__(
        self,
        message: str,
        *,
        location: Location | None = None,
        key_path: str | None = None,
        expected: str | None = None,
    ) -> None:
        self.key_path = key_path
        self.expected = expected
        full = message
        if key_path:
            full = f"{key_path}: {full}"
        if expected:
            full = f"{full} (expected {expected})"
        super().__init__(full, location=location)


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
