"""Execute a bound schedule on the CPU with NumPy, vectorised, on any layout's tile view.

Returns the product, the owning global thread of every atom (nonzero, in CSR order) and the
load-balance figures. The ownership rules are exactly those the CUDA templates implement (see
the schedule docstrings in :mod:`teaal_loops.ir.model` and the templates); GPU tests compare the
trace build of each kernel against :attr:`SimResult.owner` atom by atom.

Ownership is computed over the layout's tiles (rows for CSR, columns for CSC, ...) from the
tile pointers alone, exactly as the kernels do; values are accumulated in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from teaal_loops.ir.bind import row_digits, tile_extents
from teaal_loops.ir.model import BoundSchedule, ScheduleKind
from teaal_loops.ir.views import TileView, tile_view


@dataclass(frozen=True)
class LoadBalance:
    """Atoms per launched thread and the cost of combining split rows."""

    threads: int  # launched threads that may own work (workers x lanes)
    max_atoms: int
    mean_atoms: float
    split_rows: int  # rows whose atoms are owned by more than one thread
    atomics: int  # atomic updates issued to the output
    idle_threads: int  # threads owning no atom

    @property
    def imbalance(self) -> float:
        """max / mean atoms per thread (1.0 is perfect balance)."""
        return self.max_atoms / self.mean_atoms if self.mean_atoms else 1.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            "threads": self.threads,
            "max_atoms_per_thread": self.max_atoms,
            "mean_atoms_per_thread": round(self.mean_atoms, 6),
            "max_over_mean": round(self.imbalance, 6),
            "split_rows": self.split_rows,
            "atomics": self.atomics,
            "idle_threads": self.idle_threads,
        }


@dataclass(frozen=True)
class SimResult:
    y: npt.NDArray[np.float64]
    owner: npt.NDArray[np.int64]  # global thread id of every atom, CSR order
    stats: LoadBalance
    bound: BoundSchedule

    def owner_block_thread(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        tpb = self.bound.launch.threads_per_block
        return self.owner // tpb, self.owner % tpb


def atom_rows(indptr: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
    """The row of every atom (CSR order)."""
    rows = len(indptr) - 1
    return np.repeat(np.arange(rows, dtype=np.int64), np.diff(indptr).astype(np.int64))


def owners(bound: BoundSchedule, indptr: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
    """The owning global thread id of every atom, per the schedule's rules."""
    indptr = np.asarray(indptr, dtype=np.int64)
    rows = len(indptr) - 1
    nnz = int(indptr[-1])
    row = atom_rows(indptr)
    atom = np.arange(nnz, dtype=np.int64)
    kind = bound.kind
    if kind == ScheduleKind.WORK_ORIENTED:
        return atom // bound.work_per_thread
    if kind == ScheduleKind.MERGE_PATH:
        return (atom + row) // bound.work_per_thread
    worker_of_row = row_workers(bound, rows)
    if kind == ScheduleKind.THREAD_MAPPED:
        return worker_of_row[row]
    lane = (atom - indptr[row]) % bound.group_size
    return worker_of_row[row] * bound.group_size + lane


def row_workers(bound: BoundSchedule, rows: int) -> npt.NDArray[np.int64]:
    """Worker (thread or group) of every row of a tiled schedule."""
    tiling = bound.schedule.tiling
    assert tiling is not None
    m = np.arange(rows, dtype=np.int64)
    digits = row_digits(m, bound.sizes)
    extents = tile_extents(bound.sizes, rows)
    n = tiling.depth
    worker = np.zeros(rows, dtype=np.int64)
    for level in tiling.space_levels:
        worker = worker * extents[n - level] + np.asarray(digits[n - level], dtype=np.int64)
    return worker


def simulate(bound: BoundSchedule, A: object, x: npt.ArrayLike) -> SimResult:
    """Run ``bound`` on matrix ``A`` (scipy.sparse or anything matrix.as_csr takes) in the
    schedule's layout. ``owner`` is indexed by the layout's atoms in storage order."""
    view = tile_view(bound.schedule.layout, A)
    return simulate_view(bound, view, x)


def simulate_view(bound: BoundSchedule, view: TileView, x: npt.ArrayLike) -> SimResult:
    xv = np.asarray(x, dtype=np.float64).ravel()
    indptr = view.tile_ptr
    owner = owners(bound, indptr)
    products = view.entry_val * xv[view.entry_col]
    # Values: every entry adds its product to its output row. Accumulated in float64, the
    # combine structure (stores, group reductions, atomics) does not change the result.
    y = np.bincount(view.entry_row, weights=products, minlength=view.rows).astype(np.float64)
    stats = load_balance(bound, indptr, owner, scatter=view.scatter)
    return SimResult(y=y, owner=owner, stats=stats, bound=bound)


def load_balance(
    bound: BoundSchedule,
    indptr: npt.NDArray[np.int64],
    owner: npt.NDArray[np.int64],
    *,
    scatter: bool = False,
) -> LoadBalance:
    """Atoms per thread; split tiles and atomics (a scattering layout makes every update one)."""
    threads = bound.workers * bound.group_size
    nnz = len(owner)
    if nnz:
        counts = np.bincount(owner, minlength=threads)
        max_atoms = int(counts.max())
        idle = int(np.count_nonzero(counts == 0)) if len(counts) == threads else threads
    else:
        max_atoms, idle = 0, threads
    mean = nnz / threads if threads else 0.0
    split, atomics = 0, 0
    if scatter:
        atomics = nnz
    elif bound.kind in (ScheduleKind.WORK_ORIENTED, ScheduleKind.MERGE_PATH) and nnz:
        first = owner[indptr[:-1][np.diff(indptr) > 0]]
        last = owner[indptr[1:][np.diff(indptr) > 0] - 1]
        if bound.kind == ScheduleKind.MERGE_PATH:
            # A row is split when its row-end item lies in a later chunk than its first item.
            nonempty = np.flatnonzero(np.diff(indptr) > 0)
            end_chunk = (indptr[nonempty + 1] + nonempty) // bound.work_per_thread
            is_split = end_chunk != first
            split = int(np.count_nonzero(is_split))
            atomics = int(np.sum((last - first + 1)[is_split]))
        else:
            is_split = last != first
            split = int(np.count_nonzero(is_split))
            atomics = int(np.sum((last - first + 1)[is_split]))
    return LoadBalance(
        threads=threads,
        max_atoms=max_atoms,
        mean_atoms=mean,
        split_rows=split,
        atomics=atomics,
        idle_threads=idle,
    )
