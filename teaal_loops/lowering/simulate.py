"""Execute a bound schedule on the CPU with NumPy, vectorised, on any layout's tile view.

Returns the product, the owning global thread of every atom (in the layout's atom order) and
the load-balance figures. Ownership comes from each schedule definition's rules, computed from
the tile offsets alone exactly as the kernels compute it; GPU tests compare the trace build of
each kernel against :attr:`SimResult.owner` atom by atom. Values are accumulated in float64:
the combine structure (stores, group reductions, atomics) does not change the result.

Every form of the one-sparse-operand family (:mod:`teaal_loops.ir.einsum`) runs here:

* **SpMV** ``Z[m] = A[m, k] * B[k]``: ``y`` has one value per row, ``owner`` one thread per
  atom.
* **SpMM** ``Z[m, n] = A[m, k] * B[k, n]``: ``y`` is ``A @ B`` (rows x D), ``owner`` has shape
  (atoms, D): the thread of atom ``a`` for dense index ``n``.
* **SDDMM** ``Z[m, n] = C[m, n] * A[m, k] * B[k, n]``: ``y`` has one value per atom of the
  sampler ``C`` (its value times the dense product at its entry, K summed), ``owner`` has
  shape (atoms, D) with D the summed rank K (each atom's K is summed by one thread, or by the
  ``S`` threads of its worker when ``K0`` is in space, thread ``k0`` taking ``k = k0 mod S``).
* **Transposed forms** (the sparse operand declared ``[K, M]``): functions taking the matrix
  take it as the spec declares it; the layout holds its transpose (:func:`sparse_operand`).
* **A scalar epilogue** ``Z = alpha * T1 + beta * C`` after SpMV or SpMM: its addend ``C``
  follows the product's operands (shaped like ``Z``), its scalars are given by name
  (``scalars={"a": 2.0, "b": 0.5}``); ``y`` is ``alpha * T1 + beta * C`` in float64 (``T1``
  unrounded: the simulation is exact arithmetic's stand-in, as for the product). ``owner`` is
  the product's: the epilogue kernel's thread ``i`` updates the ``i``-th element of ``Z`` in
  its storage order, one element each, which no reference stamp names (TeAAL's second einsum
  has no spacetime of its own to compare with).

The thread of (atom ``a``, dense index ``n``) is
``((o // G) * DS + n % DS) * G + o % G`` with ``o`` the schedule's own owner of ``a`` (worker
times ``G`` plus lane), ``G`` the group size and ``DS`` the dense rank's space extent (1 when
the rank is in time; SDDMM's ``S`` with ``K0`` in space): :mod:`teaal_loops.ir.dense`. SDDMM's
values here are float64 sums; the kernels add each atom's ``S`` partial sums in a shuffle tree
(:func:`teaal_loops.ir.dense.lane_tree_sum`), and ``check`` compares within tolerances.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from teaal_loops.errors import ValidationError
from teaal_loops.ir.dense import dense_slots, run_length
from teaal_loops.ir.model import BoundSchedule, GpuLevel, RankBinding, Schedule
from teaal_loops.layouts import TileView, tile_view
from teaal_loops.matrix import as_csr
from teaal_loops.schedules import schedule_definition
from teaal_loops.types import MatrixShape

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
SDDMM_CHUNK = 1 << 20  # entries gathered at a time (bounds the dense rows held at once)


@dataclass(frozen=True)
class LoadBalance:
    """Atoms per launched thread and the cost of combining split rows.

    For the dense forms (``dense_size`` set) a thread's work is counted in (atom, dense index)
    pairs: an SpMM thread handling ``c`` atoms for ``d`` indices of N counts ``c * d``."""

    threads: int  # launched threads that may own work (workers x dense slots x lanes)
    max_atoms: int
    mean_atoms: float
    split_rows: int  # rows whose atoms are owned by more than one thread
    atomics: int  # atomic updates issued to the output
    idle_threads: int  # threads owning no atom
    dense_size: int | None = None  # D, the dense indices of every atom (None: SpMV)

    @property
    def imbalance(self) -> float:
        """max / mean atoms per thread (1.0 is perfect balance)."""
        return self.max_atoms / self.mean_atoms if self.mean_atoms else 1.0

    def as_dict(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {
            "threads": self.threads,
            "max_atoms_per_thread": self.max_atoms,
            "mean_atoms_per_thread": round(self.mean_atoms, 6),
            "max_over_mean": round(self.imbalance, 6),
            "split_rows": self.split_rows,
            "atomics": self.atomics,
            "idle_threads": self.idle_threads,
        }
        if self.dense_size is not None:
            out["dense_indices_per_atom"] = self.dense_size
        return out


@dataclass(frozen=True)
class SimResult:
    """``y``: SpMV one value per row; SpMM rows x D; SDDMM one value per atom. ``owner``: the
    global thread of every atom (SpMV) or of every (atom, dense index) (atoms x D), in the
    layout's atom order (module docstring)."""

    y: FloatArray
    owner: IntArray
    stats: LoadBalance
    bound: BoundSchedule

    def owner_block_thread(self) -> tuple[IntArray, IntArray]:
        tpb = self.bound.launch.threads_per_block
        return self.owner // tpb, self.owner % tpb


# --------------------------------------------------------------------------------------------
# The sparse operand and the dense ones
# --------------------------------------------------------------------------------------------


def sparse_operand(schedule: Schedule, A: Any) -> Any:
    """The matrix the layout holds: ``A`` itself, or ``A^T`` (rows M, columns K) when the
    spec declares the sparse operand ``[K, M]`` (``schedule.form.transposed``)."""
    if not schedule.form.transposed:
        return A
    return as_csr(A).transpose().tocsr()


def schedule_shape(layout: str, A: Any) -> MatrixShape:
    """The shape to bind a schedule to for ``A`` in ``layout`` (tiles, atoms)."""
    return tile_view(layout, A).shape


def operand_shape(schedule: Schedule, A: Any) -> MatrixShape:
    """:func:`schedule_shape` of the matrix the layout holds for the spec's operand ``A``
    (its transpose for a transposed form)."""
    return schedule_shape(schedule.layout, sparse_operand(schedule, A))


def rank_sizes(schedule: Schedule, rows: int, cols: int, dense_size: int) -> dict[str, int]:
    """The size of every rank of the form, for a product whose sparse operand (as the layout
    holds it) is ``rows x cols``: its row rank, its column rank and the dense rank."""
    form = schedule.form
    row = form.output_ranks[0] if form.output_ranks else schedule.tile_rank
    col = schedule.atom_rank if schedule.tile_rank == row else schedule.tile_rank
    sizes = {row: rows, col: cols}
    if form.dense is not None:
        sizes[form.dense.name] = dense_size
    return sizes


def operand_shapes(
    schedule: Schedule, rows: int, cols: int, dense_size: int = 1
) -> tuple[tuple[int, ...], ...]:
    """The shape of every dense input (``schedule.form.operands``, in declaration axis
    order) for a sparse operand of ``rows x cols`` (as the layout holds it)."""
    form = schedule.form
    if not form.operand_ranks:  # a schedule built without a form: the defaults
        return {
            "spmm": ((cols, dense_size),),
            "sddmm": ((rows, dense_size), (dense_size, cols)),
        }.get(form.kind, ((cols,),))
    sizes = rank_sizes(schedule, rows, cols, dense_size)
    return tuple(tuple(sizes[r] for r in ranks) for ranks in form.operand_ranks)


def _operand_names(schedule: Schedule) -> tuple[str, ...]:
    form = schedule.form
    if form.operands:
        return form.operands
    return ("A", "B") if form.kind == "sddmm" else (schedule.vector,)


def _checked_operands(
    bound: BoundSchedule, view: TileView, operands: Sequence[Any]
) -> list[FloatArray]:
    """The dense inputs as float64 arrays, SpMM's ``B`` oriented ``[K, N]``; a wrong count or
    shape is one ValidationError naming the operand."""
    schedule = bound.schedule
    form = schedule.form
    names = _operand_names(schedule)
    if len(operands) != len(names):
        raise ValidationError(
            f"the {form.kind} form takes {len(names)} dense operand(s) ({', '.join(names)}), "
            f"got {len(operands)}"
        )
    if form.kind == "spmv":  # as before the dense forms: any vector with enough entries
        return [np.asarray(operands[0], dtype=np.float64).ravel()]
    wanted = operand_shapes(schedule, view.rows, view.cols, bound.dense_size)
    out = []
    for name, value, shape in zip(names, operands, wanted, strict=True):
        arr = np.asarray(value, dtype=np.float64)
        if arr.shape != shape:
            raise ValidationError(
                f"dense operand {name} has shape {arr.shape}, this binding needs {shape} "
                f"(the dense rank has size {bound.dense_size}: bind with dense_size= to change "
                "it)"
            )
        out.append(arr)
    dense = form.dense
    if form.kind == "spmm" and dense and form.operand_ranks and form.operand_ranks[0][0] == (
        dense.name
    ):
        out[0] = out[0].T  # declared [N, K]
    return out


# --------------------------------------------------------------------------------------------
# Owners
# --------------------------------------------------------------------------------------------


def atom_owners(bound: BoundSchedule, tile_ptr: npt.ArrayLike) -> IntArray:
    """The schedule's own owner of every atom (worker * G + lane), as for SpMV."""
    ptr = np.asarray(tile_ptr, dtype=np.int64)
    return schedule_definition(bound.kind).owners(bound, ptr)


def dense_owners(bound: BoundSchedule, atom_owner: npt.ArrayLike) -> IntArray:
    """The thread of every (atom, dense index): ``((o // G) * DS + slot(n)) * G + o % G``,
    shape (atoms, D), ``slot(n)`` being ``n % DS`` or, contiguous, ``n // DT`` (module
    docstring; :func:`teaal_loops.ir.dense.dense_slots`)."""
    o = np.asarray(atom_owner, dtype=np.int64)[:, None]
    g, ds = bound.group_size, bound.dense_space
    slot = dense_slots(np.arange(bound.dense_size, dtype=np.int64)[None, :], ds,
                       bound.dense_time, _contiguous(bound), run_length(bound.schedule))
    return ((o // g) * ds + slot) * g + o % g


def _contiguous(bound: BoundSchedule) -> bool:
    dense = bound.schedule.form.dense
    return bool(dense is not None and dense.contiguous)


def owners(bound: BoundSchedule, tile_ptr: npt.ArrayLike) -> IntArray:
    """The owning global thread id of every atom (SpMV), or of every (atom, dense index) as an
    (atoms, D) array (the dense forms), per the schedule's rules."""
    atom = atom_owners(bound, tile_ptr)
    if bound.schedule.form.dense is None:
        return atom
    return dense_owners(bound, atom)


def _atom_owner_of(bound: BoundSchedule, owner: IntArray) -> IntArray:
    """The schedule's own owner of every atom from :func:`owners`' array (either shape)."""
    if owner.ndim == 1:
        return owner
    if owner.shape[1] == 0:
        return np.zeros(owner.shape[0], dtype=np.int64)
    t = owner[:, 0]
    g, ds = bound.group_size, bound.dense_space
    return (t // g // ds) * g + t % g


# --------------------------------------------------------------------------------------------
# Simulation
# --------------------------------------------------------------------------------------------


def simulate(
    bound: BoundSchedule, A: object, *operands: npt.ArrayLike,
    scalars: Mapping[str, float] | None = None,
) -> SimResult:
    """Run ``bound`` on matrix ``A`` (scipy.sparse or anything matrix.as_csr takes; as the spec
    declares it) and its dense operands (``schedule.form.operands``, in that order: SpMV's
    ``x``, SpMM's ``B``, SDDMM's ``A`` and ``B``; then a scalar epilogue's addend ``C``, its
    scalars by name in ``scalars``) in the schedule's layout. ``owner`` is indexed by the
    layout's atoms in storage order."""
    view = tile_view(bound.schedule.layout, sparse_operand(bound.schedule, A))
    return simulate_view(bound, view, *operands, scalars=scalars)


def simulate_view(
    bound: BoundSchedule, view: TileView, *operands: npt.ArrayLike,
    scalars: Mapping[str, float] | None = None,
) -> SimResult:
    """:func:`simulate` on an already built tile view (of the matrix the layout holds)."""
    form = bound.schedule.form
    product, addend, (alpha, beta) = _epilogue_inputs(bound, operands, scalars)
    dense = _checked_operands(bound, view, product)
    atom_owner = atom_owners(bound, view.tile_ptr)
    owner = atom_owner if form.dense is None else dense_owners(bound, atom_owner)
    y = _values(form.kind, view, dense)
    if form.epilogue is not None:
        y = alpha * y + (beta * _addend(bound, addend, y.shape) if addend is not None else 0.0)
    stats = load_balance(
        bound, view.tile_ptr, atom_owner, scatter=view.scatter, stacked=view.stacked,
        adding_from=view.adding_from,
    )
    return SimResult(y=y, owner=owner, stats=stats, bound=bound)


def _epilogue_inputs(
    bound: BoundSchedule, operands: Sequence[Any], scalars: Mapping[str, float] | None
) -> tuple[Sequence[Any], Any, tuple[float, float]]:
    """(the product's operands, the addend or None, (alpha, beta)); without an epilogue the
    operands as they are. Missing, unknown or non-finite scalars are one line naming them."""
    epi = bound.schedule.form.epilogue
    given = dict(scalars or {})
    if epi is None:
        if given:
            raise ValidationError(f"this spec has no epilogue: no scalars ({', '.join(given)})")
        return operands, None, (1.0, 1.0)
    unknown = sorted(set(given) - set(epi.scalars))
    missing = [n for n in epi.scalars if n not in given]
    if unknown or missing:
        raise ValidationError(
            f"the epilogue {epi.text} takes the scalars {', '.join(epi.scalars) or 'none'}"
            + (f"; {', '.join(missing)} missing" if missing else "")
            + (f"; {', '.join(unknown)} unknown" if unknown else "")
        )
    values = {}
    for name in epi.scalars:
        try:
            values[name] = float(given[name])
        except (TypeError, ValueError):
            values[name] = float("nan")
        if not np.isfinite(values[name]):
            raise ValidationError(f"scalar {name} = {given[name]!r} is not a finite number")
    alpha = values[epi.alpha] if epi.alpha else 1.0
    beta = values[epi.beta] if epi.beta else 1.0
    if epi.addend is None:
        return operands, None, (alpha, beta)
    names = _operand_names(bound.schedule)
    if len(operands) != len(names) + 1:
        raise ValidationError(
            f"the {bound.schedule.form.kind} form with the epilogue {epi.text} takes "
            f"{', '.join(names)}, then the addend {epi.addend}; got {len(operands)} operand(s)"
        )
    return operands[:-1], operands[-1], (alpha, beta)


def _addend(bound: BoundSchedule, addend: Any, shape: tuple[int, ...]) -> FloatArray:
    """The addend as float64, shaped like the product (``Z``'s shape); else one line."""
    epi = bound.schedule.form.epilogue
    assert epi is not None
    arr = np.asarray(addend, dtype=np.float64)
    if arr.shape != shape:
        raise ValidationError(
            f"dense operand {epi.addend} has shape {arr.shape}; {epi.output} has {shape}"
        )
    return arr


def _values(kind: str, view: TileView, dense: list[FloatArray]) -> FloatArray:
    entries = view.entries
    if kind == "spmv":
        products = entries.val * dense[0][entries.col]
        return np.bincount(entries.row, weights=products, minlength=view.rows).astype(np.float64)
    if kind == "spmm":
        matrix = sp.csr_matrix(
            (entries.val, (entries.row, entries.col)), shape=(view.rows, view.cols)
        )
        return np.asarray(matrix @ dense[0], dtype=np.float64)
    # SDDMM: each entry's value times the row of U and the column of V it samples
    u, v = dense
    sampled = np.zeros(len(entries.atom), dtype=np.float64)
    for lo in range(0, len(entries.atom), SDDMM_CHUNK):
        hi = lo + SDDMM_CHUNK
        rows, cols = entries.row[lo:hi], entries.col[lo:hi]
        sampled[lo:hi] = np.einsum("ek,ke->e", u[rows], v[:, cols])
    return np.bincount(
        entries.atom, weights=entries.val * sampled, minlength=view.num_atoms
    ).astype(np.float64)


def load_balance(
    bound: BoundSchedule,
    tile_ptr: npt.NDArray[np.int64],
    owner: npt.NDArray[np.int64],
    *,
    scatter: bool = False,
    stacked: bool = False,
    adding_from: int = 0,
) -> LoadBalance:
    """Atoms per thread; split tiles and atomics (a scattering layout makes every update one;
    a stacked layout makes the store of every whole tile from ``adding_from`` on one, beside
    the split tiles' pieces).

    ``owner`` is :func:`owners`' array (or the schedule's own owner of every atom). For the
    dense forms a thread's count is its (atom, dense index) pairs, derived from the atoms'
    owners without building a thread array: slot ``s`` of a worker's ``DS`` handles the
    ``D // DS`` (one more for ``s < D % DS``) indices ``n`` with ``n % DS == s``."""
    atom_owner = _atom_owner_of(bound, np.asarray(owner, dtype=np.int64))
    form = bound.schedule.form
    base = bound.workers * bound.group_size  # the schedule's own threads
    nnz = len(atom_owner)
    if nnz:
        counts = np.bincount(atom_owner, minlength=base)
        max_atoms = int(counts.max())
        idle = int(np.count_nonzero(counts == 0)) if len(counts) == base else base
    else:
        max_atoms, idle = 0, base
    if form.kind == "sddmm":
        split, atomics = 0, 0  # each atom's value is its own, summed by one thread
    elif scatter:
        split, atomics = 0, nnz
    else:
        definition = schedule_definition(bound.kind)
        cost = definition.split_cost(bound, tile_ptr, atom_owner)
        split, atomics = cost.split_tiles, cost.atomics
        if stacked:  # whole tiles from adding_from on, empty ones included, add too
            ptr = np.asarray(tile_ptr, dtype=np.int64)
            before = definition.split_cost(  # the split tiles that store (a prefix)
                bound, ptr[: adding_from + 1], atom_owner[: int(ptr[adding_from])]
            ).split_tiles if adding_from else 0
            atomics += max(len(ptr) - 1, 0) - adding_from - (split - before)
    if form.dense is None:
        return LoadBalance(base, max_atoms, nnz / base if base else 0.0, split, atomics, idle)
    d, ds = bound.dense_size, bound.dense_space
    per_slot, extra = divmod(d, ds)
    # slots with at least one index of the rank (contiguous: every one, DS = ceil(D / DT))
    busy_slots = ds if per_slot or _contiguous(bound) else extra
    threads = base * ds
    return LoadBalance(
        threads=threads,
        max_atoms=max_atoms * bound.dense_time,  # the most indices a slot has
        mean_atoms=nnz * d / threads if threads else 0.0,
        split_rows=split,
        atomics=atomics * (1 if form.kind == "sddmm" else d),
        idle_threads=(ds - busy_slots) * base + busy_slots * idle,
        dense_size=d,
    )


def thread_of_space_stamp(bound: BoundSchedule, space: Any) -> int:
    """Global thread id bound to a reference space stamp ``[(pos, coord), ...]`` (the spec's
    space order): tile levels by coordinate, lanes and chunks by position. A dense space rank
    (``N``, or ``N0`` of a split ``N``) names the slot ``coord mod DS`` of the worker's
    threads (``N1``, contiguous: the slot is its position, the tile's number): thread
    ``((o // G) * DS + slot) * G + o % G``."""
    ranks = _space_order(bound.schedule)
    names = [r.name for r in ranks]
    if len(space) != len(names):
        raise ValidationError(
            f"space stamp {tuple(space)} has {len(space)} entries, the spec's space has "
            f"{len(names)} ({', '.join(names)})"
        )
    dense = [i for i, r in enumerate(ranks) if r.level is GpuLevel.DENSE]
    definition = schedule_definition(bound.kind)
    if not dense:
        return definition.thread_of_stamp(bound, names, space)
    i = dense[0]
    _, coord = space[i]
    rest = [name for j, name in enumerate(names) if j != i]
    own = definition.thread_of_stamp(bound, rest, [p for j, p in enumerate(space) if j != i])
    g, ds = bound.group_size, bound.dense_space
    if _contiguous(bound):  # N1 in space: the stamp's position is the tile, the thread's slot
        pos, _ = space[i]
        slot = int(pos[0] if isinstance(pos, tuple) else pos)
    else:  # (a K1 of runs: the coordinate is its run's first k)
        slot = int(dense_slots(int(coord[0] if isinstance(coord, tuple) else coord), ds,
                               bound.dense_time, False, run_length(bound.schedule)))
    return ((own // g) * ds + slot) * g + own % g


def _space_order(schedule: Schedule) -> list[RankBinding]:
    """The space ranks in the spec's space order (the order of a stamp's pairs). A dense space
    rank's ``space_index`` counts in the spec's whole space list; the sparse mapping's ranks
    were lowered without it, so a lane after it (group-mapped's ``N0`` in
    ``[M, K0, N0]``) carries the index it has in that shorter list: sort the others, then put
    the dense rank back at its own index."""
    space = [r for r in schedule.ranks if r.space_index is not None]
    dense = [r for r in space if r.level is GpuLevel.DENSE]
    rest = sorted((r for r in space if r.level is not GpuLevel.DENSE),
                  key=lambda r: r.space_index or 0)
    for r in dense:
        rest.insert(min(r.space_index or 0, len(rest)), r)
    return rest
