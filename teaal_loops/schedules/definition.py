"""What a schedule definition is: everything teaal-loops knows about one schedule kind.

One subclass per kind, each in its own module of this package, says

* how its mapping is recognised in a spec (:meth:`claims`) and lowered (:meth:`lower`);
* how its sizes are bound for one matrix on one device (:meth:`bind`);
* which global thread owns every atom (:meth:`owners`, from the tile offsets alone, as the
  kernel computes it) and which thread a reference spacetime stamp names
  (:meth:`thread_of_stamp`); how many tiles are split and how many atomics that costs;
* its kernel: template, symbol, scalar arguments and their values, compile-time structure;
* its lines in ``explain`` and in the generated file's header.

Nothing outside these modules branches on a schedule's kind: lowering, binding, the CPU
simulation, code generation, the runtime and the benchmarks ask the registered definitions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from teaal_loops.ir.mapping import MappingContext
from teaal_loops.ir.model import BoundSchedule, Combine, RankBinding, RowTiling, Schedule
from teaal_loops.types import KernelParam, MatrixShape

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Lowered:
    """What a definition's :meth:`ScheduleDefinition.lower` contributes to a Schedule."""

    ranks: tuple[RankBinding, ...]
    combine: Combine
    roles: Mapping[str, str]  # parameter name -> role
    tiling: RowTiling | None = None
    group_size: int | str | None = None
    work_per_thread: int | str | None = None


@dataclass(frozen=True)
class PreparedArray:
    """A device array a schedule computes once per prepared matrix (merge-path's block
    partition), by a kernel of its own source: ``kernel`` takes the product kernel's parameters,
    reads the layout and the schedule's scalars and writes the parameter ``name`` (``length``
    offsets, ``offset_t``), one thread an element."""

    name: str
    length: int
    kernel: str


@dataclass(frozen=True)
class SplitCost:
    """Tiles owned by more than one thread, and the atomic updates combining them cost."""

    split_tiles: int = 0
    atomics: int = 0


class ScheduleDefinition:
    kind: ClassVar[str]  # "thread_mapped": the name specs, flags and file names use
    template: ClassVar[str]  # path under templates/
    kernel_name: ClassVar[str]  # the extern "C" symbol
    mapping_text: ClassVar[str]  # the spec mapping it recognises, for refusals
    worker_word: ClassVar[str]  # what one space slot is, for explain ("thread", "group", ...)
    combine_text: ClassVar[str]  # how partial results reach y, for explain
    # Schedules whose workers own fixed shares of atoms rather than whole tiles.
    owns_chunks: ClassVar[bool] = False
    # One thread walks every atom of its tiles alone, so the longest tile sets its time
    # (the runtime's SpMM vector stores are kept to short tiles there: dense_builds.vector_store).
    walks_whole_tiles: ClassVar[bool] = False

    # -- recognising and lowering a spec's mapping ---------------------------------------
    def claims(self, ctx: MappingContext) -> bool:
        """True when the spec's mapping has this schedule's shape (its details are checked,
        and refused with a located error, by :meth:`lower`)."""
        raise NotImplementedError

    def lower(self, ctx: MappingContext) -> Lowered:
        raise NotImplementedError

    # -- binding ----------------------------------------------------------------------------
    def bind(
        self, schedule: Schedule, shape: MatrixShape, values: Mapping[str, int | None]
    ) -> BoundSchedule:
        """Resolve every size for a matrix (or a layout's tiles) of ``shape``; ``values`` are
        the parameters bound so far (None: the documented default)."""
        raise NotImplementedError

    # -- ownership --------------------------------------------------------------------------
    def owners(self, bound: BoundSchedule, tile_ptr: IntArray) -> IntArray:
        """The owning global thread id of every atom, per this schedule's rules."""
        raise NotImplementedError

    def split_cost(self, bound: BoundSchedule, tile_ptr: IntArray, owner: IntArray) -> SplitCost:
        return SplitCost()

    def thread_of_stamp(
        self, bound: BoundSchedule, names: Sequence[str], stamp: Sequence[tuple[int, Any]]
    ) -> int:
        """The global thread bound to a reference space stamp ``[(pos, coord), ...]`` whose
        entries belong to the space ranks ``names`` (the spec's space order)."""
        raise NotImplementedError

    # -- the kernel -------------------------------------------------------------------------
    def compile_time_group(self, schedule: Schedule, bound: BoundSchedule | None) -> int:
        """Lanes per group compiled into the kernel (1: no groups)."""
        return 1

    def threads_per_block(self, schedule: Schedule, group: int) -> int:
        return schedule.block_threads

    def check_structure(self, schedule: Schedule, group: int) -> None:
        """Refuse compile-time choices the kernel cannot honour (ParameterError)."""

    def kernel_params(self, schedule: Schedule) -> tuple[KernelParam, ...]:
        """The schedule's own scalar arguments, in signature order."""
        raise NotImplementedError

    def kernel_arguments(self, bound: BoundSchedule) -> dict[str, int]:
        """Values of :meth:`kernel_params` for one binding."""
        raise NotImplementedError

    def check_arguments(self, bound: BoundSchedule, args: Mapping[str, int], limit: int) -> None:
        """Refuse arguments whose arithmetic in the kernel would overflow ``limit``."""

    def prepared_arrays(self, bound: BoundSchedule) -> tuple[PreparedArray, ...]:
        """Arrays among :meth:`kernel_params` computed once per prepared matrix on the device,
        in launch order, each naming the kernel of the source that fills it."""
        return ()

    def trailing_params(self, schedule: Schedule) -> tuple[KernelParam, ...]:
        """Arguments after the form's operands: the launch stream's scratch, where the kernel
        keeps state between its blocks (see :meth:`scratch_bytes`)."""
        return ()

    def scratch_bytes(self, bound: BoundSchedule, value_bytes: int) -> int:
        """Bytes of zeroed scratch a launch needs, one buffer per stream (0: none). The kernel
        leaves it zero when it ends, so launches on one stream share it."""
        return 0

    def build_options(self, bound: BoundSchedule, value_bytes: int) -> tuple[str, ...]:
        """``-DNAME=VALUE`` options the kernel of this binding is built with (the product and
        the kernels filling its prepared arrays alike): none unless a schedule sizes its
        kernel for the bound chunk. Dense launches take theirs from runtime.dense_builds."""
        return ()

    def zeroes_output(self, bound: BoundSchedule, value_bytes: int) -> bool:
        """True when the output must be zero before a launch (the kernel adds into it)."""
        return bound.schedule.combine is Combine.ATOMIC

    def template_context(self, schedule: Schedule, value_type: str) -> dict[str, Any]:
        """Extra Jinja2 variables of the schedule's template (``value_type``: "float" or
        "double"), over render's defaults."""
        return {}

    # -- words ----------------------------------------------------------------------------
    def header_lines(self, schedule: Schedule, group: int) -> list[str]:
        """Lines of the generated file's header that only this schedule has."""
        return []

    def explain_lines(self, schedule: Schedule) -> list[str]:
        return []

    def default_sizes(self, bound: BoundSchedule) -> dict[str, int]:
        """Resolved sizes worth printing beyond the named parameters."""
        return {}


def atom_tiles(tile_ptr: IntArray) -> IntArray:
    """The tile of every atom, from the tile offsets."""
    ptr = np.asarray(tile_ptr, dtype=np.int64)
    return np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
