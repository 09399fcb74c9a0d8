"""A compiled SpMV kernel for one schedule, layout and dtype, and its lean launch path.

``Kernel(schedule, dtype=...)`` renders and compiles lazily (one module per index width and
trace flag, cached by source hash). ``prepare(A)`` uploads and validates the matrix once and
precomputes every launch argument; ``launch(prepared, x, y)`` is then a single kernel launch
with no host synchronisation, which is what benchmarks time. ``kernel(A, x)`` remembers the
prepared form of the matrices it meets (``runtime.matrix_cache`` states the rule), so a loop
that passes the same matrix pays the preparation once. ``launch_into`` (no allocation) and
``capture`` (a CUDA graph, ``runtime.graphs``) serve loops that reuse their vectors;
``linear_operator`` hands the kernel to cupyx's solvers (``runtime.operator``). A scalar
epilogue is ``runtime.epilogue``'s (the SpMV fast path is for specs without one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from teaal_loops.codegen.config import KernelConfig, make_config, normalize_dtype
from teaal_loops.codegen.render import render
from teaal_loops.errors import MatrixError
from teaal_loops.ir.dense import run_length
from teaal_loops.ir.model import BoundSchedule, Schedule
from teaal_loops.layouts import get_layout, known_layouts
from teaal_loops.runtime import backend, dense_builds, epilogue, launcher, vector_call
from teaal_loops.runtime.dense_launch import DenseLaunch
from teaal_loops.runtime.device_matrix import (
    DeviceMatrix,
    check_device_vector,
    converter,
    to_device_vector,
)
from teaal_loops.runtime.graphs import CapturedLaunch, capture_launch
from teaal_loops.runtime.matrix_cache import DEFAULT_CAPACITY, MatrixCache, content_arrays
from teaal_loops.runtime.operands import (
    DenseCall,
    check_dense_output,
    dense_inputs,
    new_dense_output,
    sampled_result,
    trailing_arguments,
    transposed,
)
from teaal_loops.runtime.operator import linear_operator
from teaal_loops.runtime.scratch import StreamScratch
from teaal_loops.schedules import bind, schedule_definition
from teaal_loops.types import DeviceInfo, MatrixShape

_SCALAR_DTYPES = {"index_t": np.int32, "offset_t": None, "int": np.int32}
_LIMITS = {32: 2**31 - 1, 64: 2**63 - 1}


@dataclass
class PreparedMatrix:
    """A matrix on the device plus everything one launch of one kernel needs."""

    matrix: DeviceMatrix
    bound: BoundSchedule
    config: KernelConfig
    source: str
    options: tuple[str, ...]  # the build's -D options (ScheduleDefinition.build_options)
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    leading_args: tuple[Any, ...]  # layout + schedule arguments, in signature order
    no_owner: Any  # a one-element int32 array standing in for the unused owner pointer
    # True when the kernel adds into y (atomics): y must be zero before every launch
    accumulates: bool = False
    # the launch streams' scratch (runtime.scratch), for kernels that take one after the
    # owner (merge-path SpMV; empty where it adds split rows atomically); None: no such param
    scratch: StreamScratch | None = None
    # True when the values array is the user's own (no conversion, no copy): the kernel then
    # sees the user's in-place edits of the values (see runtime.matrix_cache)
    aliases_input: bool = False
    # trace flag, (trace flag, True) for a single-step dense build, or "epilogue"
    _functions: dict[Any, Any] = field(default_factory=dict)
    # trace flag -> launcher.RawLaunch with the leading arguments packed (False: unavailable)
    _raw: dict[bool, Any] = field(default_factory=dict)
    # vector_call.VectorCall: kernel(prepared, x) in one step for a plain x (False: unavailable)
    _call: Any = None
    # dense forms: the dense rank's size -> (grid, block, dense_space, dense_time)
    _dense: dict[int, tuple[Any, ...]] = field(default_factory=dict)

    @property
    def shape(self) -> MatrixShape:
        return self.matrix.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.matrix.dtype


def schedule_arguments(bound: BoundSchedule) -> dict[str, int]:
    """The schedule's own kernel arguments, checked against the compiled offset width."""
    definition = schedule_definition(bound.kind)
    args = definition.kernel_arguments(bound)
    definition.check_arguments(bound, args, _LIMITS[bound.index_bits])
    return args


class Kernel:
    """An SpMV kernel generated from one schedule (see :func:`teaal_loops.pipeline.compile`).

    ``kernel(A, x)`` remembers the prepared form of the last few matrices it met
    (:mod:`teaal_loops.runtime.matrix_cache` states exactly what is detected when a matrix
    changes), so calling it in a loop with the same matrix costs about what
    ``kernel(prepared, x)`` does. Every launch, zeroing and allocation goes to the current CuPy
    stream, and nothing synchronises with the host.
    """

    CACHE_SIZE = DEFAULT_CAPACITY  # prepared matrices remembered per kernel

    def __init__(
        self,
        schedule: Schedule,
        *,
        dtype: object = "float32",
        layout: str | None = None,
        params: Mapping[str, int] | None = None,
        padding_limit: float | None | str = "default",
    ) -> None:
        """``padding_limit``: how many times the CSR bytes a padded layout may take (None: no
        limit; "default": the layouts' own, 20)."""
        self.schedule = schedule
        self._build: dict[str, Any] = (
            {} if padding_limit == "default" else {"padding_limit": padding_limit}
        )
        self.dtype = np.dtype(normalize_dtype(dtype))
        self.layout = (layout or schedule.layout).lower()
        self.params = dict(params or {})
        # validates the layout and the structure now, before any matrix is seen
        self._nominal = make_config(
            schedule, dtype=self.dtype.name, layout=self.layout, bound=self._bind_nominal()
        )
        self.layout = self._nominal.layout  # canonical: "BCSR:4" -> "bcsr:4x4"
        self._cache: MatrixCache[PreparedMatrix] = MatrixCache(self.CACHE_SIZE)
        self._cupy: Any = None  # the cupy module, once a call has found it usable
        self._epilogue = schedule.form.epilogue  # None keeps the SpMV fast path
        # __call__'s one-step path applies: SpMV without an epilogue (read once, here)
        self._plain_spmv = self._epilogue is None and schedule.form.kind == "spmv"

    # -- binding and source ---------------------------------------------------------------
    def _bind_nominal(self) -> BoundSchedule:
        """Structural defaults (e.g. the group size) resolved without a matrix."""
        nominal = MatrixShape(rows=1, cols=1, nnz=1)
        return bind(self.schedule, nominal, DeviceInfo.h100(), self.params)

    @property
    def kind(self) -> str:
        return self.schedule.kind

    @property
    def accumulates(self) -> bool:
        """Whether the spec's mapping combines split tiles atomically (``Combine.ATOMIC``), so
        that its launches may add into a zeroed output. Whether one prepared matrix's launches
        do is ``prepared.accumulates``: merge-path SpMV of few blocks carries its split rows
        and stores every row (no zeroing) although its mapping combines atomically. A stacked
        layout (column panels) adds every tile into its row, so it accumulates too."""
        return self._nominal.may_accumulate

    @property
    def source(self) -> str:
        """CUDA source of the 32-bit-offset kernel (the trace build adds -DTEAAL_TRACE=1)."""
        return render(self._nominal)

    def bind(self, shape: MatrixShape) -> BoundSchedule:
        return bind(self.schedule, shape, backend.device_info(), self.params)

    def _cp(self) -> Any:
        cp = self._cupy
        if cp is None:
            cp = self._cupy = backend.cupy_module()
        return cp

    # -- preparing a matrix ---------------------------------------------------------------
    def prepare(self, A: Any) -> PreparedMatrix:
        """Upload and validate ``A`` now; the result is reused by every call and launch.

        Always prepares anew (use it after editing a matrix in place) and remembers the result
        for ``A``, so that ``kernel(A, x)`` finds it. Passing a :class:`PreparedMatrix` back
        returns it unchanged.
        """
        if isinstance(A, PreparedMatrix):
            return self._own(A)
        prepared = self._prepare(A)
        self._cache.store(A, prepared)
        return prepared

    def prepared_for(self, A: Any) -> PreparedMatrix:
        """``A`` prepared: remembered from an earlier call while ``A`` is unchanged (see
        :mod:`teaal_loops.runtime.matrix_cache`), else prepared now."""
        if type(A) is PreparedMatrix:
            return self._own(A)
        hit = self._cache.lookup(A)
        return hit if hit is not None else self.prepare(A)

    def forget(self, A: Any) -> bool:
        """Drop what this kernel remembers of matrix ``A`` (True if it remembered it): the next
        ``kernel(A, x)`` prepares it anew. Needed after editing ``A``'s arrays in place."""
        return self._cache.forget(A)

    def _own(self, prepared: PreparedMatrix) -> PreparedMatrix:
        """``prepared`` if a kernel of this dtype made it (its launch reads and writes vectors
        of that dtype: another would read past the ends of this kernel's vectors)."""
        if prepared.config.dtype != self._nominal.dtype:
            raise MatrixError(
                f"this matrix was prepared for {prepared.config.dtype}, not for this "
                f"{self.dtype.name} kernel: prepare it with this kernel"
            )
        return prepared

    @property
    def form(self) -> str:
        """The einsum form: "spmv", "spmm" or "sddmm" (:mod:`teaal_loops.ir.einsum`)."""
        return self.schedule.form.kind

    def _prepare(self, A: Any) -> PreparedMatrix:
        cupy = self._cp()
        if self.schedule.form.transposed:
            A = transposed(A)  # the layout holds A^T: Z = A^T @ B
        matrix: DeviceMatrix = converter(self.layout, self._build)(A, self.dtype)
        bound = self.bind(matrix.schedule_shape)  # tiles and atoms of the layout
        if bound.index_bits != matrix.index_bits:  # bind and the converter agree on the rule
            matrix = converter(self.layout, self._build)(A, self.dtype, bound.index_bits)
        cfg = make_config(self.schedule, dtype=self.dtype.name, layout=self.layout, bound=bound)
        launch = bound.launch
        if launch.threads_per_block != cfg.threads_per_block:
            raise AssertionError(  # bind and codegen disagree: a bug, not a user error
                f"bind chose {launch.threads_per_block} threads a block, the kernel was "
                f"compiled for {cfg.threads_per_block}"
            )
        definition = schedule_definition(bound.kind)
        source = render(cfg)
        value_bytes = self.dtype.itemsize
        options = definition.build_options(bound, value_bytes)
        no_owner = cupy.zeros(1, dtype=np.int32)
        computed = prepared_arrays(cfg, bound, matrix, source, no_owner, options)
        scratch_bytes = definition.scratch_bytes(bound, value_bytes)
        return PreparedMatrix(
            matrix=matrix,
            bound=bound,
            config=cfg,
            source=source,
            options=options,
            grid=(max(launch.blocks, 0), 1, 1),
            block=(launch.threads_per_block, 1, 1),
            leading_args=leading_arguments(cfg, bound, matrix, computed),
            no_owner=no_owner,
            accumulates=cfg.zeroes_output(bound),
            scratch=StreamScratch(cupy, scratch_bytes) if cfg.trailing_params() else None,
            aliases_input=_aliases(matrix, A),
        )

    # -- launching ------------------------------------------------------------------------
    def function(self, prepared: PreparedMatrix, *, trace: bool = False,
                 dense: tuple[int, int, int, bool] | None = None, threads: int = 0) -> Any:
        """The compiled kernel, built with the binding's options (``prepared.options``): the
        trace build or not; ``dense``, a dense launch's (threads a worker along the dense
        rank, steps each takes, steps read by vector loads or 0, whether its outputs take
        vector stores), whose build options follow from them instead, the bound
        chunk size and group, the matrix's mean and longest tile, the launch's ``threads``
        and the dtype (dense_builds.dense_options: blocks of one step, atoms loaded ahead,
        vector loads, loads a lane)."""
        options = prepared.options
        if dense is not None:
            bound = prepared.bound
            options = dense_builds.dense_options(
                prepared.source, dense[0], dense[1], chunk=bound.work_per_thread,
                vector=dense[2], mean_atoms=bound.matrix.nnz / max(bound.matrix.rows, 1),
                store=dense[3],
                group=bound.group_size, longest=bound.matrix.max_row, threads=threads,
                value_bytes=np.dtype(prepared.config.dtype).itemsize)
        key: Any = (trace, options) if options else trace
        fn = prepared._functions.get(key)
        if fn is None:
            fn = backend.get_function(prepared.source, prepared.config.kernel_name, trace=trace,
                                      options=options)
            prepared._functions[key] = fn
        return fn

    def launch(self, prepared: PreparedMatrix, x: Any, y: Any, owner: Any = None) -> None:
        """One raw launch of the product (a scalar epilogue is :meth:`launch_into`'s): no
        checks, no zeroing, no synchronisation (for benchmarks).

        ``x`` and ``y`` must be contiguous CuPy vectors of the kernel's dtype; for accumulating
        schedules the caller zeroes ``y`` first (see :meth:`zero_output`, or use
        :meth:`launch_into`). The launch goes through a launcher with the matrix's arguments
        packed once (one driver call on the current stream); CuPy's generic launch is the
        fallback (other argument types, a thread without a context).
        """
        if prepared.grid[0] == 0:
            return
        trace = owner is not None
        out = owner if trace else prepared.no_owner
        scratch = prepared.scratch
        raw = prepared._raw.get(trace)
        if raw is None:
            raw = self._raw_launcher(prepared, trace)
        if raw:
            try:
                if scratch is None:
                    raw(x.data.ptr, y.data.ptr, out.data.ptr)
                else:
                    raw(x.data.ptr, y.data.ptr, out.data.ptr, scratch.current_pointer())
                return
            except Exception:  # not CuPy arrays, or no current context: the generic path
                pass  # (which converts, ensures the context, or raises a clear error)
        fn = self.function(prepared, trace=trace)
        tail = () if scratch is None else (scratch.argument(),)
        fn(prepared.grid, prepared.block, prepared.leading_args + (x, y, out) + tail)

    def _raw_launcher(self, prepared: PreparedMatrix, trace: bool) -> Any:
        fn = self.function(prepared, trace=trace)
        trailing = 3 + (prepared.scratch is not None)  # x, y, owner (, scratch)
        raw = launcher.raw_launch(fn, prepared.grid[0], prepared.block[0], prepared.leading_args,
                                 trailing)
        prepared._raw[trace] = raw or False
        return raw or False

    def warm_up(self, A: Any) -> PreparedMatrix:
        """Prepare ``A``, compile its kernel and build its launcher now, so that the next
        launch does nothing but launch (before a CUDA graph capture, say)."""
        prepared = self.prepared_for(A)
        if prepared._raw.get(False) is None:
            self._raw_launcher(prepared, False)
        if prepared.scratch is not None:
            prepared.scratch.ready_on(self._cp().cuda.get_current_stream())
        return prepared

    def launch_into(self, A: Any, x: Any, y: Any, *addend: Any, **scalars: Any) -> None:
        """``y = A @ x`` into the caller's ``y``: zeroes ``y`` where the schedule accumulates,
        then one launch, on the current stream; no allocation and no synchronisation, so it can
        be captured in a CUDA graph (see :meth:`capture`). ``x`` and ``y`` must be contiguous
        CuPy vectors of the kernel's dtype (checked: the kernel takes their raw addresses).
        A scalar epilogue's ``C`` (like ``y``) and scalars follow; its launch follows."""
        prepared = self.prepared_for(A)
        check_device_vector(self._cp(), x, self.dtype, prepared.shape.cols, "x")
        check_device_vector(self._cp(), y, self.dtype, prepared.shape.rows, "y")
        if self._epilogue is not None or addend or scalars:
            epilogue.launch_into_with_epilogue(self, prepared, x, y, addend, scalars)
            return
        self.zero_output(prepared, y)
        self.launch(prepared, x, y)

    def capture(self, A: Any, x: Any, y: Any, *addend: Any, stream: Any = None,
                **scalars: Any) -> CapturedLaunch:
        """A CUDA graph of ``launch_into(A, x, y)`` (the zeroing of an accumulating output
        included), captured on ``stream`` (default: a new non-blocking stream). Replaying it
        (``graph.launch()``) computes ``A @ x`` from what ``x`` holds then, into ``y``: change
        ``x``'s contents in place, not the array. The returned object keeps the matrix and
        both vectors alive while it lives. A scalar epilogue's ``C`` and scalars follow as for
        :meth:`launch_into`: the graph holds both launches and the scalars' values."""
        if self._epilogue is not None or addend or scalars:
            return epilogue.capture_with_epilogue(self, A, x, y, addend, scalars, stream)
        return capture_launch(self, self.warm_up(A), x, y, stream=stream)

    def new_output(self, prepared: PreparedMatrix) -> Any:
        """An output vector ready for one launch: zeroed where the schedule accumulates."""
        cupy = self._cp()
        if prepared.accumulates:
            return cupy.zeros(prepared.matrix.shape.rows, dtype=self.dtype)
        return cupy.empty(prepared.matrix.shape.rows, dtype=self.dtype)

    def zero_output(self, prepared: PreparedMatrix, y: Any) -> None:
        """Re-zero ``y`` before a repeated launch of an accumulating schedule (else a no-op)."""
        if prepared.accumulates:
            backend.zero_async(self._cp(), y)

    def vector(self, prepared: PreparedMatrix, x: Any) -> Any:
        """``x`` as a contiguous CuPy vector of the kernel's dtype (itself when it is one)."""
        cupy = self._cp()
        if (
            isinstance(x, cupy.ndarray)
            and x.dtype == self.dtype
            and x.shape == (prepared.matrix.shape.cols,)
            and x.flags.c_contiguous
        ):
            return x
        return to_device_vector(x, self.dtype, prepared.shape.cols)

    def __call__(self, A: Any, x: Any, /, *more: Any, out: Any = None, **scalars: Any) -> Any:
        """The spec's product on the GPU, operands in the order ``Schedule.form`` names them
        after the sparse matrix: SpMV ``kernel(A, x)`` returns ``y = A @ x`` (a new CuPy
        vector, or ``out``); SpMM ``kernel(A, B)`` returns ``A @ B``; SDDMM
        ``kernel(C, A, B)`` returns ``C * (A @ B)`` with ``C``'s pattern (see
        :mod:`teaal_loops.runtime.operands`). Transposed specs use ``A^T``. ``A`` may be a
        PreparedMatrix, or any matrix, which is prepared once and remembered. A scalar
        epilogue ``Z = a * T1 + b * C``: ``kernel(A, x, C, a=2.0, b=0.5)`` (scalars by name)."""
        if self._plain_spmv and out is None and not more and not scalars:
            # the loop's case, in one step: a prepared or remembered matrix of this dtype
            # whose one-step call exists; anything else takes the general path below
            prepared = A if type(A) is PreparedMatrix else self._cache.lookup(A)
            if prepared is not None and prepared.config.dtype == self._nominal.dtype:
                call = prepared._call
                if call:
                    y = call(x)  # None unless x is a contiguous CuPy vector of our dtype/size
                    if y is not None:
                        return y
        if self._epilogue is not None or scalars:
            return epilogue.call_with_epilogue(self, A, (x, *more), out, scalars)
        if more or self.schedule.form.kind != "spmv":
            return self.call_dense(A, (x, *more), out=out)
        prepared = self.prepared_for(A)
        if out is None:
            call = prepared._call
            if call is None:
                call = self._vector_call(prepared)
            if call:
                y = call(x)
                if y is not None:
                    return y
        xd = self.vector(prepared, x)
        if out is None:
            y = self.new_output(prepared)
        else:
            y = check_device_vector(self._cp(), out, self.dtype, prepared.shape.rows, "out")
            self.zero_output(prepared, y)
        self.launch(prepared, xd, y)
        return y

    def _vector_call(self, prepared: PreparedMatrix) -> Any:
        """``prepared``'s one-step call (vector_call.vector_call: native where it compiles, else
        vector_call.VectorCall; outputs zeroed in batches where the schedule accumulates, one
        launch), built once; False without a raw launcher."""
        raw = prepared._raw.get(False)
        if raw is None:
            raw = self._raw_launcher(prepared, False)
        call: Any = False
        if raw:
            call = vector_call.vector_call(
                self._cp(), raw if prepared.grid[0] else None, prepared.shape.rows,
                prepared.shape.cols, self.dtype, zeroed=prepared.accumulates,
                owner=prepared.no_owner.data.ptr, scratch=prepared.scratch,
            )
        prepared._call = call
        return call

    # -- SpMM and SDDMM --------------------------------------------------------------------
    def call_dense(self, A: Any, operands: Any, *, out: Any = None, owner: Any = None,
                   scalars: Any = None) -> Any:
        """SpMM or SDDMM (see :meth:`__call__`); ``owner`` (trace builds) receives the owning
        thread of every (atom, dense index), atom-major (the product alone). A scalar
        epilogue's addend ends ``operands``; ``scalars`` maps its scalars' names to values."""
        if (self._epilogue is not None and owner is None) or scalars:
            return epilogue.call_with_epilogue(self, A, operands, out, scalars or {})
        if self.schedule.form.kind == "spmv":
            raise MatrixError(f"{self.schedule.spec_name} is SpMV: call kernel(A, x)")
        prepared = self.prepared_for(A)
        call, y, geometry = self.dense_operands(prepared, operands, out)
        if out is not None and prepared.accumulates:
            y.fill(0)
        self.launch_dense(prepared, call, y, owner, *geometry)
        if self.schedule.form.kind != "sddmm":
            return y
        return sampled_result(prepared.matrix.arrays, prepared.shape, y)  # C's pattern

    def bind_dense(self, A: Any, operands: Any, out: Any = None, *,
                   accumulate: bool = False) -> DenseLaunch:
        """SpMM / SDDMM bound once to ``operands`` and ``out`` (allocated when None; SpMM: the
        (M, N) output, SDDMM: the values in C's atom order): every check now, then ``launch()``
        repeats the product with none and copies nothing to the host, so a CUDA graph can
        capture it (SDDMM's :meth:`call_dense` builds a cupyx matrix, whose constructor reads
        the device) (runtime.dense_launch).

        ``accumulate=True``: each launch adds ``A @ B`` into what ``out`` holds (no zeroing):
        the second launch of a split (:func:`teaal_loops.split_heavy`: the light rows' kernel
        stores, then the heavy pieces' adds). Only over a layout whose every tile adds
        (``pieces``, ``panels``, ``csc``), so that no row is overwritten."""
        if self._epilogue is not None:
            raise MatrixError(f"{self.schedule.spec_name} has an epilogue: call the kernel")
        if self.schedule.form.kind == "spmv":
            raise MatrixError(f"{self.schedule.spec_name} is SpMV: use launch_into or capture")
        if accumulate:
            self._check_accumulates(out)
        prepared = self.prepared_for(A)
        call, y, (grid, block, space, time) = self.dense_operands(prepared, operands, out)
        fn, args = self._dense_function(prepared, call, y, None, space, time,
                                        int(grid[0]) * int(block[0]))
        return DenseLaunch(self._cp(), fn, grid, block, args, y,
                           prepared.accumulates and not accumulate, keep=(prepared, call))

    def _check_accumulates(self, out: Any) -> None:
        """``accumulate=True`` is honoured only where every tile adds into its row."""
        if out is None:
            raise MatrixError("accumulate=True adds into an output: pass it as out=")
        if not get_layout(self.layout).adds_every_tile:
            adding = ", ".join(n for n in known_layouts() if get_layout(n).adds_every_tile)
            raise MatrixError(
                f"accumulate=True: layout {self.layout} stores rows, which would overwrite "
                f"the output; only layouts whose every tile adds can ({adding})")

    def dense_operands(self, prepared: PreparedMatrix, operands: Any, out: Any) -> Any:
        """(checked operands, output: new and zeroed where the schedule accumulates, or
        ``out`` checked, not zeroed; launch geometry) of one dense call."""
        cupy = self._cp()
        shape = prepared.shape
        call = dense_inputs(cupy, self.schedule, shape.rows, shape.cols, self.dtype, operands)
        geometry = self.dense_launch(prepared, call.size)
        nnz = prepared.bound.matrix.nnz
        if out is None:
            y = new_dense_output(cupy, self.schedule, shape.rows, call.size, nnz, self.dtype,
                                 prepared.accumulates)
        else:
            y = check_dense_output(cupy, out, self.schedule, shape.rows, call.size, nnz,
                                   self.dtype)
        return call, y, geometry

    def dense_launch(self, prepared: PreparedMatrix, size: int) -> tuple[Any, ...]:
        """(grid, block, dense_space, dense_time) for a dense rank of ``size`` (cached)."""
        hit = prepared._dense.get(size)
        if hit is None:
            bound = bind(self.schedule, prepared.matrix.schedule_shape, backend.device_info(),
                         self.params, dense_size=size)
            hit = ((max(bound.launch.blocks, 0), 1, 1), (bound.launch.threads_per_block, 1, 1),
                   bound.dense_space, bound.dense_time)
            prepared._dense[size] = hit
        return hit

    def launch_dense(self, prepared: PreparedMatrix, call: DenseCall, y: Any, owner: Any,
                     grid: Any, block: Any, space: int, time: int) -> None:
        """The product's launch of a dense form (no checks, no zeroing)."""
        if grid[0] == 0:
            return
        fn, args = self._dense_function(prepared, call, y, owner, space, time,
                                        int(grid[0]) * int(block[0]))
        fn(grid, block, args)

    def _dense_function(self, prepared: PreparedMatrix, call: DenseCall, y: Any, owner: Any,
                        space: int, time: int, threads: int = 0) -> tuple[Any, tuple[Any, ...]]:
        """(the compiled function, its whole argument tuple) of one dense launch of
        ``threads`` threads; ``owner`` None: the product build, else the trace build writing
        into ``owner``."""
        offset = np.int64 if prepared.bound.index_bits == 64 else np.int32
        trailing = trailing_arguments(
            self.schedule, call, y, prepared.no_owner if owner is None else owner, space, time,
            offset,
        )
        dense = self.schedule.form.dense
        store = False
        if self.schedule.form.kind == "sddmm":
            u, v = call.arrays
            vector = dense_builds.sampled_vector(u, v, run=run_length(self.schedule))
        else:
            vector = dense_builds.vector_steps(bool(dense and dense.contiguous), time,
                                               call.size, call.arrays[0])
            store = dense_builds.vector_store(
                vector, y, walks_rows=schedule_definition(self.schedule.kind).walks_whole_tiles,
                longest_row=prepared.bound.matrix.max_row)
        fn = self.function(prepared, trace=owner is not None,
                           dense=(space, time, vector, store), threads=threads)
        return fn, prepared.leading_args + trailing

    def trace_dense(self, A: Any, operands: Any) -> Any:
        """The owning global thread of every (atom, dense index) of a dense form: a CuPy
        int32 array of shape (atoms, D) in the layout's atom order (-1 = none)."""
        cupy = self._cp()
        prepared = self.prepared_for(A)
        shape = prepared.shape
        call = dense_inputs(cupy, self.schedule, shape.rows, shape.cols, self.dtype, operands)
        owner = cupy.full(prepared.bound.matrix.nnz * call.size, -1, dtype=np.int32)
        self.call_dense(prepared, operands, owner=owner)
        return owner.reshape(prepared.bound.matrix.nnz, call.size)

    def linear_operator(self, A: Any, *, dtype: object = None) -> Any:
        """``A`` as a ``cupyx.scipy.sparse.linalg.LinearOperator`` whose products run this
        kernel, for ``cg``, ``gmres``, ``minres``, ``eigsh``, ``lobpcg`` (see
        :func:`teaal_loops.runtime.operator.linear_operator`). Refused with an epilogue."""
        epilogue.refuse_product_only(self.schedule, "kernel.linear_operator")
        return linear_operator(self, self.prepared_for(A), dtype=dtype)

    def trace(self, A: Any, x: Any) -> Any:
        """The owning global thread id of every atom (CuPy int32, in the layout's atom order,
        see :mod:`teaal_loops.layouts.contract`; -1 = none)."""
        cupy = self._cp()
        prepared = self.prepared_for(A)
        xd = self.vector(prepared, x)
        y = self.new_output(prepared)
        owner = cupy.full(prepared.bound.matrix.nnz, -1, dtype=np.int32)  # one per atom
        self.launch(prepared, xd, y, owner)
        return owner

    def __repr__(self) -> str:
        s = self.schedule
        return f"Kernel({s.spec_name}: {self.kind}, layout={self.layout}, dtype={self.dtype.name})"


def leading_arguments(
    cfg: KernelConfig, bound: BoundSchedule, matrix: DeviceMatrix,
    computed: Mapping[str, Any] | None = None,
) -> tuple[Any, ...]:
    """The layout's and the schedule's kernel arguments in signature order (x, y and owner
    follow them), scalars cast to the types the signature declares; ``computed``: the
    schedule's prepared arrays (:func:`prepared_arrays`)."""
    values: dict[str, Any] = dict(matrix.arrays)
    values.update(matrix.kernel_scalars())
    values.update(schedule_arguments(bound))
    values.update(computed or {})
    offset_dtype = np.int64 if bound.index_bits == 64 else np.int32
    leading = []
    for p in get_layout(cfg.layout).params + cfg.schedule_params():
        value = values[p.name]
        if p.is_pointer:
            leading.append(value)
        else:
            scalar = _SCALAR_DTYPES[p.scalar_type] or offset_dtype
            leading.append(scalar(value))
    return tuple(leading)


def prepared_arrays(
    cfg: KernelConfig, bound: BoundSchedule, matrix: DeviceMatrix, source: str, dummy: Any,
    options: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The schedule's arrays computed once per matrix (merge-path's block partition), each by
    its kernel in ``source`` built with the product's ``options`` (so that both see the same
    constants): that kernel takes the product kernel's parameters, so the
    layout's and the schedule's are passed as a launch passes them and the operands after
    them as ``dummy`` (pointers) or zero (scalars), which it does not read."""
    wanted = schedule_definition(bound.kind).prepared_arrays(bound)
    if not wanted:
        return {}
    cupy = backend.cupy_module()
    offset_dtype = np.int64 if bound.index_bits == 64 else np.int32
    computed = {a.name: cupy.empty(max(a.length, 1), dtype=offset_dtype) for a in wanted}
    leading = leading_arguments(cfg, bound, matrix, computed)
    rest = []
    for p in cfg.kernel_params()[len(leading):]:
        scalar = _SCALAR_DTYPES.get(p.scalar_type, np.int64) or offset_dtype
        rest.append(dummy if p.is_pointer else scalar(0))
    threads = cfg.threads_per_block
    for a in wanted:
        if a.length:
            fn = backend.get_function(source, a.kernel, options=options)
            fn(((a.length + threads - 1) // threads, 1, 1), (threads, 1, 1), leading + tuple(rest))
    return computed


def _aliases(matrix: DeviceMatrix, A: Any) -> bool:
    """True when the prepared values array is one of ``A``'s own arrays."""
    values = matrix.arrays.get("values")
    content = content_arrays(A)
    return values is not None and content is not None and any(values is a for a in content)
