"""Kernel launches with every argument packed once: a launch is one slice store and one
``cuLaunchKernel`` on the current CuPy stream (CuPy's binding, or libcuda's through ctypes).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from typing import Any, NoReturn

from teaal_loops.errors import DeviceError
from teaal_loops.runtime import backend


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
            launch_failed(status)

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
            launch_failed(status)


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
    cupy = backend.cupy_module()  # by attribute: tests stand a fake CuPy in
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


def launch_failed(status: int) -> NoReturn:
    """Raise the error of a launch the driver refused with ``status`` (every launcher's,
    the native one-step call's included)."""
    raise DeviceError(f"cuLaunchKernel failed with CUDA driver error {status}")


@functools.lru_cache(maxsize=1)
def launch_kernel_address() -> int:
    """The address of libcuda's ``cuLaunchKernel`` (0 where libcuda cannot be loaded)."""
    fn = ctypes_launch_kernel()
    return 0 if fn is None else int(ctypes.cast(fn, ctypes.c_void_p).value or 0)
