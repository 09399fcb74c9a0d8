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
import threading
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


def get_function(source: str, name: str, *, trace: bool = False) -> Any:
    """The compiled ``extern "C"`` kernel ``name`` of ``source`` (cached in memory and on disk)."""
    cupy = cupy_module()
    options = COMPILE_OPTIONS + ((TRACE_OPTION,) if trace else ())
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
    before each launch: a launch is three pointer stores and one driver call on the current
    CuPy stream. Build it with :func:`raw_launch`, which returns None where this is unavailable.
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
        self.slots = [ctypes.c_void_p(0) for _ in range(trailing)]
        cells = self._cells + self.slots
        self._params = (ctypes.c_void_p * len(cells))(*(ctypes.addressof(c) for c in cells))
        self._params_ptr = ctypes.addressof(self._params)
        self._lock = threading.Lock()  # the slots are shared: one launch fills them at a time

    def __call__(self, *pointers: int) -> None:
        """Launch with the trailing pointer arguments ``pointers`` (device addresses) on the
        stream current at this call (inside ``with stream:``, a capture included, that one)."""
        stream = self._current_stream().ptr
        with self._lock:
            for slot, pointer in zip(self.slots, pointers, strict=True):
                slot.value = pointer
            self._launch_kernel(
                self._ptr, self._grid, 1, 1, self._block, 1, 1, 0, stream, self._params_ptr, 0
            )


def _argument_cell(value: Any) -> Any:
    """A ctypes object holding one kernel argument by value (device arrays by address)."""
    import numpy as np

    data = getattr(value, "data", None)
    if data is not None and hasattr(data, "ptr"):  # a CuPy array
        return ctypes.c_void_p(int(data.ptr))
    if isinstance(value, np.generic):
        return np.ctypeslib.as_ctypes_type(value.dtype)(value.item())
    raise TypeError(f"cannot pack kernel argument of type {type(value).__name__}")


def raw_launch(
    function: Any, grid: int, block: int, leading: Sequence[Any], trailing: int
) -> RawLaunch | None:
    """A :class:`RawLaunch` for ``function``, or None where CuPy lacks the driver entry point
    or an argument cannot be packed (callers then use CuPy's generic launch)."""
    cupy = cupy_module()
    launch_kernel = getattr(getattr(cupy.cuda, "driver", None), "launchKernel", None)
    # a RawKernel (what RawModule.get_function returns) holds its Function, per device
    target = getattr(function, "kernel", function)
    if launch_kernel is None or not hasattr(target, "ptr"):
        return None
    try:
        return RawLaunch(target, grid, block, leading, trailing, launch_kernel,
                         cupy.cuda.get_current_stream)
    except TypeError:
        return None


def zero_async(cupy: Any, array: Any) -> None:
    """Zero a contiguous device array on the current stream with one cudaMemsetAsync (all-zero
    bytes are 0.0 in IEEE floats); anything else through CuPy's fill."""
    if isinstance(array, cupy.ndarray) and array.flags.c_contiguous:
        cupy.cuda.runtime.memsetAsync(
            array.data.ptr, 0, array.nbytes, cupy.cuda.get_current_stream().ptr
        )
    else:
        array.fill(0)


def free_device_bytes() -> int:
    """Bytes the next allocations can use: free device memory plus CuPy's pooled free blocks."""
    cupy = cupy_module()
    free, _total = cupy.cuda.runtime.memGetInfo()
    return int(free) + int(cupy.get_default_memory_pool().free_bytes())
