"""The schedule IR: what the GPU kernel does, independent of YAML and of CUDA text.

For one SpMV-shaped einsum ``Z[m] = A[m, k] * B[k]`` the IR says:

* which tensor is the sparse matrix (``matrix``), the dense vector (``vector``) and the output;
  the *tile* rank (rows, ``M``) and the *atom* rank (nonzeros within a row, ``K``);
* the schedule kind (one of the four loops schedules) and how work is partitioned;
* for every final rank of the spec, whether it is space (bound to a GPU level) or time (a
  sequential loop), and which GPU level it is bound to;
* how partial results are combined (plain store, reduction within a group, atomics).

Sizes are parameters: a value fixed when the IR is built (``--param`` or a spec default), or
``None`` when it defaults from the matrix and the device at launch (:mod:`teaal_loops.ir.params`
checks them). :func:`teaal_loops.schedules.bind` resolves them into a :class:`BoundSchedule`,
which the CPU simulation and the CUDA runtime both execute, so both derive the same launch
geometry and the same owner of every atom.

The schedule kind is the name of a registered schedule definition
(:mod:`teaal_loops.schedules`): the IR itself knows no schedule by name.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from teaal_loops.types import Launch, MatrixShape


class Combine(str, enum.Enum):
    """How a row's partial sums reach the output."""

    STORE = "store"  # one owner per row: a plain store, no zeroing needed
    GROUP_REDUCE = "group_reduce"  # lanes of one group reduce, one lane stores
    ATOMIC = "atomic"  # rows split across threads: complete rows stored, split rows atomicAdd


class GpuLevel(str, enum.Enum):
    """What a final rank becomes on the GPU."""

    WORKER = "worker"  # space: selects the thread (thread-mapped) or group (group-mapped)
    DENSE = "dense"  # space: a dense rank's index within a worker (SpMM's N, SDDMM's K)
    LANE = "lane"  # space: a lane within a group (the atom rank of group-mapped)
    LOOP = "loop"  # time: a sequential loop in the owning thread


@dataclass(frozen=True)
class RankBinding:
    """One final rank of the spec and what it becomes on the GPU.

    ``extent`` describes how many elements the rank has (``ceil(rows/NUM_TILES)``, ``32``);
    ``space_index`` is the rank's position in the spec's ``space`` list (None for time ranks);
    ``time_index`` likewise for ``time``.
    """

    name: str
    source: str  # the original (or flattened) rank it came from: "M", "K", "MK"
    level: GpuLevel
    extent: str
    space_index: int | None = None
    time_index: int | None = None
    style: str = "pos"  # the spacetime style the spec gave: pos or coord


@dataclass(frozen=True)
class RowTiling:
    """Uniform-shape tiling of the tile rank: ``M: [uniform_shape(S_n), ..., uniform_shape(S_1)]``.

    Final ranks are ``M_n ... M_0``. A row ``m`` has digits ``d_n = m // S_n``,
    ``d_j = (m mod S_{j+1}) // S_j`` and ``d_0 = m mod S_1``; level ``j`` has extent
    ``E_n = ceil(rows / S_n)``, ``E_j = ceil(S_{j+1} / S_j)``, ``E_0 = S_1``. A digit vector is a
    real row when ``sum_{i<j} d_i S_i < S_j`` for every ``j >= 1`` and ``m < rows``.

    ``sizes`` holds parameter names or ints, top-down (``S_n`` first). ``space_levels`` are the
    levels bound to space, most significant first (the spec's space order): the worker id is the
    mixed-radix number of those digits. ``time_levels`` are the remaining levels in the spec's
    time order: the owning worker loops over them, outermost first.
    ``nway`` marks sizes given by ``nway_shape(N)`` (width ``ceil(rows/N)``).
    """

    sizes: tuple[int | str, ...]
    space_levels: tuple[int, ...]
    time_levels: tuple[int, ...]
    nway: tuple[bool, ...] = ()

    @property
    def depth(self) -> int:
        """Number of uniform_shape splits (n); there are n + 1 levels."""
        return len(self.sizes)


@dataclass(frozen=True)
class DenseRank:
    """Where the spacetime puts the dense rank (SpMM's ``N``, SDDMM's ``K``).

    Unsplit, the rank is all space (``space == name``) or all time. Split by
    ``uniform_shape(S)``, its upper rank ``N1`` is time and ``N0`` space: a thread handles
    ``n = n1 * S + n0`` for every ``n1`` (strided). Or, ``contiguous``, ``N1`` is space and
    ``N0`` time: a thread handles the ``S`` neighbouring elements ``n = n1 * S + n0`` of its
    ``n1``, which it can read with one vector load. The space part is the fastest-varying digit
    of the worker's threads (before a group's lanes), so neighbouring threads read neighbouring
    elements (or runs of them) of a dense row. ``reduce``: the rank is summed per atom
    (SDDMM's K). ``run`` (SDDMM only): split twice, ``K: [uniform_shape(split),
    uniform_shape(run)]``, ``K1`` in space and ``K2``, ``K0`` in time: the ``split / run``
    threads of an atom each sum runs of ``run`` neighbouring ``k``.
    """

    name: str
    space: str | None = None
    time: str | None = None
    split: int | str | None = None
    reduce: bool = False
    contiguous: bool = False  # N1 in space, N0 in time: a thread's elements are neighbours
    run: int | str | None = None  # K0's size: each summing thread's runs of neighbouring k


@dataclass(frozen=True)
class ScalarEpilogue:
    """TeAAL's ``Z = alpha * T1 + beta * C`` after the product ``T1`` (SpMV or SpMM).

    ``alpha``/``beta`` are the spec's scalar names (None: the factor is 1, or for ``beta``
    there is no addend); ``addend`` is ``C``'s name (None: ``Z = alpha * T1``), with its ranks
    (``Z``'s, in einsum order) and its storage order. The kernel writes the product, rounded
    to ``value_t``, into ``Z`` and a second, elementwise kernel then updates every element of
    ``Z`` once; the scalars are bound by name when the kernel is called.
    """

    output: str  # Z
    alpha: str | None = None
    beta: str | None = None
    addend: str | None = None
    addend_ranks: tuple[str, ...] = ()
    addend_storage: tuple[str, ...] = ()
    text: str = ""  # the epilogue's einsum

    @property
    def scalars(self) -> tuple[str, ...]:
        """The scalar names to bind, each once, alpha's first."""
        return tuple(dict.fromkeys(n for n in (self.alpha, self.beta) if n is not None))


@dataclass(frozen=True)
class Form:
    """Which member of the family the kernel computes (:mod:`teaal_loops.ir.einsum`).

    ``operands`` are the dense inputs' names in kernel order (SpMV/SpMM: B; SDDMM: A, B) with
    their storage rank orders (row-major in that order); ``output_storage`` likewise for the
    output. ``transposed``: the sparse operand is declared ``[K, M]``; the runtime hands its
    transpose to the layout. ``epilogue``: the scalar epilogue that follows the product (its
    addend ``C`` is passed after the operands), or None.
    """

    kind: str = "spmv"  # "spmv" | "spmm" | "sddmm"
    transposed: bool = False
    operands: tuple[str, ...] = ()
    operand_ranks: tuple[tuple[str, ...], ...] = ()  # each operand's ranks, einsum order
    operand_storage: tuple[tuple[str, ...], ...] = ()
    output_ranks: tuple[str, ...] = ()
    output_storage: tuple[str, ...] = ()
    dense: DenseRank | None = None
    text: str = ""
    epilogue: ScalarEpilogue | None = None


@dataclass(frozen=True)
class Schedule:
    """The lowered form of one einsum of a spec (see the module docstring)."""

    kind: str  # the registered schedule definition: "thread_mapped", ...
    spec_name: str
    einsum: str  # the expression text, for headers and messages
    output: str  # "Z"
    matrix: str  # "A"
    vector: str  # "B"
    tile_rank: str  # "M"
    atom_rank: str  # "K"
    layout: str  # "csr", ...
    ranks: tuple[RankBinding, ...]  # every final rank, in the spec's loop order
    combine: Combine
    params: Mapping[str, int | None]  # every parameter: bound value or None = default at launch
    param_roles: Mapping[str, str]  # parameter -> role ("row_tile", "group_size", ...)
    tiling: RowTiling | None = None  # thread- and group-mapped
    group_size: int | str | None = None  # group-mapped: lanes per group (an occupancy size)
    work_per_thread: int | str | None = None  # work-oriented: atoms; merge-path: merge items
    block_threads: int = 128
    notes: tuple[str, ...] = field(default=())
    form: Form = field(default_factory=Form)

    def param_value(self, size: int | str | None) -> int | None:
        """An int for a literal size or a bound parameter; None when it defaults at launch."""
        if size is None or isinstance(size, int):
            return size
        return self.params.get(size)


@dataclass(frozen=True)
class BoundSchedule:
    """A schedule with every size resolved for one matrix on one device.

    ``sizes`` are the row-tiling sizes (ints, top-down); ``workers`` is the number of space
    slots (threads for thread-mapped, groups for group-mapped, chunks for work-oriented and
    merge-path); ``global thread id = worker * group_size + lane``.
    """

    schedule: Schedule
    matrix: MatrixShape
    params: Mapping[str, int]
    launch: Launch
    workers: int
    sizes: tuple[int, ...] = ()
    group_size: int = 1
    work_per_thread: int = 0
    index_bits: int = 32  # 64 when nnz or rows + nnz exceed 2**31 - 1
    # The dense rank (1, 1, 1 for SpMV): its size D, the threads a worker spreads it over
    # (its space extent DS) and the steps each thread loops over (its time extent DT).
    dense_size: int = 1
    dense_space: int = 1
    dense_time: int = 1

    @property
    def kind(self) -> str:
        return self.schedule.kind

    @property
    def threads(self) -> int:
        """GPU threads the schedule numbers: workers x dense slots x lanes."""
        return self.workers * self.dense_space * self.group_size
