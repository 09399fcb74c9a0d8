"""Bounds on sizes that users write: integers, and the memory a matrix will need.

Every size a user writes (a Matrix Market size line or index, a ``--synthetic`` key) is read
here as text first: only ASCII digits, at most ``MAX_DIGITS`` significant digits (so a
million-digit string is refused without converting it), and at most ``MAX_INT`` (2**62). The
memory a matrix needs is then compared with the memory the host has available *before* anything
is allocated, so an impossible size is one clear error instead of a MemoryError or a swap storm.
"""

from __future__ import annotations

import os

try:
    import resource
except ImportError:  # pragma: no cover - not a Unix host
    resource = None  # type: ignore[assignment]

from teaal_loops.errors import Location, MatrixError

MAX_INT = 2**62
MAX_DIGITS = 19  # 2**62 has 19 digits
_SMALL = 256 << 20  # below this, a request is not worth reading /proc for


class NotAnInteger(ValueError):
    """The text is not a plain non-negative decimal integer."""


class TooLarge(ValueError):
    """The text is a decimal integer above ``MAX_INT`` (or longer than ``MAX_DIGITS``)."""


def parse_count(text: str | bytes) -> int:
    """Plain non-negative decimal ``text`` as an int; NotAnInteger / TooLarge otherwise."""
    if isinstance(text, bytes):
        text = text.decode("latin-1")
    if not text or not (text.isascii() and text.isdigit()):
        raise NotAnInteger(text)
    digits = text.lstrip("0")
    if len(digits) > MAX_DIGITS:
        raise TooLarge(text)
    value = int(digits or "0")
    if value > MAX_INT:
        raise TooLarge(text)
    return value


def shown(text: str | bytes, limit: int = 32) -> str:
    """``text`` quoted for a one-line message: escaped, and cut after ``limit`` characters."""
    if isinstance(text, bytes):
        text = text.decode("latin-1")
    if len(text) > limit:
        return f"{text[:limit]!r}... ({len(text)} characters)"
    return repr(text)


def format_bytes(count: int) -> str:
    """``1536`` -> ``'1.5 KiB'``; sizes beyond the units are written as a power of two."""
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024 or unit == "EiB":
            if value >= 1024:
                return f"2^{count.bit_length() - 1} bytes"
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def available_memory() -> int:
    """Bytes this process may still allocate: the smallest of MemAvailable (or physical
    memory), the cgroup v2 limit minus its usage, and the address-space rlimit."""
    candidates = [_meminfo_available()]
    cgroup = _cgroup_room()
    if cgroup is not None:
        candidates.append(cgroup)
    if resource is not None:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY and soft > 0:
            candidates.append(int(soft))
    return max(0, min(candidates))


def check_memory(need: int, what: str, location: Location | None = None) -> None:
    """Raise MatrixError when ``need`` bytes (the whole working set of ``what``) cannot fit."""
    if need <= _SMALL:
        return
    room = available_memory()
    if need > room:
        raise MatrixError(
            f"{what} needs about {format_bytes(need)} of memory, more than the "
            f"{format_bytes(room)} available",
            location=location,
        )


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError):  # pragma: no cover - no sysconf: assume a small machine
        return 4 << 30


def _cgroup_room() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as handle:
            limit = handle.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as handle:
            used = int(handle.read().strip())
        return int(limit) - used
    except (OSError, ValueError):
        return None
