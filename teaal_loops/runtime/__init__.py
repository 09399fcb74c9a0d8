"""Running generated kernels on the GPU through CuPy (imported lazily, only when a kernel runs).

:class:`Kernel` renders, compiles and launches one schedule's kernel; :mod:`teaal_loops.pipeline`
builds kernels from specs (``teaal_loops.compile``).
"""

from __future__ import annotations

from teaal_loops.runtime.backend import cupy_module, device_info, gpu_available
from teaal_loops.runtime.kernel import Kernel, PreparedMatrix

__all__ = [
    "Kernel",
    "PreparedMatrix",
    "cupy_module",
    "device_info",
    "gpu_available",
]
