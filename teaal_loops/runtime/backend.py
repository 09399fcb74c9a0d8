"""CuPy access: lazy import, device properties, and compiled-module caching.

CuPy is imported only when a kernel runs, so ``generate`` and every CPU path work without it.
Compiled modules are cached in memory (by the SHA-256 of source and options) and on disk by
CuPy itself: ``cupy.RawModule`` compiles through NVRTC with ``compile_with_cache``, which keys
its cubin files (under ``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``) by the source, the
options, the architecture and the NVRTC version, so a second process compiles nothing
(``tests/gpu/test_runtime.py::test_second_process_compiles_nothing`` checks it).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import weakref
from collections.abc import Sequence
from typing import Any

from teaal_loops.errors import DeviceError
from teaal_loops.types import DeviceInfo

# What installs CuPy from a checkout (teaal-loops is not on the package index).
INSTALL_HINT = "pip install '.[cuda13]' in the checkout ('.[cuda12]' for a CUDA 12 driver)"
COMPILE_OPTIONS: tuple[str, ...] = ("--std=c++17",)
TRACE_OPTION = "-DTEAAL_TRACE=1"

_modules: dict[str, Any] = {}


def cupy_module() -> Any:
    """The ``cupy`` module with a usable device, or a one-line :class:`DeviceError`."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install raising at import
        raise DeviceError(
            f"CuPy is not importable ({_first_line(exc)}); running kernels needs CuPy and a "
            f"CUDA GPU: {INSTALL_HINT}"
        ) from None
    _check_device(cupy)
    return cupy


@functools.lru_cache(maxsize=1)
def _device_count(cupy: Any) -> int:
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:
        raise DeviceError(
            f"no usable CUDA device or driver ({_first_line(exc)}); CuPy is installed: check "
            "the GPU and its driver (nvidia-smi)"
        ) from None


def _check_device(cupy: Any) -> None:
    if _device_count(cupy) < 1:
        raise DeviceError(
            "no CUDA device found; CuPy is installed: check the GPU and its driver (nvidia-smi)"
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def unavailable_reason() -> str | None:
    """Why kernels cannot run here (one line, the cause first), or None when they can."""
    try:
        cupy_module()
    except DeviceError as err:
        return err.message
    return None


def gpu_available() -> bool:
    """True when CuPy imports and sees a device (for tests and CLI messages)."""
    try:
        cupy_module()
    except DeviceError:
        return False
    return True


@functools.lru_cache(maxsize=8)
def device_info(device_id: int | None = None) -> DeviceInfo:
    """The current device's properties as the IR's :class:`DeviceInfo` (for ``bind``)."""
    cupy = cupy_module()
    dev = cupy.cuda.Device(device_id) if device_id is not None else cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    if isinstance(name, bytes):
        name = name.decode()
    return DeviceInfo(
        name=str(name),
        sm_count=int(props["multiProcessorCount"]),
        max_threads_per_sm=int(props["maxThreadsPerMultiProcessor"]),
        l2_bytes=int(props["l2CacheSize"]),
    )


def compute_capability() -> str:
    cupy = cupy_module()
    return str(cupy.cuda.Device().compute_capability)


def source_key(source: str, options: tuple[str, ...]) -> str:
    """SHA-256 of the source, the options and the device architecture."""
    h = hashlib.sha256()
    h.update(source.encode())
    h.update(b"\0".join(o.encode() for o in options))
    h.update(compute_capability().encode())
    return h.hexdigest()


def get_function(source: str, name: str, *, trace: bool = False,
                 options: tuple[str, ...] = ()) -> Any:
    """The compiled ``extern "C"`` kernel ``name`` of ``source`` (cached in memory and on disk);
    ``options``: a dense launch's (:func:`dense_options`)."""
    cupy = cupy_module()
    options = COMPILE_OPTIONS + ((TRACE_OPTION,) if trace else ()) + options
    key = source_key(source, options)
    module = _modules.get(key)
    if module is None:
        module = cupy.RawModule(code=source, options=options, backend="nvrtc")
        _modules[key] = module
    # A compile error here is a bug in a template, not a user error: let it surface in full.
    return module.get_function(name)


class RawLaunch:
    """One kernel launch with every argument packed once, for a loop that calls it many times.

    CuPy's generic ``function(grid, block, args)`` boxes each argument on every call (several
    microseconds for a dozen arguments). Here the leading arguments (a prepared matrix's arrays
    and scalars) are packed into the ``void**`` array that ``cuLaunchKernel`` takes when the
    launcher is built, and the trailing pointer arguments (x, y, owner) are slots rewritten
    before each launch: a launch is one slice store and one driver call on the current CuPy
    stream. Build it with :func:`raw_launch`, which returns None where this is unavailable.

    Threads may share a launcher: each launch takes an argument array of its own from a free
    list (``list.pop`` and ``list.append`` are atomic under the GIL; a lock cost twice as
    much), because the driver reads the slots while it holds no GIL.
    """

    def __init__(
        self,
        function: Any,
        grid: int,
        block: int,
        leading: Sequence[Any],
        trailing: int,
        launch_kernel: Any,
        current_stream: Any,
    ) -> None:
        self._function = function  # keeps the module loaded while this launcher lives
        self._ptr = int(function.ptr)
        self._grid = int(grid)
        self._block = int(block)
        self._launch_kernel = launch_kernel
        self._current_stream = current_stream
        self._cells: list[Any] = [_argument_cell(value) for value in leading]
        self._trailing = trailing
        self._free: list[tuple[Any, Any, int]] = [self._argument_array()]

    def _argument_array(self) -> tuple[Any, Any, int]:
        """(trailing slots, the ``void**`` array, its address): the leading cells are shared
        (read only), the slots belong to this array."""
        slots = (ctypes.c_void_p * self._trailing)()
        addresses = [ctypes.addressof(c) for c in self._cells]
        width = ctypes.sizeof(ctypes.c_void_p)
        addresses += [ctypes.addressof(slots) + i * width for i in range(self._trailing)]
        params = (ctypes.c_void_p * len(addresses))(*addresses)
        return slots, params, ctypes.addressof(params)

    def __call__(self, *pointers: int) -> None:
        """Launch with the trailing pointer arguments ``pointers`` (device addresses) on the
        stream current at this call (inside ``with stream:``, a capture included, that one).
        The body of :meth:`launch_on`, inlined: a call more costs a launch 0.15 us."""
        stream = self._current_stream().ptr
        free = self._free
        try:
            array = free.pop()
        except IndexError:
            array = self._argument_array()
        try:
            array[0][:] = pointers
            status = self._launch_kernel(
                self._ptr, self._grid, 1, 1, self._block, 1, 1, 0, stream, array[2], 0
            )
        finally:
            free.append(array)
        if status:
            raise DeviceError(f"cuLaunchKernel failed with CUDA driver error {status}")

    def native_parts(self) -> tuple[int, int, int, tuple[int, ...]]:
        """(the CUfunction, grid, block, the leading arguments' addresses) for the native
        one-step call (:func:`vector_call`), which keeps this launcher alive."""
        return (self._ptr, self._grid, self._block,
                tuple(ctypes.addressof(c) for c in self._cells))

    def launch_on(self, stream: int, pointers: Sequence[int]) -> None:
        """Launch on ``stream`` (a raw stream pointer the caller read from CuPy's current
        stream at this call) with the trailing pointer arguments ``pointers``."""
        free = self._free
        try:
            array = free.pop()
        except IndexError:  # another thread is launching with the spare one
            array = self._argument_array()
        try:
            array[0][:] = pointers  # ValueError unless there is one pointer a slot
            status = self._launch_kernel(
                self._ptr, self._grid, 1, 1, self._block, 1, 1, 0, stream, array[2], 0
            )
        finally:
            free.append(array)
        if status:  # the ctypes entry point returns the driver's status; CuPy's raises
            raise DeviceError(f"cuLaunchKernel failed with CUDA driver error {status}")


def _argument_cell(value: Any) -> Any:
    """A ctypes object holding one kernel argument by value (device arrays by address)."""
    import numpy as np

    data = getattr(value, "data", None)
    if data is not None and hasattr(data, "ptr"):  # a CuPy array
        return ctypes.c_void_p(int(data.ptr))
    if isinstance(value, np.generic):
        return np.ctypeslib.as_ctypes_type(value.dtype)(value.item())
    raise TypeError(f"cannot pack kernel argument of type {type(value).__name__}")


# Which driver entry point launches: "cupy" (CuPy's Cython binding of cuLaunchKernel) or
# "ctypes" (libcuda's cuLaunchKernel through ctypes); each falls back to the other. CuPy's was
# the faster on an H100 (BENCHMARKS.md, the Python API section, gives both).
LAUNCH_ENTRY = "cupy"


@functools.lru_cache(maxsize=1)
def ctypes_launch_kernel() -> Any:
    """libcuda's ``cuLaunchKernel`` through ctypes (returns the driver's status), or None where
    libcuda cannot be loaded."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuLaunchKernel
    except (OSError, AttributeError):
        return None
    u = ctypes.c_uint
    fn.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def launch_entry(cupy: Any) -> Any:
    """The driver's launch entry point that :data:`LAUNCH_ENTRY` names, else the other one,
    else None."""
    binding = getattr(getattr(cupy.cuda, "driver", None), "launchKernel", None)
    entries = [binding, ctypes_launch_kernel()]
    if LAUNCH_ENTRY == "ctypes":
        entries.reverse()
    return next((e for e in entries if e is not None), None)


def raw_launch(
    function: Any, grid: int, block: int, leading: Sequence[Any], trailing: int
) -> RawLaunch | None:
    """A :class:`RawLaunch` for ``function``, or None where no driver entry point is found
    or an argument cannot be packed (callers then use CuPy's generic launch)."""
    cupy = cupy_module()
    launch_kernel = launch_entry(cupy)
    # a RawKernel (what RawModule.get_function returns) holds its Function, per device
    target = getattr(function, "kernel", function)
    if launch_kernel is None or not hasattr(target, "ptr"):
        return None
    try:
        return RawLaunch(target, grid, block, leading, trailing, launch_kernel,
                         cupy.cuda.get_current_stream)
    except TypeError:
        return None


def is_contiguous(array: Any) -> bool:
    """``array.flags.c_contiguous``, read without building CuPy's flags object (a CuPy array
    carries the bit as ``_c_contiguous``; anything else is asked through its flags)."""
    bit = getattr(array, "_c_contiguous", None)
    return bool(array.flags.c_contiguous) if bit is None else bool(bit)


def zero_async(cupy: Any, array: Any) -> None:
    """Zero a contiguous device array on the current stream with one cudaMemsetAsync (all-zero
    bytes are 0.0 in IEEE floats); anything else through CuPy's fill."""
    if isinstance(array, cupy.ndarray) and is_contiguous(array):
        cupy.cuda.runtime.memsetAsync(
            array.data.ptr, 0, array.nbytes, cupy.cuda.get_current_stream().ptr
        )
    else:
        array.fill(0)


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


def free_device_bytes() -> int:
    """Bytes the next allocations can use: free device memory plus CuPy's pooled free blocks."""
    cupy = cupy_module()
    free, _total = cupy.cuda.runtime.memGetInfo()
    return int(free) + int(cupy.get_default_memory_pool().free_bytes())


def launch_failed(status: int) -> None:
    """What the native one-step call does when the driver refuses a launch."""
    raise DeviceError(f"cuLaunchKernel failed with CUDA driver error {status}")


@functools.lru_cache(maxsize=1)
def launch_kernel_address() -> int:
    """The address of libcuda's ``cuLaunchKernel`` (0 where libcuda cannot be loaded)."""
    fn = ctypes_launch_kernel()
    return 0 if fn is None else int(ctypes.cast(fn, ctypes.c_void_p).value or 0)


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
    """``kernel(prepared, x)``'s one-step call: the native twin of :class:`VectorCall`
    (``runtime/native/vector_call.c``, the same steps in C, 0.2 to 1.4 us less a call) where it
    compiles and libcuda's launch entry is found, else :class:`VectorCall`.
    ``driver_address``: the ``cuLaunchKernel`` to call (tests pass a recorder)."""
    from teaal_loops.runtime import native

    outputs = OutputVectors(cupy, rows, dtype, zeroed=zeroed)
    module = native.load()
    address = launch_kernel_address() if driver_address is None else driver_address
    if module is not None and (launch is None or address):
        import numpy as np

        function, grid, block, leading = launch.native_parts() if launch else (0, 0, 0, ())
        try:
            return module.VectorCall(
                cupy.ndarray, np.dtype(dtype), int(cols), cupy.cuda.get_current_stream,
                outputs, None if scratch is None else scratch.pointer, launch_failed,
                address if launch else 0, function, grid, block, leading, int(owner),
                (launch, scratch),
            )
        except ValueError:  # more leading arguments than the C side holds
            pass
    python = VectorCall(cupy, launch, rows, cols, dtype, zeroed=zeroed, owner=owner,
                        scratch=scratch)
    python.outputs = outputs
    return python

