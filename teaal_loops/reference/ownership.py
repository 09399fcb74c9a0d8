"""Who owns each atom according to the HiFiber reference, and whether another view agrees.

The reference records a spacetime stamp per multiply. Its indices name the matrix entry (hence,
through the layout's tile view, the atom that holds it); its space ranks, mapped through the
IR's binding, name the thread. :func:`reference_owners` turns the stamps into the owning thread
of every entry and atom; :func:`compare_owners` compares that, atom by atom, with the owners
of another view (the CPU simulation, or the GPU kernel's trace build) and says what differs.
For the dense forms a multiply is keyed by (entry, dense index): SpMM's n, SDDMM's k; owners
are compared for every nonzero x dense index, except for TeAAL's two-einsum SDDMM, whose
sampling einsum is stamped without k: there each atom is compared once (``per_atom``).
``teaal-loops check``, the notebooks and the tests all compare owners through this module.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from teaal_loops.errors import LayoutError

# The IR's side: the binding of a space stamp to a thread, the form's roles in a spec, the
# matrix a layout holds (A^T for a transposed form) and the layouts' tile views. The only
# imports from the IR in this package: re-point them here.
from teaal_loops.ir import recognise_einsum
from teaal_loops.layouts import TileView, tile_view
from teaal_loops.lowering.simulate import sparse_operand, thread_of_space_stamp
from teaal_loops.reference.stamps import Stamp
from teaal_loops.schedules import schedule_definition

IntArray = npt.NDArray[np.int64]
SHOWN = 5  # disagreeing entries named in a report


@dataclass(frozen=True)
class ReferenceOwners:
    """The reference's owner of every entry of a matrix in one layout.

    ``entry_owner[e]``: the thread whose multiply of entry ``e`` (the tile view's entry order)
    the reference stamped, -1 where it never multiplied it; ``entry_times[e]``: how many times
    it multiplied it; ``unknown``: multiplies of entries the matrix does not hold. For the
    dense forms both arrays have one column per dense index (entries x D): the key of a
    multiply is (entry, dense index). ``per_atom``: the stamps name no dense index (TeAAL's
    two-einsum SDDMM stamps ``Z[m, n] = C[m, n] * T1[m, n]``, without k): one column.
    """

    view: TileView
    entry_owner: IntArray
    entry_times: IntArray
    unknown: int
    per_atom: bool = False

    @property
    def each_once(self) -> bool:
        """Every entry multiplied exactly once, and nothing else."""
        return bool((self.entry_times == 1).all()) and self.unknown == 0

    def atom_owner(self) -> IntArray:
        """The owner of every atom, in the layout's atom order (-1 for an atom without an entry,
        such as a padding slot); atoms x D for the dense forms."""
        out = np.full((self.view.num_atoms, *self.entry_owner.shape[1:]), -1, dtype=np.int64)
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


@dataclass(frozen=True)
class _Keys:
    """How a stamp names its entry and dense index."""

    row_var: str
    col_var: str
    dense_var: str | None  # None: SpMV, or per atom
    dense_size: int  # columns of the owner arrays (1 for SpMV and per atom)
    output: str  # the einsum whose stamps are the sparse operand's multiplies
    per_atom: bool


def _keys(spec: Any, bound: Any) -> _Keys:
    shape = recognise_einsum(spec)
    per_atom = shape.kind == "sddmm" and shape.intermediate is not None
    dense_var = None if per_atom else shape.dense_var
    size = int(bound.dense_size) if dense_var is not None else 1
    return _Keys(shape.row_var, shape.col_var, dense_var, size, shape.output, per_atom)


def reference_owners(
    spec: Any, bound: Any, view: TileView, stamps: Iterable[Stamp]
) -> ReferenceOwners:
    """Map every stamp to its entry (through ``view``, the matrix the layout holds: ``A^T``
    for a transposed form, whose entry (m, k) is the reference's ``A[k, m]``), its dense
    index (SpMM: the stamp's n; SDDMM: its k) and its space stamp to a thread."""
    keys = _keys(spec, bound)
    # Entries keyed (output row, column) and sorted, to find the entry of each multiply.
    entry_keys = view.entries.row * view.cols + view.entries.col
    order = np.argsort(entry_keys, kind="stable")
    sorted_keys = entry_keys[order]
    dense = keys.dense_var is not None
    shape = (len(entry_keys), keys.dense_size) if dense else (len(entry_keys),)
    owner = np.full(shape, -1, dtype=np.int64)
    times = np.zeros(shape, dtype=np.int64)
    unknown = 0
    threads: dict[tuple[Any, ...], int] = {}  # space stamp -> thread (stamps repeat)
    for st in stamps:
        if st.einsum != keys.output:
            continue  # TeAAL's two-einsum SDDMM: T1's dense product is not C's atoms
        key = st.indices[keys.row_var] * view.cols + st.indices[keys.col_var]
        pos = int(np.searchsorted(sorted_keys, key))
        if pos >= len(sorted_keys) or sorted_keys[pos] != key:
            unknown += 1
            continue
        where: Any = int(order[pos])
        if keys.dense_var is not None:
            n = int(st.indices[keys.dense_var])
            if not 0 <= n < keys.dense_size:
                unknown += 1
                continue
            where = (where, n)
        space = st.space_pairs()
        place = tuple(space)
        if place not in threads:
            threads[place] = thread_of_space_stamp(bound, space)
        times[where] += 1
        owner[where] = threads[place]
    return ReferenceOwners(view, owner, times, unknown, keys.per_atom)


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
    """The reference's owner of every entry of ``A`` (as the spec declares it; the layout holds
    ``A^T`` for a transposed form) in ``bound``'s layout against ``other_owner``, the owner of
    every atom in that layout's atom order: one per atom (SpMV), atoms x D for the dense forms
    (a flat atom-major array of atoms * D is read as that)."""
    layout = bound.schedule.layout
    try:
        view = tile_view(layout, sparse_operand(bound.schedule, A))
    except LayoutError as err:
        return OwnerComparison(False, True, f"not compared ({err.message})")
    reason = not_comparable(bound, view)
    if reason:
        return OwnerComparison(False, True, f"not compared ({reason})")
    ref = reference_owners(spec, bound, view, stamps)
    dense = bound.schedule.form.dense is not None
    d = int(bound.dense_size) if dense else 1
    want = (view.num_atoms, d) if dense else (view.num_atoms,)
    other = np.asarray(other_owner, dtype=np.int64)
    if dense and other.shape == (view.num_atoms * d,):
        other = other.reshape(want)
    if other.shape != want:
        what = f"{view.num_atoms} atoms x {d} dense indices" if dense else (
            f"{view.num_atoms} atoms"
        )
        text = f"DISAGREE: {other.size} owners for the {what} of layout {layout}"
        return OwnerComparison(True, False, text, ref, view.num_atoms * d)
    entry_other = _columns(other[view.entries.atom])
    n = len(ref.entry_owner)
    ref2 = _columns(ref.entry_owner)
    mism = (ref2 != -1) & (ref2 != entry_other)
    if ref.per_atom:
        bad_entries = np.flatnonzero(mism.any(axis=1))
        bad = np.stack([bad_entries, mism[bad_entries].argmax(axis=1)], axis=1)
    else:
        bad = np.argwhere(mism)
    if not len(bad) and ref.each_once:
        return OwnerComparison(True, True, _agreement(ref, n, d, dense, layout), ref)
    text = _disagreement(ref, entry_other, bad, d if dense else None)
    return OwnerComparison(True, False, text, ref, len(bad))


def _columns(a: IntArray) -> IntArray:
    """One row per entry, one column per dense index (one column for SpMV)."""
    return a if a.ndim == 2 else a.reshape(len(a), 1)


def _agreement(ref: ReferenceOwners, n: int, d: int, dense: bool, layout: str) -> str:
    if ref.per_atom:
        return (
            f"agree for all {n} nonzeros, compared per atom (TeAAL's two-einsum SDDMM: the "
            f"stamps of the sampling einsum have no index of the summed rank, so each atom's "
            f"reference owner is compared with its owner for all {d} of its indices) "
            f"(layout {layout})"
        )
    if dense:
        return f"agree for all {n} nonzeros x {d} dense indices (layout {layout})"
    return f"agree for all {n} nonzeros (layout {layout})"


def _disagreement(
    ref: ReferenceOwners, entry_other: IntArray, bad: IntArray, dense: int | None
) -> str:
    """``bad``: (entry, dense index) pairs whose owners differ (index 0 for SpMV)."""
    view = ref.view
    n = len(ref.entry_owner)
    ref2 = _columns(ref.entry_owner)
    pairs = dense is not None and not ref.per_atom
    parts = []
    if len(bad):
        shown = ", ".join(
            f"entry ({int(view.entries.row[e])}, {int(view.entries.col[e])})"
            + (f" index {int(k)}" if dense is not None else "")
            + f" atom {int(view.entries.atom[e])}: reference thread "
            f"{int(ref2[e, 0 if ref.per_atom else k])}, other {int(entry_other[e, k])}"
            for e, k in bad[:SHOWN]
        )
        total = f"{n} x {dense} (nonzero, dense index) pairs" if pairs else f"{n} nonzeros"
        parts.append(f"DISAGREE for {len(bad)} of {total}, e.g. {shown}")
    what = "(nonzero, dense index) pairs" if pairs else "nonzeros"
    missing = int(np.count_nonzero(ref.entry_times == 0))
    twice = int(np.count_nonzero(ref.entry_times > 1))
    if missing:
        parts.append(f"{missing} {what} never multiplied by the reference")
    if ref.unknown:
        parts.append(f"{ref.unknown} reference multiplies of entries the matrix does not hold")
    if twice:
        parts.append(f"{twice} {what} multiplied more than once by the reference")
    return "; ".join(parts)
