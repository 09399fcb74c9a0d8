"""Who owns each atom according to the HiFiber reference, and whether another view agrees.

The reference records a spacetime stamp per multiply. Its indices name the matrix entry (hence,
through the layout's tile view, the atom that holds it); its space ranks, mapped through the
IR's binding, name the thread. :func:`reference_owners` turns the stamps into the owning thread
of every entry and atom; :func:`compare_owners` compares that, atom by atom, with the owners
of another view (the CPU simulation, or the GPU kernel's trace build) and says what differs.
``teaal-loops check``, the notebooks and the tests all compare owners through this module.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from teaal_loops.errors import LayoutError

# The IR's side: the binding of a space stamp to a thread, the SpMV roles of a spec, and the
# layouts' tile views. The only imports from the IR in this package: re-point them here.
from teaal_loops.ir import recognise_spmv
from teaal_loops.layouts import TileView, tile_view
from teaal_loops.lowering import thread_of_space_stamp
from teaal_loops.reference.stamps import Stamp
from teaal_loops.schedules import schedule_definition

IntArray = npt.NDArray[np.int64]
SHOWN = 5  # disagreeing entries named in a report


@dataclass(frozen=True)
class ReferenceOwners:
    """The reference's owner of every entry of a matrix in one layout.

    ``entry_owner[e]``: the thread whose multiply of entry ``e`` (the tile view's entry order)
    the reference stamped, -1 where it never multiplied it; ``entry_times[e]``: how many times
    it multiplied it; ``unknown``: multiplies of entries the matrix does not hold.
    """

    view: TileView
    entry_owner: IntArray
    entry_times: IntArray
    unknown: int

    @property
    def each_once(self) -> bool:
        """Every entry multiplied exactly once, and nothing else."""
        return bool((self.entry_times == 1).all()) and self.unknown == 0

    def atom_owner(self) -> IntArray:
        """The owner of every atom, in the layout's atom order (-1 for an atom without an entry,
        such as a padding slot)."""
        out = np.full(self.view.num_atoms, -1, dtype=np.int64)
        out[self.view.entries.atom] = self.entry_owner
        return out


@dataclass(frozen=True)
class OwnerComparison:
    """The reference's owners against another view's. ``compared`` is false where the layout's
    atoms are not the reference's (then ``ok`` is true and ``text`` says why)."""

    compared: bool
    ok: bool
    text: str
    reference: ReferenceOwners | None = None
    mismatches: int = 0


def reference_owners(
    spec: Any, bound: Any, view: TileView, stamps: Iterable[Stamp]
) -> ReferenceOwners:
    """Map every stamp to its entry (through ``view``) and its space stamp to a thread."""
    shape = recognise_spmv(spec)
    row_var, col_var = shape.row_var, shape.col_var
    # Entries keyed (output row, column) and sorted, to find the entry of each multiply.
    keys = view.entries.row * view.cols + view.entries.col
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    owner = np.full(len(keys), -1, dtype=np.int64)
    times = np.zeros(len(keys), dtype=np.int64)
    unknown = 0
    for st in stamps:
        key = st.indices[row_var] * view.cols + st.indices[col_var]
        pos = int(np.searchsorted(sorted_keys, key))
        if pos >= len(sorted_keys) or sorted_keys[pos] != key:
            unknown += 1
            continue
        entry = int(order[pos])
        times[entry] += 1
        owner[entry] = thread_of_space_stamp(bound, st.space_pairs())
    return ReferenceOwners(view, owner, times, unknown)


def not_comparable(bound: Any, view: TileView) -> str | None:
    """Why the reference's owners cannot be compared on this layout's atoms, if so.

    The HiFiber reference runs the spec on fibers of nonzeros, tiled by rows (columns for a
    column-major layout). A layout whose tiles are something else (BCSR's block rows) or, for
    chunked schedules, whose atoms are not exactly the nonzeros (padded slots, blocks) has
    tiles and chunks that are not the reference's. Read off the tile view, so user-defined
    layouts are judged the same way.
    """
    layout = bound.schedule.layout
    matrix_tiles = view.cols if view.scatter else view.rows
    if view.num_tiles != matrix_tiles:
        return f"layout {layout}: its {view.num_tiles} tiles are not the matrix's {matrix_tiles}"
    chunked = schedule_definition(bound.kind).owns_chunks
    if chunked and view.num_atoms != len(view.entries.atom):
        return (
            f"layout {layout}: {bound.kind} chunks count its {view.num_atoms} atoms "
            f"(padded slots or blocks), the reference's count the {len(view.entries.atom)} "
            "nonzeros"
        )
    return None


def compare_owners(
    spec: Any, bound: Any, A: Any, stamps: Iterable[Stamp], other_owner: npt.ArrayLike
) -> OwnerComparison:
    """The reference's owner of every entry of ``A`` (in ``bound``'s layout) against
    ``other_owner``, the owner of every atom in that layout's atom order."""
    layout = bound.schedule.layout
    try:
        view = tile_view(layout, A)
    except LayoutError as err:
        return OwnerComparison(False, True, f"not compared ({err.message})")
    reason = not_comparable(bound, view)
    if reason:
        return OwnerComparison(False, True, f"not compared ({reason})")
    ref = reference_owners(spec, bound, view, stamps)
    other = np.asarray(other_owner, dtype=np.int64)
    if other.shape != (view.num_atoms,):
        text = f"DISAGREE: {other.size} owners for the {view.num_atoms} atoms of layout {layout}"
        return OwnerComparison(True, False, text, ref, view.num_atoms)
    entry_other = other[view.entries.atom]
    owned = ref.entry_owner != -1
    bad = np.flatnonzero(owned & (ref.entry_owner != entry_other))
    n = len(ref.entry_owner)
    if not len(bad) and ref.each_once:
        return OwnerComparison(True, True, f"agree for all {n} nonzeros (layout {layout})", ref)
    return OwnerComparison(True, False, _disagreement(ref, entry_other, bad), ref, len(bad))


def _disagreement(ref: ReferenceOwners, entry_other: IntArray, bad: IntArray) -> str:
    view = ref.view
    n = len(ref.entry_owner)
    parts = []
    if len(bad):
        shown = ", ".join(
            f"entry ({int(view.entries.row[e])}, {int(view.entries.col[e])}) atom "
            f"{int(view.entries.atom[e])}: reference thread {int(ref.entry_owner[e])}, "
            f"other {int(entry_other[e])}"
            for e in bad[:SHOWN]
        )
        parts.append(f"DISAGREE for {len(bad)} of {n} nonzeros, e.g. {shown}")
    missing = int(np.count_nonzero(ref.entry_times == 0))
    twice = int(np.count_nonzero(ref.entry_times > 1))
    if missing:
        parts.append(f"{missing} nonzeros never multiplied by the reference")
    if ref.unknown:
        parts.append(f"{ref.unknown} reference multiplies of entries the matrix does not hold")
    if twice:
        parts.append(f"{twice} nonzeros multiplied more than once by the reference")
    return "; ".join(parts)
