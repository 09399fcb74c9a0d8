"""Host layouts: a matrix in a layout's arrays on the host, built from canonical CSR.

Every host layout has ``.shape``, ``.nnz`` (nonzeros of the source CSR), ``.nbytes`` (bytes of
its arrays), ``.stored`` (value slots, padding included), ``.arrays()`` (name -> array),
``.tile_ptr()`` (the contract's tile offsets) and ``.to_csr()``. ``to_csr`` is exact for
csr/csc/coo/ell (explicitly stored zeros included); bcsr and dia cannot tell a stored zero
from padding, so their ``to_csr`` drops zeros.

Padding guard: padded layouts (ell, bcsr, dia) refuse (:class:`LayoutError`) when their arrays
would take more than ``PADDING_LIMIT`` (20) times the bytes of the source CSR (``indptr +
indices + data``); the check runs before anything is allocated. ``padding_limit=`` overrides it
per call (``None`` disables it; the command line's ``--padding-limit`` passes it).
:func:`check_fits_device` is the device-side counterpart (loops' SKIP_TOO_LARGE).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from teaal_loops.errors import DeviceError, LayoutError, MatrixError
from teaal_loops.layouts.contract import TileView
from teaal_loops.layouts.registry import build_options, get_layout, split_name
from teaal_loops.matrix.convert import as_csr

PADDING_LIMIT = 20.0


@dataclass(frozen=True, eq=False)
class HostLayout:
    """Common interface of host layouts (module docstring). Subclasses set ``name`` and
    their arrays and implement ``arrays``, ``tile_ptr`` and ``to_csr``."""

    name: ClassVar[str] = "layout"
    shape: tuple[int, int]
    nnz: int

    def arrays(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def tile_ptr(self) -> npt.NDArray[np.int64]:
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.arrays().values())

    @property
    def stored(self) -> int:
        """Value slots the layout stores, padding included."""
        return self.nnz

    def to_csr(self) -> sp.csr_matrix:
        raise NotImplementedError


def convert(A: Any, name: str, **options: Any) -> Any:
    """Build layout ``name`` (``"ell"``, ``"bcsr:4x4"``) from ``A`` (anything
    :func:`~teaal_loops.matrix.as_csr` accepts); ``options`` go to the layout's builder."""
    if not isinstance(name, str):
        raise LayoutError(f"layout name {name!r} is not a string")
    definition = get_layout(name)
    merged = {**build_options(name), **options}
    return definition.build(as_csr(A), **merged)


def host_layout(A: Any, name: str, **options: Any) -> Any:
    """``A`` in host layout ``name``: ``A`` itself when it already is one (built by the user,
    e.g. with ``padding_limit=None``), else :func:`convert`."""
    base, _ = split_name(name)
    if getattr(A, "name", None) == base and hasattr(A, "arrays") and hasattr(A, "tile_ptr"):
        return A
    return convert(A, name, **options)


def tile_view(layout: str, A: Any) -> TileView:
    """The tile view of ``A`` in ``layout`` (a matrix, or an already-built host layout)."""
    definition = get_layout(layout)
    _, option = split_name(layout)
    host = host_layout(A, layout)
    rows, cols = (int(n) for n in host.shape)
    return TileView(
        tile_ptr=np.asarray(host.tile_ptr(), dtype=np.int64),
        entries=definition.entries(host, option),
        rows=rows,
        cols=cols,
        scatter=definition.scatters,
        stacked=definition.stacked,
        adding_from=definition.adding_from(host) if definition.adding_from else 0,
    )


# --------------------------------------------------------------------------------------------
# Guards


def csr_bytes(csr: sp.csr_matrix) -> int:
    """Bytes of a CSR matrix's three arrays: the reference the padding limit multiplies."""
    return int(csr.indptr.nbytes + csr.indices.nbytes + csr.data.nbytes)


def check_padding(
    name: str, padded_bytes: int, csr: sp.csr_matrix, limit: float | None = PADDING_LIMIT
) -> None:
    """Refuse a padded layout larger than ``limit`` times the CSR storage (None: no limit)."""
    if limit is None:
        return
    reference = max(csr_bytes(csr), 1)
    if padded_bytes > limit * reference:
        raise LayoutError(
            f"the {name} layout of this {csr.shape[0]}x{csr.shape[1]} matrix ({csr.nnz} nonzeros) "
            f"would take {human_bytes(padded_bytes)}, {padded_bytes / reference:.1f}x its CSR "
            f"storage ({human_bytes(reference)}); the limit is {limit:g}x (SKIP_TOO_LARGE). "
            "Use csr, or lift the limit: teaal-loops run --padding-limit none, or "
            "padding_limit=None in teaal_loops.compile or teaal_loops.layouts.convert"
        )


def check_fits_device(nbytes: int, free_bytes: int, *, what: str = "the matrix") -> None:
    """Raise DeviceError (loops' SKIP_TOO_LARGE) when ``nbytes`` exceed the free device memory."""
    if nbytes > free_bytes:
        raise DeviceError(
            f"SKIP_TOO_LARGE: {what} needs {human_bytes(nbytes)} of device memory but only "
            f"{human_bytes(free_bytes)} is free"
        )


def human_bytes(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(nbytes) < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} GiB"  # pragma: no cover


# --------------------------------------------------------------------------------------------
# Helpers the built-in builders share


def canonical_csr(csr: sp.csr_matrix) -> sp.csr_matrix:
    csr = sp.csr_matrix(csr)
    csr.sum_duplicates()
    csr.sort_indices()
    return csr


def padding_limit(options: dict[str, Any]) -> float | None:
    limit = options.pop("padding_limit", PADDING_LIMIT)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float))):
        raise LayoutError(f"padding_limit={limit!r} is not a number (or None)")
    return None if limit is None else float(limit)


def no_options(name: str, options: dict[str, Any], valid: tuple[str, ...] = ()) -> None:
    """Refuse options the layout does not take. ``padding_limit`` is accepted (and has nothing
    to limit) everywhere, so one setting can be passed whatever the layout."""
    options.pop("padding_limit", None)
    if options:
        valid_text = ", ".join(valid) if valid else "none"
        raise LayoutError(
            f"layout {name}: unknown option(s) {', '.join(sorted(options))} "
            f"(valid options: {valid_text})"
        )


def signed_index(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return np.dtype(np.int64) if dtype.itemsize > 4 else np.dtype(np.int32)


def row_ids(csr: sp.csr_matrix) -> np.ndarray:
    """The row of every stored entry of ``csr``."""
    lengths = np.diff(csr.indptr)
    return np.repeat(np.arange(csr.shape[0], dtype=csr.indices.dtype), lengths)


def rows_of(ptr: Any) -> npt.NDArray[np.int64]:
    """The tile of every atom, from tile offsets."""
    ptr = np.asarray(ptr, dtype=np.int64)
    return np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))


def uniform_ptr(tiles: int, atoms_per_tile: int) -> npt.NDArray[np.int64]:
    """Tile offsets of a layout whose every tile holds the same number of atoms (padded)."""
    return np.arange(tiles + 1, dtype=np.int64) * atoms_per_tile


def whole_number_option(option: Any, layout: str, *, key: str, meaning: str, example: int,
                        default: int, bounds: tuple[int, int]) -> int:
    """The one reading of a layout's whole-number option (``panels:3``, ``heavy:1024``): the
    text after the colon or a builder's ``key=`` value; None or blank gives ``default``. A bad
    one is a LayoutError naming ``meaning`` (``"the panel count"``) and the bounds."""
    if option is None or (isinstance(option, str) and not option.strip()):
        return default
    if isinstance(option, str):
        match = re.fullmatch(r"\s*(\d{1,9})\s*", option)
        if match is None:
            raise LayoutError(f"layout {layout}:{option}: the option is {meaning} "
                              f"(e.g. {layout}:{example})")
        value = int(match.group(1))
    elif isinstance(option, (int, np.integer)) and not isinstance(option, bool):
        value = int(option)
    else:
        raise LayoutError(f"layout {layout}: {key}={option!r} must be a whole number")
    lo, hi = bounds
    if not lo <= value <= hi:
        raise LayoutError(f"layout {layout}:{value}: {meaning} must be {lo} to {hi}")
    return value


def need(condition: bool, layout: str, what: str) -> None:
    """A packer's check of a host layout the user built by hand."""
    if not condition:
        raise MatrixError(f"{layout} matrix: {what}")


def check_ptr(ptr: np.ndarray[Any, Any], count: int, atoms: int, layout: str, of: str) -> None:
    need(len(ptr) == count + 1, layout, f"{len(ptr)} {of} offsets, expected {count + 1}")
    need(len(ptr) == 0 or int(ptr[0]) == 0, layout, f"{of} offsets do not start at 0")
    need(bool(np.all(np.diff(ptr) >= 0)), layout, f"{of} offsets decrease")
    need(len(ptr) == 0 or int(ptr[-1]) == atoms, layout, f"last {of} offset is not {atoms}")


def in_range(values: np.ndarray[Any, Any], lo: int, hi: int) -> bool:
    return len(values) == 0 or (int(values.min()) >= lo and int(values.max()) < hi)
