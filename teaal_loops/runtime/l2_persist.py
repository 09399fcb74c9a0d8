"""Keep a small, hot array (SpMV's ``x``) in L2 while the matrix streams past it.

On Hopper part of the L2 can be set aside for *persisting* lines: a stream's access-policy
window marks an address range whose lines, once loaded, are evicted last. SpMV on a matrix
with random columns gathers ``x`` once per nonzero while the matrix's values and indices,
read once, push ``x`` out of L2 (the kernels already load them with evict-first hints); a
window over ``x`` is the other half of that experiment (the performance issue lists it among
the things to try, measure and keep or drop).

:class:`PersistingWindow` sets the set-aside (``cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)``,
at most the device's maximum) and the window on one stream (``cuStreamSetAttribute``), and
restores both (window of 0 bytes, persisting lines reset, set-aside 0) on exit. It talks to
the driver (``libcuda``) through ctypes: CuPy has no binding for either call. Enum values and
the 64-byte attribute union are those of ``cuda.h`` (CUDA 12 and 13).
"""

from __future__ import annotations

import ctypes
from types import TracebackType
from typing import Any

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1
CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE = 108
CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE = 109
CU_ACCESS_PROPERTY_NORMAL = 0
CU_ACCESS_PROPERTY_STREAMING = 1
CU_ACCESS_PROPERTY_PERSISTING = 2


class AccessPolicyWindow(ctypes.Structure):
    _fields_ = [
        ("base_ptr", ctypes.c_void_p),
        ("num_bytes", ctypes.c_size_t),
        ("hitRatio", ctypes.c_float),
        ("hitProp", ctypes.c_int),
        ("missProp", ctypes.c_int),
    ]


class StreamAttrValue(ctypes.Union):
    """``CUstreamAttrValue`` (``CUlaunchAttributeValue``): a 64-byte union."""

    _fields_ = [("accessPolicyWindow", AccessPolicyWindow), ("pad", ctypes.c_char * 64)]


def window_value(ptr: int, num_bytes: int, hit_ratio: float) -> StreamAttrValue:
    value = StreamAttrValue()
    value.accessPolicyWindow.base_ptr = ptr or None
    value.accessPolicyWindow.num_bytes = num_bytes
    value.accessPolicyWindow.hitRatio = hit_ratio
    value.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING
    value.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING
    return value


def plan(nbytes: int, max_set_aside: int, max_window: int) -> tuple[int, int, float]:
    """(set-aside bytes, window bytes, hit ratio) for an array of ``nbytes``: the window covers
    as much of it as the device allows, and the hit ratio is the share the set-aside can hold
    (NVIDIA's guidance: a ratio above set-aside / window thrashes the persisting lines)."""
    window = min(nbytes, max_window)
    set_aside = min(nbytes, max_set_aside)
    ratio = min(1.0, set_aside / window) if window else 0.0
    return set_aside, window, ratio


class DriverError(RuntimeError):
    pass


def _driver() -> Any:
    return ctypes.CDLL("libcuda.so.1")


def _check(code: int, what: str) -> None:
    if code != 0:
        raise DriverError(f"{what} failed with CUresult {code}")


class PersistingWindow:
    """``with PersistingWindow(cupy, x): ...`` keeps ``x`` persisting in L2 for launches on
    ``stream`` (default: the current stream) inside the block (module docstring)."""

    def __init__(self, cupy: Any, array: Any, *, stream: Any = None) -> None:
        self._cupy = cupy
        self._array = array
        self._stream = stream if stream is not None else cupy.cuda.get_current_stream()
        self._cuda = _driver()
        device = cupy.cuda.Device()
        self.max_set_aside = int(device.attributes.get("MaxPersistingL2CacheSize", 0)) or \
            self._attribute(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, device.id)
        self.max_window = int(device.attributes.get("MaxAccessPolicyWindowSize", 0)) or \
            self._attribute(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, device.id)
        self.set_aside, self.window, self.hit_ratio = plan(
            int(array.nbytes), self.max_set_aside, self.max_window
        )

    def _attribute(self, attribute: int, device: int) -> int:
        out = ctypes.c_int(0)
        _check(self._cuda.cuDeviceGetAttribute(ctypes.byref(out), attribute, device),
               "cuDeviceGetAttribute")
        return int(out.value)

    def _set_window(self, ptr: int, num_bytes: int, ratio: float) -> None:
        value = window_value(ptr, num_bytes, ratio)
        _check(
            self._cuda.cuStreamSetAttribute(
                ctypes.c_void_p(self._stream.ptr), CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                ctypes.byref(value),
            ),
            "cuStreamSetAttribute",
        )

    def __enter__(self) -> PersistingWindow:
        _check(self._cuda.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE,
                                        ctypes.c_size_t(self.set_aside)), "cuCtxSetLimit")
        self._set_window(int(self._array.data.ptr), self.window, self.hit_ratio)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._set_window(0, 0, 0.0)
        _check(self._cuda.cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache")
        _check(self._cuda.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0)),
               "cuCtxSetLimit")
