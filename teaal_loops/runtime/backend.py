"""CuPy access: lazy import, device properties, and compiled-module caching.

CuPy is imported only when a kernel runs, so ``generate`` and every CPU path work without it.
Compiled modules are cached in memory (by the SHA-256 of source and options) and on disk by
CuPy itself: ``cupy.RawModule`` compiles through NVRTC with ``compile_with_cache``, which keys
its cubin files (under ``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``) by the source, the
options, the architecture and the NVRTC version, so a second process compiles nothing
(``tests/gpu/test_runtime.py::test_second_process_compiles_nothing`` checks it).
"""

from __future__ import annotations

import functools
import hashlib
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


def free_device_bytes() -> int:
    """Bytes the next allocations can use: free device memory plus CuPy's pooled free blocks."""
    cupy = cupy_module()
    free, _total = cupy.cuda.runtime.memGetInfo()
    return int(free) + int(cupy.get_default_memory_pool().free_bytes())
