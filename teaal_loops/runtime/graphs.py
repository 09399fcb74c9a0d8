"""CUDA graphs of a prepared SpMV: capture once, replay with one driver call.

``kernel.capture(A, x, y)`` records ``kernel.launch_into(A, x, y)`` (the cudaMemsetAsync that
zeroes an accumulating schedule's ``y``, then the kernel) in a CuPy stream capture::

    import cupy
    x = cupy.zeros(A.shape[1], dtype=cupy.float32)
    y = cupy.empty(A.shape[0], dtype=cupy.float32)
    graph = kernel.capture(A, x, y)      # a CapturedLaunch
    for step in range(100):
        x[...] = next_input()            # in place: the graph holds x's address
        graph.launch()                   # y = A @ x on the current stream
    cupy.cuda.get_current_stream().synchronize()

The graph holds raw device addresses: the matrix's arrays, ``x`` and ``y``. The returned
:class:`CapturedLaunch` keeps all three alive for as long as it lives; replacing ``x`` or ``y``
by new arrays means capturing again. Nothing in the captured path allocates, synchronises or
reads back: the matrix is prepared, its module loaded and its launcher built before the capture
begins (``Kernel.warm_up``; the capture stream's scratch too, for kernels that keep one,
``runtime.scratch``), and every operation inside goes to the capturing stream (the current
stream inside ``with stream:``).
"""

from __future__ import annotations

import contextlib
from typing import Any

from teaal_loops.errors import DeviceError
from teaal_loops.runtime import backend
from teaal_loops.runtime.device_matrix import check_device_vector


class CapturedLaunch:
    """A CUDA graph of one ``launch_into(prepared, x, y)``; keeps what it reads and writes
    alive. ``launch(stream=None)`` replays it on ``stream`` (default: the current stream)."""

    def __init__(self, graph: Any, prepared: Any, x: Any, y: Any) -> None:
        self.graph = graph  # the cupy.cuda.Graph
        self.prepared = prepared
        self.x = x
        self.y = y

    def launch(self, stream: Any = None) -> None:
        self.graph.launch(stream)

    def upload(self, stream: Any = None) -> None:
        """Upload the graph to the device ahead of its first launch (optional)."""
        self.graph.upload(stream)


def capture_launch(kernel: Any, prepared: Any, x: Any, y: Any, *, stream: Any = None) -> Any:
    """Capture ``kernel.launch_into(prepared, x, y)`` on ``stream`` (a new non-blocking stream
    by default; the legacy default stream cannot capture) and return a :class:`CapturedLaunch`.
    ``prepared`` must be warmed up (module loaded, launcher built) by the caller."""
    cupy = backend.cupy_module()
    # checked before capturing, so that a refusal leaves no stream in capture mode
    check_device_vector(cupy, x, kernel.dtype, prepared.shape.cols, "x")
    check_device_vector(cupy, y, kernel.dtype, prepared.shape.rows, "y")
    if stream is None:
        stream = cupy.cuda.Stream(non_blocking=True)
    elif int(stream.ptr) == 0:
        raise DeviceError(
            "a CUDA graph cannot be captured on the legacy default stream: pass "
            "cupy.cuda.Stream(non_blocking=True) or leave stream= out"
        )
    if prepared.scratch is not None:  # made now: nothing may allocate inside the capture
        prepared.scratch.ready_on(stream)
    with stream:
        stream.begin_capture()
        try:
            kernel.launch_into(prepared, x, y)
        except BaseException:
            with contextlib.suppress(Exception):  # end the capture; the first error matters
                stream.end_capture()
            raise
        graph = stream.end_capture()
    return CapturedLaunch(graph, prepared, x, y)
