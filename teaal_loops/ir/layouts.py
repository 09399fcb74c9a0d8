"""What each sparse layout means to a schedule, and how a TeAAL ``format`` selects one.

A layout is a TeAAL rank order plus per-rank formats (DESIGN §5). To a schedule it supplies
*tiles* (the units the tile rank enumerates) and *atoms* (the stored entries of a tile):

* ``csr``  rank order ``[M, K]``, M:U K:C. Tiles are rows, atoms their nonzeros.
* ``csc``  rank order ``[K, M]``, K:U M:C. Tiles are columns: a tile's results *scatter* into
  many output rows, so every update is an atomicAdd (output zeroed first).
* ``coo``  the flattened ``(M, K)`` rank, both coordinates stored (M:C K:C). Tiles are rows
  found by binary search over the sorted row array; atoms as in CSR.
* ``ell``  ``[M, K]`` with every row padded to the longest: tiles are rows, atoms are slots.
* ``bcsr`` ``[M1, K1, M0, K0]``: tiles are block rows, atoms are dense R x C blocks.
* ``dia``  tiles are rows, atoms are the stored diagonals' entries (a row's slot on each).

Atom numbering, entries and ownership per layout: :mod:`teaal_loops.ir.views`.

A spec's ``format`` section picks the layout either by name (a format called ``csr``, ``ELL``,
``BCSR_4x4``, ...) or by structure (rank order and U/C per rank). ``--layout`` / ``layout=``
overrides both. User-defined layouts register here with :func:`register_layout_semantics`
(or all at once through :func:`teaal_loops.layouts.register`).

Layout names may carry an option after a colon: ``bcsr:4x4`` (block rows x block columns;
``bcsr:4`` is ``4x4``, plain ``bcsr`` is ``2x2``). :func:`canonical_layout` spells every name
one way (``bcsr:4x4``), which is what schedules, kernel headers and file names use.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from teaal_loops.errors import LayoutError, Location
from teaal_loops.ir.model import ScheduleKind
from teaal_loops.spec.model import Spec, TensorFormat

ALL = frozenset(ScheduleKind)
TILED = frozenset({ScheduleKind.THREAD_MAPPED, ScheduleKind.GROUP_MAPPED})


@dataclass(frozen=True)
class LayoutSemantics:
    name: str
    tiles: str  # what a tile is, for messages and explain
    column_major: bool  # tiles are columns of the matrix: rank order [K, M]
    schedules: frozenset[ScheduleKind]
    teaal_format: str  # the TeAAL format it corresponds to, for messages
    # Canonical text of the option after "name:" (None given: the default); raises LayoutError
    # for a bad one. None here: the layout takes no option.
    option: Callable[[str | None], str] | None = None

    @property
    def scatters(self) -> bool:
        """Tile results land in many output rows: every update must be atomic."""
        return self.column_major


_REGISTRY: dict[str, LayoutSemantics] = {}


def register_layout_semantics(semantics: LayoutSemantics, *, replace: bool = False) -> None:
    """Add a layout (built-in or user-defined) to what lowering accepts."""
    key = semantics.name.lower()
    if key in _REGISTRY and not replace:
        raise LayoutError(f"layout {semantics.name} is already registered")
    _REGISTRY[key] = semantics


BCSR_DEFAULT_BLOCK = (2, 2)
BCSR_MAX_BLOCK_CELLS = 256  # R * C: a block row's accumulator lives in R registers per thread


def bcsr_block_shape(option: str | None) -> tuple[int, int]:
    """(R, C) of a ``bcsr`` option: ``"4x2"`` -> (4, 2), ``"4"`` -> (4, 4), None -> 2x2."""
    if option is None or not option.strip():
        return BCSR_DEFAULT_BLOCK
    match = re.fullmatch(r"\s*(\d+)\s*(?:[xX*]\s*(\d+))?\s*", option)
    if match is None:
        raise LayoutError(
            f"layout bcsr:{option}: the block shape must be RxC (e.g. bcsr:4x4) or R (square)"
        )
    R = int(match.group(1))
    C = int(match.group(2)) if match.group(2) else R
    if R < 1 or C < 1 or R * C > BCSR_MAX_BLOCK_CELLS:
        raise LayoutError(
            f"layout bcsr:{option}: block {R}x{C} must have 1 <= R, C and R*C <= "
            f"{BCSR_MAX_BLOCK_CELLS}"
        )
    return R, C


def _bcsr_option(option: str | None) -> str:
    R, C = bcsr_block_shape(option)
    return f"{R}x{C}"


for _sem in (
    LayoutSemantics("csr", "rows", False, ALL, "rank-order [M, K]; M: U, K: C"),
    LayoutSemantics("csc", "columns", True,
                    frozenset({ScheduleKind.THREAD_MAPPED, ScheduleKind.WORK_ORIENTED}),
                    "rank-order [K, M]; K: U, M: C"),
    LayoutSemantics("coo", "rows (found by binary search)", False,
                    frozenset({ScheduleKind.THREAD_MAPPED, ScheduleKind.WORK_ORIENTED}),
                    "rank-order [M, K]; M: C, K: C (both coordinates stored)"),
    LayoutSemantics("ell", "rows (padded to the longest)", False,
                    frozenset({ScheduleKind.THREAD_MAPPED, ScheduleKind.WORK_ORIENTED,
                               ScheduleKind.MERGE_PATH}),
                    "a format named ELL; rank-order [M, K]"),
    LayoutSemantics("bcsr", "block rows", False,
                    frozenset({ScheduleKind.THREAD_MAPPED, ScheduleKind.WORK_ORIENTED}),
                    "rank-order [M1, K1, M0, K0]; M1: U, K1: C, M0: U, K0: U (block shape from "
                    "the format's name, e.g. BCSR_4x4; default 2x2)", _bcsr_option),
    LayoutSemantics("dia", "rows (by diagonal)", False,
                    frozenset({ScheduleKind.THREAD_MAPPED, ScheduleKind.WORK_ORIENTED,
                               ScheduleKind.MERGE_PATH}),
                    "a format named DIA"),
):
    register_layout_semantics(_sem)


def layout_semantics(name: str) -> LayoutSemantics:
    base = name.split(":", 1)[0].strip().lower()  # "bcsr:4x4" carries an option after the colon
    if base not in _REGISTRY:
        from teaal_loops.layouts import load_plugins

        load_plugins()  # installed packages may provide it (entry points, loaded once)
    try:
        return _REGISTRY[base]
    except KeyError:
        raise LayoutError(
            f"unknown layout {name!r}; supported layouts: {', '.join(sorted(_REGISTRY))}"
        ) from None


def canonical_layout(name: str) -> str:
    """The one spelling of a layout name: lower case, option canonical (``BCSR:4`` ->
    ``bcsr:4x4``, ``bcsr`` -> ``bcsr:2x2``). Unknown names and bad options raise LayoutError."""
    base, colon, option = name.strip().partition(":")
    semantics = layout_semantics(base)
    key = semantics.name.lower()
    if semantics.option is None:
        if colon and option.strip():
            raise LayoutError(f"layout {key} takes no option (got {name!r})")
        return key
    return f"{key}:{semantics.option(option.strip() if colon else None)}"


def layout_option(name: str) -> str | None:
    """The option of a layout name (``bcsr:4x4`` -> ``"4x4"``), None when it has none."""
    _, colon, option = name.partition(":")
    return option.strip() if colon and option.strip() else None


def check_schedule_fits(layout: str, kind: ScheduleKind, combine_atomic: bool) -> None:
    """Refuse a schedule kind the layout does not support, or a non-atomic combine on a
    scattering layout (a schedule lowered for another layout). Layouts that lowering does not
    know (registered for code generation only) are not checked."""
    base = layout.split(":", 1)[0].strip().lower()
    semantics = _REGISTRY.get(base)
    if semantics is None:
        return
    if kind not in semantics.schedules:
        raise LayoutError(
            f"layout {layout} ({semantics.tiles}) supports "
            f"{', '.join(sorted(k.value for k in semantics.schedules))}; not {kind.value}"
        )
    if semantics.scatters and not combine_atomic:
        raise LayoutError(
            f"layout {layout} scatters every update atomically, but this schedule was lowered "
            f"for a layout that stores whole tiles: lower the spec with layout={base!r}"
        )


def known_layouts() -> tuple[str, ...]:
    return tuple(sorted(_REGISTRY))


def supported_formats_text() -> str:
    return "; ".join(f"{s.name}: {s.teaal_format}" for s in _REGISTRY.values())


def layout_from_format(spec: Spec, matrix: str, tile: str, atom: str) -> str | None:
    """The layout that ``spec``'s ``format`` section gives ``matrix``, or None if it has none."""
    formats = spec.formats.get(matrix, ())
    if not formats:
        return None
    fmt = formats[0]
    by_name = _layout_by_name(fmt.name)
    if by_name is not None:
        return by_name
    chosen = _layout_by_structure(fmt, tile, atom)
    if chosen is None:
        ranks = ", ".join(f"{r.rank}: {r.format}" for r in fmt.ranks)
        raise LayoutError(
            f"format {fmt.name} of {matrix} (rank-order [{', '.join(fmt.rank_order)}]; {ranks}) "
            f"maps to no layout; supported formats: {supported_formats_text()}; or name the "
            f"format after a layout ({', '.join(_REGISTRY)}; e.g. BCSR_4x4)",
            location=fmt.location or (Location(spec.source) if spec.source else None),
        )
    return canonical_layout(chosen)


def _layout_by_name(name: str) -> str | None:
    """A format named after a layout: ``csr``, ``ELL``, ``BCSR_4x4``, ``bcsr-2x2``, ``bcsr4x4``."""
    key = name.strip().lower()
    if key in _REGISTRY:
        return canonical_layout(key)
    match = re.fullmatch(r"([a-z][a-z0-9]*?)[_:\-]?(\d+(?:x\d+)?)", key)
    if match and match.group(1) in _REGISTRY and _REGISTRY[match.group(1)].option is not None:
        return canonical_layout(f"{match.group(1)}:{match.group(2)}")
    return None


def _layout_by_structure(fmt: TensorFormat, tile: str, atom: str) -> str | None:
    kinds = {r.rank: r.format for r in fmt.ranks}
    order = tuple(fmt.rank_order)

    def f(rank: str) -> str:
        return kinds.get(rank, "C")  # TeAAL's default per-rank format is compressed

    if order == (tile, atom):
        if f(tile) == "U" and f(atom) == "C":
            return "csr"
        if f(tile) == "C" and f(atom) == "C":
            return "coo"
    if order == (f"{tile}{atom}",) and f(f"{tile}{atom}") == "C":
        return "coo"  # the flattened, compressed (M, K) rank
    if order == (atom, tile) and f(atom) == "U" and f(tile) == "C":
        return "csc"
    if order == (f"{tile}1", f"{atom}1", f"{tile}0", f"{atom}0"):
        return "bcsr"
    return None
