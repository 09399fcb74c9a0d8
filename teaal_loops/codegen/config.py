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
by it. A form with a scalar epilogue adds a second kernel, ``teaal_epilogue``, whose arguments
come from :data:`EPILOGUE_PARAMS` (:meth:`KernelConfig.epilogue_params`) the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teaal_loops.errors import LayoutError, ParameterError, UnsupportedMappingError
from teaal_loops.ir.dense import reduce_lanes
from teaal_loops.ir.model import BoundSchedule, Combine, ScalarEpilogue, Schedule
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


# SpMM: one column of B and of Z per step of the dense rank (templates/common/dense.cuh.j2).
DENSE_PARAMS: tuple[KernelParam, ...] = (
    KernelParam("x_data", "const value_t* __restrict__", "dense input B[K, N]"),
    KernelParam("y_data", "value_t* __restrict__", "output Z[M, N]"),
    KernelParam(
        "owner", "int* __restrict__",
        "trace builds: owning thread of every (atom, n), atom-major (else unused)",
    ),
    KernelParam("dense_n", "offset_t", "size of the dense rank N"),
    KernelParam("dense_space", "offset_t", "threads of a worker along N (DS)"),
    KernelParam("dense_time", "offset_t", "steps of each thread along N (DT)"),
    KernelParam("x_stride_k", "long long", "B: elements between rows k and k + 1"),
    KernelParam("x_stride_n", "long long", "B: elements between columns n and n + 1"),
    KernelParam("y_stride_m", "long long", "Z: elements between rows m and m + 1"),
    KernelParam("y_stride_n", "long long", "Z: elements between columns n and n + 1"),
)
# SDDMM: the row factor U[M, K], the column factor V[K, N], one output value per atom.
SAMPLED_PARAMS: tuple[KernelParam, ...] = (
    KernelParam("u_data", "const value_t* __restrict__", "dense row factor A[M, K]"),
    KernelParam("v_data", "const value_t* __restrict__", "dense column factor B[K, N]"),
    KernelParam("y", "value_t* __restrict__", "output values, one per atom of the sampler"),
    KernelParam(
        "owner", "int* __restrict__",
        "trace builds: owning thread of every (atom, k), atom-major (else unused)",
    ),
    KernelParam("dense_n", "offset_t", "size of the summed dense rank K"),
    KernelParam("u_stride_m", "long long", "A: elements between rows m and m + 1"),
    KernelParam("u_stride_k", "long long", "A: elements between k and k + 1"),
    KernelParam("v_stride_k", "long long", "B: elements between k and k + 1"),
    KernelParam("v_stride_n", "long long", "B: elements between columns n and n + 1"),
)
FORM_PARAMS = {"spmv": VECTOR_PARAMS, "spmm": DENSE_PARAMS, "sddmm": SAMPLED_PARAMS}

# The scalar epilogue Z = alpha * T1 + beta * C (templates/common/epilogue.cuh.j2), a second
# kernel of the same source. Z is walked as `outer` x `inner` elements, `inner` being the rank
# along which Z is stored contiguously (the runtime orders them: neighbouring threads then
# touch neighbouring elements). Each parameter is kept only where the epilogue has what it
# names (EPILOGUE_NEEDS): alpha or beta absent means a factor 1, no addend means Z = alpha * T1.
EPILOGUE_KERNEL = "teaal_epilogue"
EPILOGUE_BLOCK_THREADS = 256
EPILOGUE_PARAMS: tuple[KernelParam, ...] = (
    KernelParam("z", "value_t* __restrict__", "in: the product T1 (rounded to value_t); out: Z"),
    KernelParam("c", "const value_t* __restrict__", "the addend C, shaped like Z"),
    KernelParam("alpha", "value_t", "the factor of T1"),
    KernelParam("beta", "value_t", "the factor of C"),
    KernelParam("outer", "long long", "elements of Z along its outer rank"),
    KernelParam("inner", "long long", "elements of Z along its contiguous rank"),
    KernelParam("z_stride_outer", "long long", "Z: elements between outer steps"),
    KernelParam("z_stride_inner", "long long", "Z: elements between inner steps"),
    KernelParam("c_stride_outer", "long long", "C: elements between outer steps"),
    KernelParam("c_stride_inner", "long long", "C: elements between inner steps"),
)
EPILOGUE_NEEDS = {
    "c": "addend", "beta": "beta", "alpha": "alpha",
    "c_stride_outer": "addend", "c_stride_inner": "addend",
}


def epilogue_params(epilogue: ScalarEpilogue | None) -> tuple[KernelParam, ...]:
    """The epilogue kernel's arguments in signature order (none without an epilogue)."""
    if epilogue is None:
        return ()
    has = {"alpha": epilogue.alpha is not None, "beta": epilogue.beta is not None,
           "addend": epilogue.addend is not None}
    return tuple(p for p in EPILOGUE_PARAMS if has.get(EPILOGUE_NEEDS.get(p.name, ""), True))


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
    def form(self) -> str:
        return self.schedule.form.kind

    @property
    def kernel_name(self) -> str:
        """``teaal_spmv_thread_mapped``, ``teaal_spmm_group_mapped``, ..."""
        return self.definition.kernel_name.replace("teaal_spmv_", f"teaal_{self.form}_", 1)

    @property
    def template(self) -> str:
        """The schedule's template (SDDMM: its sampled variant)."""
        if self.form == "sddmm":
            return self.definition.template.replace("schedules/", "schedules/sddmm/", 1)
        return self.definition.template

    def schedule_params(self) -> tuple[KernelParam, ...]:
        """The schedule's own scalar arguments (sizes, extents, worker count)."""
        return self.definition.kernel_params(self.schedule)

    def trailing_params(self) -> tuple[KernelParam, ...]:
        """The schedule's arguments after the operands (a launch stream's scratch)."""
        return self.definition.trailing_params(self.schedule)

    def kernel_params(self) -> tuple[KernelParam, ...]:
        """Every kernel argument in signature order: layout, schedule, the form's operands
        (SpMV: x, y, owner; :data:`FORM_PARAMS`), then the schedule's trailing ones."""
        return (get_layout(self.layout).params + self.schedule_params() + FORM_PARAMS[self.form]
                + self.trailing_params())

    @property
    def may_accumulate(self) -> bool:
        """Whether launches of this mapping may add into a zeroed output: it combines split
        tiles atomically, or the layout's tiles share output rows (stacked). Whether one
        binding's launches do is :meth:`zeroes_output`."""
        return self.schedule.combine is Combine.ATOMIC or get_layout(self.layout).stacked

    def zeroes_output(self, bound: BoundSchedule) -> bool:
        """Whether the output must be zero before a launch: the schedule adds into it (its
        combine, for this binding), or the layout's tiles share output rows (stacked)."""
        return (self.definition.zeroes_output(bound, np.dtype(self.dtype).itemsize)
                or get_layout(self.layout).stacked)

    @property
    def epilogue(self) -> ScalarEpilogue | None:
        return self.schedule.form.epilogue

    def epilogue_params(self) -> tuple[KernelParam, ...]:
        """The arguments of the epilogue kernel (``teaal_epilogue``), in signature order."""
        return epilogue_params(self.epilogue)


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
    if schedule.form.kind not in get_layout(layout_name).forms:
        raise LayoutError(
            f"layout {layout_name} serves {', '.join(sorted(get_layout(layout_name).forms))}, "
            f"not {schedule.form.kind}"
        )
    if bound is not None:
        index_bits = bound.index_bits
    definition = schedule_definition(schedule.kind)
    group_size = definition.compile_time_group(schedule, bound)
    _check_common(schedule, index_bits)
    definition.check_structure(schedule, group_size)
    reduce_lanes(schedule, group_size)  # SDDMM's K lanes: refused here, located, not by nvcc
    if schedule.form.epilogue is not None and schedule.form.kind not in ("spmv", "spmm"):
        raise UnsupportedMappingError(  # lowering refuses it first; a hand-built schedule can
            f"an epilogue follows SpMV or SpMM, not {schedule.form.kind}"
        )
    return KernelConfig(
        schedule=schedule,
        layout=layout_name,
        dtype=normalize_dtype(dtype),
        index_bits=index_bits,
        group_size=group_size,
    )
