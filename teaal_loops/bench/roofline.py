"""The compulsory-bytes roofline of CSR SpMV: the bytes a kernel must move, and its share.

An SpMV ``y = A x`` must read every stored value and column index once, the row offsets once,
the vector ``x`` once (at least: a column that is touched at all), and write ``y`` once:

    bytes = nnz * (value + index) + (rows + 1) * offset + cols * value + rows * value

``index`` is the width of a column index (4 bytes: int32), ``offset`` the width of a row offset
(4 bytes, or 8 when the matrix needs 64-bit offsets). Any kernel moves at least this many bytes
through device memory, so ``bytes / time`` (achieved GB/s) over a measured device-to-device copy
rate (bytes read plus bytes written, over time) is the fraction of the memory system a kernel
uses. Fractions near 1 mean the kernel is as fast as the data allows; re-read vectors, zeroing
and atomics move more than the compulsory bytes and show up as lower fractions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INDEX_BYTES = 4  # int32 column indices


@dataclass(frozen=True)
class Roofline:
    """Achieved bandwidth of one timed kernel against the compulsory bytes and the copy rate."""

    bytes: int
    ms: float
    gbps: float  # compulsory bytes / time, in 1e9 bytes per second
    copy_gbps: float | None  # the device-to-device copy rate measured in the same run
    copy_fraction: float | None  # gbps / copy_gbps


def value_bytes(dtype: object) -> int:
    """4 for float32, 8 for float64 (anything NumPy's ``dtype`` accepts)."""
    return int(np.dtype(dtype).itemsize)  # type: ignore[call-overload]


def compulsory_bytes(
    rows: int, cols: int, nnz: int, dtype: object = "float32", *, offset_bytes: int = 4
) -> int:
    """``nnz*(value+index) + (rows+1)*offset + cols*value + rows*value`` (module docstring)."""
    if min(rows, cols, nnz) < 0:
        raise ValueError(f"negative matrix size: rows={rows}, cols={cols}, nnz={nnz}")
    if offset_bytes not in (4, 8):
        raise ValueError(f"offset_bytes must be 4 or 8, got {offset_bytes}")
    value = value_bytes(dtype)
    return nnz * (value + INDEX_BYTES) + (rows + 1) * offset_bytes + cols * value + rows * value


def gbps(nbytes: int, ms: float) -> float:
    """Bytes over milliseconds, in GB/s (1e9 bytes per second)."""
    if ms <= 0:
        raise ValueError(f"time must be positive, got {ms} ms")
    return nbytes / (ms * 1e-3) / 1e9


def roofline(nbytes: int, ms: float, copy_gbps: float | None) -> Roofline:
    """Achieved GB/s of ``nbytes`` in ``ms`` and its fraction of the copy rate (if measured)."""
    achieved = gbps(nbytes, ms)
    fraction = achieved / copy_gbps if copy_gbps else None
    return Roofline(nbytes, ms, achieved, copy_gbps, fraction)


def copy_bytes(buffer_bytes: int) -> int:
    """Bytes a device-to-device copy of ``buffer_bytes`` moves: read once plus written once."""
    return 2 * buffer_bytes
