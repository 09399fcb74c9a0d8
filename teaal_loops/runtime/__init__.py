"""Running generated kernels on the GPU through CuPy (imported lazily, only when a kernel runs).

:class:`Kernel` renders, compiles and launches one schedule's kernel, remembers the matrices it
has prepared (:mod:`~teaal_loops.runtime.matrix_cache`), captures CUDA graphs
(:mod:`~teaal_loops.runtime.graphs`) and serves cupyx's solvers as a linear operator
(:mod:`~teaal_loops.runtime.operator`); :mod:`teaal_loops.pipeline` builds kernels from specs
(``teaal_loops.compile``). docs/api.md describes the API and what each call costs.
"""

from __future__ import annotations

from teaal_loops.runtime.backend import cupy_module, device_info, gpu_available
from teaal_loops.runtime.graphs import CapturedLaunch
from teaal_loops.runtime.kernel import Kernel, PreparedMatrix

__all__ = [
    "CapturedLaunch",
    "Kernel",
    "PreparedMatrix",
    "cupy_module",
    "device_info",
    "gpu_available",
]
