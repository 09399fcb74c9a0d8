"""Everything that is fixed when a kernel is compiled (:class:`KernelConfig`).

Structure is compile-time: the schedule kind, the tiling depth and which levels are space or
time (and in what order), the group size, the threads per block, the value and index types.
Matrix-dependent sizes (tiling sizes ``S_j``, extents ``E_j``, the worker count, work per
thread, rows, nnz) are kernel arguments, so one compiled kernel serves every matrix and
``generate`` needs no matrix. The trace build is a preprocessor flag (``-DTEAAL_TRACE=1``)
of the same source.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teaal_loops.codegen.registry import (
    VECTOR_PARAMS,
    KernelParam,
    layout_entry,
    schedule_entry,
)
from teaal_loops.errors import ParameterError
from teaal_loops.ir.model import BoundSchedule, Schedule, ScheduleKind

VALUE_TYPES = {"float32": "float", "float64": "double"}
DTYPE_ALIASES = {
    "f32": "float32",
    "float32": "float32",
    "float": "float32",
    "single": "float32",
    "f64": "float64",
    "float64": "float64",
    "double": "float64",
}
WARP_SIZE = 32
MAX_THREADS_PER_BLOCK = 1024


def normalize_dtype(dtype: object) -> str:
    """``"f32"``, ``"float32"``, ``np.float32`` or ``np.dtype("float32")`` -> ``"float32"``."""
    key = dtype if isinstance(dtype, str) else None
    if key is None:
        try:
            key = np.dtype(dtype).name  # type: ignore[call-overload]
        except TypeError:
            key = str(dtype)
    name = DTYPE_ALIASES.get(key.lower())
    if name is None:
        raise ParameterError(f"dtype {dtype!r} is not supported (expected f32 or f64)")
    return name


@dataclass(frozen=True)
class KernelConfig:
    """One compiled kernel: a schedule plus the compile-time choices made for it."""

    schedule: Schedule
    layout: str
    dtype: str  # "float32" | "float64"
    index_bits: int = 32  # 64: offsets, atom ids and merge items are int64
    group_size: int = 1  # lanes per group (group-mapped), 1 otherwise

    @property
    def kind(self) -> ScheduleKind:
        return self.schedule.kind

    @property
    def value_type(self) -> str:
        return VALUE_TYPES[self.dtype]

    @property
    def offset_type(self) -> str:
        return "long long" if self.index_bits == 64 else "int"

    @property
    def threads_per_block(self) -> int:
        """Compile-time block size (IR_SEMANTICS: block groups larger than it use G threads)."""
        if self.kind is ScheduleKind.GROUP_MAPPED:
            return max(self.schedule.block_threads, self.group_size)
        return self.schedule.block_threads

    @property
    def kernel_name(self) -> str:
        return schedule_entry(self.kind).kernel_name

    @property
    def uses_row_tiling(self) -> bool:
        return self.kind in (ScheduleKind.THREAD_MAPPED, ScheduleKind.GROUP_MAPPED)

    @property
    def tiling_depth(self) -> int:
        tiling = self.schedule.tiling
        return tiling.depth if tiling is not None else 0

    def schedule_params(self) -> tuple[KernelParam, ...]:
        """The schedule's own scalar arguments (sizes, extents, worker count)."""
        if self.uses_row_tiling:
            n = self.tiling_depth
            sizes = tuple(
                KernelParam(f"S{j}", "offset_t", f"tiling size S_{j}") for j in range(n, 0, -1)
            )
            extents = tuple(
                KernelParam(f"E{j}", "offset_t", f"extent of level {j}") for j in range(n, -1, -1)
            )
            workers = KernelParam(
                "workers",
                "offset_t",
                "threads" if self.kind is ScheduleKind.THREAD_MAPPED else "groups",
            )
            return sizes + extents + (workers,)
        if self.kind is ScheduleKind.WORK_ORIENTED:
            return (
                KernelParam("work_per_thread", "offset_t", "atoms per chunk (WPT)"),
                KernelParam("workers", "offset_t", "chunks = ceil(nnz / WPT)"),
            )
        return (
            KernelParam("items_per_thread", "offset_t", "merge items per chunk (IPT)"),
            KernelParam("workers", "offset_t", "chunks = ceil((rows + nnz) / IPT)"),
        )

    def kernel_params(self) -> tuple[KernelParam, ...]:
        """Every kernel argument in signature order: layout, schedule, x, y, owner."""
        return layout_entry(self.layout).params + self.schedule_params() + VECTOR_PARAMS


def _check_structure(schedule: Schedule, group_size: int, index_bits: int) -> None:
    bt = schedule.block_threads
    if bt <= 0 or bt % WARP_SIZE or bt > MAX_THREADS_PER_BLOCK:
        raise ParameterError(
            f"block_threads={bt}: must be a multiple of {WARP_SIZE} between 32 and "
            f"{MAX_THREADS_PER_BLOCK}"
        )
    if index_bits not in (32, 64):
        raise ParameterError(f"index width {index_bits}: expected 32 or 64")
    if schedule.kind is not ScheduleKind.GROUP_MAPPED:
        return
    g = group_size
    if g < 1 or g & (g - 1) or g > MAX_THREADS_PER_BLOCK:
        raise ParameterError(
            f"group size {g}: must be a power of two between 1 and {MAX_THREADS_PER_BLOCK}"
        )
    if g <= bt and bt % g:
        raise ParameterError(f"group size {g} does not divide block_threads={bt}")


def resolve_group_size(schedule: Schedule, bound: BoundSchedule | None = None) -> int:
    """The compile-time group size: from the bound schedule, else the schedule's parameter,
    else the binding's documented default (one warp), which needs no matrix."""
    if schedule.kind is not ScheduleKind.GROUP_MAPPED:
        return 1
    if bound is not None:
        return bound.group_size
    value = schedule.param_value(schedule.group_size)
    if value is None:
        from teaal_loops.ir.bind import DEFAULT_GROUP_SIZE

        return DEFAULT_GROUP_SIZE
    return value


def _canonical_layout(name: str) -> str:
    """``BCSR:4`` -> ``bcsr:4x4`` for layouts lowering knows; others (codegen-only) lower-cased."""
    from teaal_loops.errors import LayoutError
    from teaal_loops.ir.layouts import canonical_layout

    try:
        return canonical_layout(name)
    except LayoutError:
        return name.strip().lower()


def make_config(
    schedule: Schedule,
    *,
    dtype: object = "float32",
    layout: str | None = None,
    index_bits: int = 32,
    bound: BoundSchedule | None = None,
) -> KernelConfig:
    """Validate the compile-time choices for ``schedule`` and bundle them.

    With ``bound`` the group size and the index width come from the binding (the runtime path);
    without it they come from the schedule's bound parameters (the ``generate`` path).
    """
    layout_name = _canonical_layout(layout or schedule.layout)
    layout_entry(layout_name).options_for(layout_name)  # unknown layouts, bad options fail here
    from teaal_loops.ir.layouts import check_schedule_fits
    from teaal_loops.ir.model import Combine

    check_schedule_fits(layout_name, schedule.kind, schedule.combine is Combine.ATOMIC)
    if bound is not None:
        index_bits = bound.index_bits
    group_size = resolve_group_size(schedule, bound)
    _check_structure(schedule, group_size, index_bits)
    return KernelConfig(
        schedule=schedule,
        layout=layout_name,
        dtype=normalize_dtype(dtype),
        index_bits=index_bits,
        group_size=group_size,
    )
