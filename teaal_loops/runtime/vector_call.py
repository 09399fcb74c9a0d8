"""``kernel(prepared, x)`` in one step: outputs handed out from batches
(:class:`OutputVectors`), and the call itself, native (``runtime/native/vector_call.c``) where
it compiles, else in Python (:class:`VectorCall`); :func:`vector_call` picks.
"""

from __future__ import annotations

import weakref
from typing import Any

from teaal_loops.runtime.launcher import RawLaunch, launch_failed, launch_kernel_address

# Outputs in batches (OutputVectors): at most this many bytes a batch, at most this many
# outputs a batch, and only where a batch holds at least MIN_BATCH outputs; each output starts
# on a boundary of CuPy's own allocation unit, as a fresh array would.
BATCH_BYTES = 1 << 20
MAX_BATCH = 64
MIN_BATCH = 4
ALIGNMENT = 512


class OutputVectors:
    """New output vectors of one length and dtype, zeroed or not (``new(stream, pointer)``).

    On an H100 machine one ``cudaMemsetAsync`` costs the host about what a launch does
    (4.6 us against 4.5 us) and an allocation from CuPy's pool 1.3 us (BENCHMARKS.md), while
    an array around memory already allocated costs about 2.4 us. Small outputs therefore come
    in batches: one allocation (and, for an accumulating schedule, one memset) make up to
    :data:`MAX_BATCH` outputs, which are handed out one at a time, each exactly once (an
    output given to a caller is never given again), on the device and the very stream object
    that the batch was allocated on (so CuPy's pool, which orders reuse by stream, and the
    memset both come before every kernel that writes them; the stream is held by weak
    reference, so a new stream that reuses a dead one's handle gets a batch of its own).
    On a stream that is capturing a CUDA graph, a zeroed output is allocated and zeroed
    alone, so that the graph zeroes it at every replay. The price: a batch's memory (at most
    :data:`BATCH_BYTES`) lives as long as any output cut from it. Larger outputs are plain
    allocations from CuPy's pool (and memsets).

    ``runtime/native/vector_call.c`` holds its native twin (the same rules, built from
    :meth:`native_parts`), which the native one-step call calls with no Python in between.
    """

    def __init__(self, cupy: Any, n: int, dtype: Any, *, zeroed: bool) -> None:
        import numpy as np

        self._ndarray = cupy.ndarray
        self._pointer = cupy.cuda.MemoryPointer
        self._alloc = cupy.cuda.alloc
        self._memset = cupy.cuda.runtime.memsetAsync
        self._capturing = cupy.cuda.runtime.streamIsCapturing
        self._device = cupy.cuda.runtime.getDevice
        self._shape = (int(n),)
        self._dtype = np.dtype(dtype)
        self._nbytes = int(n) * self._dtype.itemsize
        self._zeroed = zeroed
        self._slot = -(-self._nbytes // ALIGNMENT) * ALIGNMENT
        count = min(MAX_BATCH, BATCH_BYTES // self._slot) if self._slot else 0
        self._count = count if count >= MIN_BATCH else 0
        # (device, weak reference to the stream, the batch's memory, an iterator over the
        # offsets not handed out yet)
        self._batch: tuple[int, Any, Any, Any] | None = None

    @property
    def stream(self) -> Any:
        """The stream the current batch was cut on (None: no batch, or its stream is gone)."""
        return None if self._batch is None else self._batch[1]()

    def native_parts(self) -> tuple[Any, ...]:
        """What the native twin of this factory (``OutputVectors`` in
        ``runtime/native/vector_call.c``, the same rules in C) is built from: the CuPy
        functions it calls, the output's shape, dtype and bytes, zeroed or not, the slot
        and how many slots a batch holds (0: no batches)."""
        return (self._ndarray, self._pointer, self._alloc, self._memset, self._capturing,
                self._device, self._shape, self._dtype, self._nbytes, self._zeroed,
                self._slot, self._count)

    def new(self, stream: Any, pointer: int) -> Any:
        """A new output on ``stream``, CuPy's current stream, whose raw pointer the caller
        read (``pointer``): zero where this factory zeroes, undefined otherwise."""
        if self._count and not (self._zeroed and self._in_capture(pointer)):
            batch = self._batch
            if batch is not None and batch[1]() is stream and batch[0] == self._device():
                offset = next(batch[3], None)  # atomic under the GIL: each offset once
                if offset is not None:  # (memptr positional: a keyword costs 0.7 us)
                    return self._ndarray(self._shape, self._dtype,
                                         self._pointer(batch[2], offset))
            return self._new_batch(stream, pointer)
        out = self._ndarray(self._shape, self._dtype)
        if self._zeroed:
            self._memset(out.data.ptr, 0, self._nbytes, pointer)
        return out

    def _in_capture(self, pointer: int) -> bool:
        """Whether the stream is capturing a graph (the legacy default stream, 0, never is);
        an error asking counts as capturing, so that the output is zeroed on its own."""
        if pointer == 0:
            return False
        try:
            return bool(self._capturing(pointer))
        except Exception:
            return True

    def _new_batch(self, stream: Any, pointer: int) -> Any:
        size = self._slot * self._count
        memory = self._alloc(size)
        if self._zeroed:
            self._memset(memory.ptr, 0, size, pointer)
        offsets = iter(range(self._slot, size, self._slot))
        self._batch = (self._device(), weakref.ref(stream), memory.mem, offsets)
        return self._ndarray(self._shape, self._dtype, memory)


class VectorCall:
    """``kernel(prepared, x)`` for the common case in one step, built once per prepared
    matrix: ``x`` a C-contiguous CuPy vector of the kernel's dtype and the matrix's columns
    (for anything else it returns None and the caller takes its general path), a new output
    from :class:`OutputVectors`, one launch, and the current stream read once for both."""

    def __init__(
        self,
        cupy: Any,
        launch: RawLaunch | None,
        rows: int,
        cols: int,
        dtype: Any,
        *,
        zeroed: bool,
        owner: int,
        scratch: Any = None,
    ) -> None:
        """``launch``: None where there is nothing to launch (an empty grid); ``owner``: the
        address passed for the unused owner pointer; ``scratch``: the prepared matrix's
        :class:`~teaal_loops.runtime.scratch.StreamScratch`, whose buffer for the launch stream
        follows the owner (None: the kernel has no such parameter)."""
        import numpy as np

        self._ndarray = cupy.ndarray
        self._current_stream = cupy.cuda.get_current_stream
        self._launch = launch
        self._dtype = np.dtype(dtype)
        self._x_shape = (int(cols),)
        self._owner = int(owner)
        self._scratch = scratch
        self.outputs = OutputVectors(cupy, rows, dtype, zeroed=zeroed)

    def __call__(self, x: Any) -> Any:
        # ``is`` on the dtype: NumPy's built-in dtypes are singletons, and a false negative
        # only sends the call to the general path, which compares them properly
        if (
            type(x) is not self._ndarray
            or x.dtype is not self._dtype
            or x.shape != self._x_shape
            or not x._c_contiguous
        ):
            return None
        stream = self._current_stream()
        pointer = stream.ptr
        y = self.outputs.new(stream, pointer)
        if self._launch is not None:
            if self._scratch is None:
                self._launch.launch_on(pointer, (x.data.ptr, y.data.ptr, self._owner))
            else:
                self._launch.launch_on(pointer, (x.data.ptr, y.data.ptr, self._owner,
                                                 self._scratch.pointer(pointer)))
        return y


def native_unavailable() -> str | None:
    """Why the native one-step call cannot run here (one line), or None when it can."""
    from teaal_loops.runtime import native

    reason = native.unavailable_reason()
    if reason is None and not launch_kernel_address():
        return "libcuda's cuLaunchKernel was not found"
    return reason


def vector_call(
    cupy: Any,
    launch: RawLaunch | None,
    rows: int,
    cols: int,
    dtype: Any,
    *,
    zeroed: bool,
    owner: int,
    scratch: Any = None,
    driver_address: int | None = None,
) -> Any:
    """``kernel(prepared, x)``'s one-step call: the native twins of :class:`VectorCall` and
    :class:`OutputVectors` (``runtime/native/vector_call.c``, the same steps in C) where they
    compile and libcuda's launch entry is found, else :class:`VectorCall`.
    ``driver_address``: the ``cuLaunchKernel`` to call (tests pass a recorder)."""
    from teaal_loops.runtime import native

    module = native.load()
    address = launch_kernel_address() if driver_address is None else driver_address
    if module is not None and (launch is None or address):
        import numpy as np

        function, grid, block, leading = launch.native_parts() if launch else (0, 0, 0, ())
        outputs = module.OutputVectors(
            *OutputVectors(cupy, rows, dtype, zeroed=zeroed).native_parts())
        try:
            return module.VectorCall(
                cupy.ndarray, np.dtype(dtype), int(cols), cupy.cuda.get_current_stream, outputs,
                None if scratch is None else scratch.pointer, launch_failed,
                address if launch else 0, function, grid, block, leading, int(owner),
                (launch, scratch),
            )
        except ValueError:  # more leading arguments than the C side holds
            pass
    return VectorCall(cupy, launch, rows, cols, dtype, zeroed=zeroed, owner=owner,
                      scratch=scratch)
