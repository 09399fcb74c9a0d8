"""Execute a bound schedule on the CPU with NumPy, vectorised, on any layout's tile view.

Returns the product, the owning global thread of every atom (in the layout's atom order) and
the load-balance figures. Ownership comes from each schedule definition's rules, computed from
the tile offsets alone exactly as the kernels compute it; GPU tests compare the trace build of
each kernel against :attr:`SimResult.owner` atom by atom. Values are accumulated in float64:
the combine structure (stores, group reductions, atomics) does not change the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from teaal_loops.errors import ValidationError
from teaal_loops.ir.model import BoundSchedule
from teaal_loops.layouts import TileView, tile_view
from teaal_loops.schedules import schedule_definition
from teaal_loops.types import MatrixShape


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
    owner: npt.NDArray[np.int64]  # global thread id of every atom, layout atom order
    stats: LoadBalance
    bound: BoundSchedule

    def owner_block_thread(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        tpb = self.bound.launch.threads_per_block
        return self.owner // tpb, self.owner % tpb


def owners(bound: BoundSchedule, tile_ptr: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The owning global thread id of every atom, per the schedule's rules."""
    ptr = np.asarray(tile_ptr, dtype=np.int64)
    return schedule_definition(bound.kind).owners(bound, ptr)


def schedule_shape(layout: str, A: Any) -> MatrixShape:
    """The shape to bind a schedule to for ``A`` in ``layout`` (tiles, atoms)."""
    return tile_view(layout, A).shape


def simulate(bound: BoundSchedule, A: object, x: npt.ArrayLike) -> SimResult:
    """Run ``bound`` on matrix ``A`` (scipy.sparse or anything matrix.as_csr takes) in the
    schedule's layout. ``owner`` is indexed by the layout's atoms in storage order."""
    return simulate_view(bound, tile_view(bound.schedule.layout, A), x)


def simulate_view(bound: BoundSchedule, view: TileView, x: npt.ArrayLike) -> SimResult:
    xv = np.asarray(x, dtype=np.float64).ravel()
    owner = owners(bound, view.tile_ptr)
    entries = view.entries
    products = entries.val * xv[entries.col]
    y = np.bincount(entries.row, weights=products, minlength=view.rows).astype(np.float64)
    stats = load_balance(bound, view.tile_ptr, owner, scatter=view.scatter)
    return SimResult(y=y, owner=owner, stats=stats, bound=bound)


def load_balance(
    bound: BoundSchedule,
    tile_ptr: npt.NDArray[np.int64],
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
    if scatter:
        split, atomics = 0, nnz
    else:
        cost = schedule_definition(bound.kind).split_cost(bound, tile_ptr, owner)
        split, atomics = cost.split_tiles, cost.atomics
    return LoadBalance(
        threads=threads,
        max_atoms=max_atoms,
        mean_atoms=nnz / threads if threads else 0.0,
        split_rows=split,
        atomics=atomics,
        idle_threads=idle,
    )


def thread_of_space_stamp(bound: BoundSchedule, space: Any) -> int:
    """Global thread id bound to a reference space stamp ``[(pos, coord), ...]`` (the spec's
    space order): tile levels by coordinate, lanes and chunks by position."""
    ranks = [r for r in bound.schedule.ranks if r.space_index is not None]
    names = [r.name for r in sorted(ranks, key=lambda r: r.space_index or 0)]
    if len(space) != len(names):
        raise ValidationError(
            f"space stamp {tuple(space)} has {len(space)} entries, the spec's space has "
            f"{len(names)} ({', '.join(names)})"
        )
    return schedule_definition(bound.kind).thread_of_stamp(bound, names, space)
