"""Plain values every layer shares: matrix shapes, device facts, launch geometry, kernel ABI.

This module is a leaf: it imports nothing from teaal-loops, so the spec front end, the IR, the
layout and schedule definitions, code generation and the runtime can all name these types
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

INT32_MAX = 2**31 - 1


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def index_bits(rows: int, nnz: int) -> int:
    """64 when an offset or a merge-path item index could exceed int32, else 32."""
    return 64 if nnz > INT32_MAX or rows + nnz > INT32_MAX else 32


@dataclass(frozen=True)
class MatrixShape:
    """What binding needs to know about a matrix (or a layout's tiles): cheap statistics only.

    For a layout, ``rows`` counts tiles, ``nnz`` atoms and ``max_row`` the most atoms of a tile.
    """

    rows: int
    cols: int
    nnz: int
    max_row: int = 0


@dataclass(frozen=True)
class DeviceInfo:
    """The GPU properties launch defaults depend on. ``H100`` is used when no GPU is present."""

    name: str
    sm_count: int
    max_threads_per_sm: int = 2048
    l2_bytes: int = 50 * 2**20

    @classmethod
    def h100(cls) -> DeviceInfo:
        return cls(name="NVIDIA H100 (assumed)", sm_count=132)


@dataclass(frozen=True)
class Launch:
    blocks: int
    threads_per_block: int

    @property
    def total_threads(self) -> int:
        return self.blocks * self.threads_per_block


@dataclass(frozen=True)
class KernelParam:
    """One kernel argument: its CUDA type as written in the signature and its name.

    Layouts and schedules declare their arguments as lists of these; the templates render the
    signature from them and the runtime orders its launch arguments by them, so the two cannot
    drift apart.
    """

    name: str
    ctype: str  # "index_t", "offset_t", "const offset_t* __restrict__", ...
    doc: str = ""

    @property
    def is_pointer(self) -> bool:
        return "*" in self.ctype

    @property
    def scalar_type(self) -> str:
        """The element type without qualifiers (``offset_t`` for ``const offset_t*``)."""
        return self.ctype.replace("const", "").replace("__restrict__", "").replace("*", "").strip()
