"""Everything that is fixed when a kernel is compiled (:class:`KernelConfig`).

Structure is compile-time: the schedule kind, the tiling depth and which levels are space or
time (and in what order), the group size, the threads per block, the value and index types.
Matrix-dependent sizes (tiling sizes ``S_j``, extents ``E_j``, the worker count, work per
thread, rows, nnz) are kernel arguments, so one compiled kernel serves every matrix and
``generate`` needs no matrix. The trace build is a preprocessor flag (``-DTEAAL_TRACE=1``)
of the same source.

Kernel arguments come from the layout definition (its arrays and counts), the schedule
definition (its sizes) and :data:`VECTOR_PARAMS`, in that order: the templates render the
signature from :meth:`KernelConfig.kernel_params` and the runtime orders its launch arguments
by it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teaal_loops.errors import ParameterError
from teaal_loops.ir.model import BoundSchedule, Combine, Schedule
from teaal_loops.layouts import canonical_layout, check_schedule_fits, get_layout
from teaal_loops.schedules import ScheduleDefinition, schedule_definition
from teaal_loops.types import KernelParam

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

# Arguments every SpMV kernel takes after the layout's and the schedule's own.
VECTOR_PARAMS: tuple[KernelParam, ...] = (
    KernelParam("x", "const value_t* __restrict__", "dense input vector, length cols"),
    KernelParam("y", "value_t* __restrict__", "output vector, length rows"),
    KernelParam(
        "owner", "int* __restrict__", "trace builds: owning thread of every atom (else unused)"
    ),
)


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
    group_size: int = 1  # lanes per group compiled in (1: the schedule has no groups)

    @property
    def kind(self) -> str:
        return self.schedule.kind

    @property
    def definition(self) -> ScheduleDefinition:
        return schedule_definition(self.schedule.kind)

    @property
    def value_type(self) -> str:
        return VALUE_TYPES[self.dtype]

    @property
    def offset_type(self) -> str:
        return "long long" if self.index_bits == 64 else "int"

    @property
    def threads_per_block(self) -> int:
        return self.definition.threads_per_block(self.schedule, self.group_size)

    @property
    def kernel_name(self) -> str:
        return self.definition.kernel_name

    def schedule_params(self) -> tuple[KernelParam, ...]:
        """The schedule's own scalar arguments (sizes, extents, worker count)."""
        return self.definition.kernel_params(self.schedule)

    def kernel_params(self) -> tuple[KernelParam, ...]:
        """Every kernel argument in signature order: layout, schedule, x, y, owner."""
        return get_layout(self.layout).params + self.schedule_params() + VECTOR_PARAMS


def _check_common(schedule: Schedule, index_bits: int) -> None:
    bt = schedule.block_threads
    if bt <= 0 or bt % WARP_SIZE or bt > MAX_THREADS_PER_BLOCK:
        raise ParameterError(
            f"block_threads={bt}: must be a multiple of {WARP_SIZE} between 32 and "
            f"{MAX_THREADS_PER_BLOCK}"
        )
    if index_bits not in (32, 64):
        raise ParameterError(f"index width {index_bits}: expected 32 or 64")


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
    layout_name = canonical_layout(layout or schedule.layout)
    check_schedule_fits(layout_name, schedule.kind, schedule.combine is Combine.ATOMIC)
    if bound is not None:
        index_bits = bound.index_bits
    definition = schedule_definition(schedule.kind)
    group_size = definition.compile_time_group(schedule, bound)
    _check_common(schedule, index_bits)
    definition.check_structure(schedule, group_size)
    return KernelConfig(
        schedule=schedule,
        layout=layout_name,
        dtype=normalize_dtype(dtype),
        index_bits=index_bits,
        group_size=group_size,
    )
