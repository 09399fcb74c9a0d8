"""The layout contract: what every sparse layout supplies, stated once.

A layout is a TeAAL rank order plus per-rank formats (``[M, K]`` with M uncompressed and K
compressed is CSR). To a schedule it supplies *tiles* (the units the schedule's tile rank
enumerates: rows, columns, block rows) and *atoms* (the stored units of a tile: nonzeros,
padded slots, blocks). Schedules see nothing else, so every schedule runs on every layout
whose tiles and atoms it can map, and no schedule names a layout.

Invariants every layout keeps (built-in or user-defined; :func:`teaal_loops.layouts.register`
checks what can be checked before anything is registered):

1. Atoms are numbered ``0 .. num_atoms - 1`` so that the atoms of tile ``t`` are the contiguous
   range ``tile_ptr[t] .. tile_ptr[t + 1] - 1``; ``tile_ptr`` starts at 0 and never decreases.
   The host layout object returns it from ``tile_ptr()``; it is the one place tiles and atoms
   are counted (:func:`tile_shape`), for binding, for the runtime and for the CPU simulation.
2. Ownership is defined on atoms. The trace build writes ``owner[a]`` for every atom ``a`` it
   processes, padding atoms included, so the owner array has ``num_atoms`` entries in this
   order, and the simulation computes the same array from ``tile_ptr`` alone.
3. An atom's *entries* (:class:`Entries`) are the (output row, column, value) triples it adds
   to ``y``; padding atoms have none and contribute exactly 0 without reading ``x``.
4. A layout whose tiles are output rows combines as CSR does: the owner of a whole tile stores
   it, a tile split across threads adds one atomic partial sum per thread. A layout whose
   tiles are not output rows (``scatters``, like CSC) adds every atom atomically, and ``y`` is
   zeroed before the launch. A layout whose tiles are output rows repeated (``stacked``: the
   rows of each column panel, the pieces of heavy rows) adds each tile's sum atomically into
   its row where the row is shared (its ``store_tile`` adds), and ``y`` is zeroed before the
   launch.

On the device, the layout's macro file (``templates/layouts/<name>.cuh.j2``) defines a
``Layout`` struct with ``num_tiles()``, ``num_atoms()``, ``tile_begin(t)``, ``tile_end(t)``,
``tile_size(t)`` and ``tile_of(a)``; the accumulator contract ``Layout::Acc``, ``acc_zero()``,
``accumulate(acc, t, a, x, y)``, ``store_tile(y, t, acc)`` and ``atomic_tile(y, t, acc)``; and,
where an atom adds to exactly its own tile's output row, ``atom_product(t, a, x)`` (the
group-mapped and merge-path schedules need it). Its kernel arguments are the definition's
``params``, in signature order. docs/layouts.md walks through adding one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from teaal_loops.spec.model import TensorFormat
from teaal_loops.types import KernelParam, MatrixShape

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Entries:
    """The (atom, output row, column, value) of every stored value, atoms ascending."""

    atom: IntArray
    row: IntArray
    col: IntArray
    val: npt.NDArray[np.float64]


@dataclass(frozen=True)
class Packed:
    """A host layout as kernel arguments: arrays and scalars by kernel-argument name (any
    integer dtype: they are cast to the declared types on upload)."""

    arrays: Mapping[str, np.ndarray[Any, Any]]
    scalars: Mapping[str, int]


def tile_shape(tile_ptr: Any, cols: int) -> MatrixShape:
    """What a schedule binds to: tiles as ``rows``, atoms as ``nnz``, the longest tile."""
    ptr = np.asarray(tile_ptr)
    tiles = max(len(ptr) - 1, 0)
    return MatrixShape(
        rows=tiles,
        cols=cols,
        nnz=int(ptr[-1]) if len(ptr) else 0,
        max_row=int(np.diff(ptr).max()) if tiles else 0,
    )


@dataclass(frozen=True)
class TileView:
    """One matrix in one layout the way every schedule sees it (module docstring)."""

    tile_ptr: IntArray
    entries: Entries
    rows: int
    cols: int
    scatter: bool  # tiles are not output rows (column-major layouts)
    stacked: bool = False  # tiles share output rows (a row per column panel, heavy rows' pieces)
    adding_from: int = 0  # stacked: tiles from this one on add into their rows, the rest store

    @property
    def num_tiles(self) -> int:
        return len(self.tile_ptr) - 1

    @property
    def num_atoms(self) -> int:
        return int(self.tile_ptr[-1])

    @property
    def shape(self) -> MatrixShape:
        return tile_shape(self.tile_ptr, self.cols)


# (canonical CSR, **options) -> host layout object
Builder = Callable[..., Any]
# (host layout, option text or None) -> kernel arguments
Packer = Callable[[Any, "str | None"], Packed]
# (host layout, option text or None) -> entries
EntryLister = Callable[[Any, "str | None"], Entries]
# (array module, CSR indptr, indices, values, (rows, cols), option text or None) -> kernel
# arrays by name, built where the CSR arrays are (CuPy: on the GPU)
DeviceBuilder = Callable[[Any, Any, Any, Any, "tuple[int, int]", "str | None"], dict[str, Any]]
# The most transient device memory a DeviceBuilder may take a nonzero, beside the validated CSR
# it reads: six 8-byte words (the panels builder's sort order, row ids, tile keys and the arrays
# in their new order). The runtime checks that much is free before it calls one.
DEVICE_BUILD_BYTES_PER_NONZERO = 48
# (format, tile rank, atom rank) -> does this TeAAL format describe the layout?
FormatMatcher = Callable[[TensorFormat, str, str], bool]


@dataclass(frozen=True)
class LayoutDefinition:
    """Everything teaal-loops knows about one layout (see :func:`teaal_loops.layouts.register`)."""

    name: str
    macro_file: str  # path under templates/ (or under template_dir)
    params: tuple[KernelParam, ...]  # kernel arguments, in signature order
    build: Builder
    pack: Packer
    entries: EntryLister
    schedules: frozenset[str]  # the schedule kinds it supports
    # The einsum forms it serves (teaal_loops.ir.einsum): "spmv"; "spmm" when its macros read
    # x and y through the XVec/YVec types (strided columns of dense matrices); "sddmm" when
    # its atoms are exactly the nonzeros, each in the row its tile is.
    forms: frozenset[str] = frozenset({"spmv"})
    tiles: str = "rows"  # what a tile is, for messages and explain
    scatters: bool = False
    # Tiles share output rows (each row once per column panel; a heavy row's pieces):
    # store_tile adds atomically where a row is shared and the output is zeroed before a
    # launch. adding_from(host): the first tile that adds (None: every tile).
    stacked: bool = False
    adding_from: Callable[[Any], int] | None = None
    # SpMM: the struct defines store_columns(y, t, v, live) and add_columns(y, t, v, live), a
    # tile's TB outputs at once (as teaal_store_columns and teaal_add_columns take them).
    column_stores: bool = False
    # Atoms are nonzeros, each in its tile's one row, so that atom_product needs no tile: the
    # merge-path staging loads them without finding their rows (register's default: the
    # layouts serving SDDMM).
    atoms_are_nonzeros: bool = False
    description: str = ""
    teaal_format: str = ""  # the TeAAL format it corresponds to, for messages
    # Canonical text of the option after "name:" (None given: the default); raises LayoutError
    # for a bad one. None here: the layout takes no option.
    option: Callable[[str | None], str] | None = None
    # Compile-time constants of an option ("4x4" -> {"R": 4, "C": 4}) for the macro file.
    template_options: Callable[[str | None], Mapping[str, object]] | None = None
    # Options of ``build`` an option carries ("4x4" -> {"block": (4, 4)}).
    build_options: Callable[[str | None], dict[str, Any]] | None = None
    matches_format: FormatMatcher | None = None
    template_dir: Path | None = None
    # Its kernel arguments are exactly CSR's: CuPy/cupyx inputs take the runtime's direct,
    # GPU-validated CSR path instead of a host conversion.
    direct_csr: bool = False
    # Builds the kernel arrays from CSR arrays on the GPU: device inputs are validated as CSR
    # there and never copied to the host (None: the host builder, for every input).
    device_build: DeviceBuilder | None = None

    @property
    def adds_every_tile(self) -> bool:
        """Every tile's sum is added into its output row, none stored: a scatter (CSC's
        columns), or a stacked layout with no storing tiles (column panels, heavy pieces). A
        launch over it may add into an output that already holds values (``accumulate``)."""
        return self.scatters or (self.stacked and self.adding_from is None)
