"""Per-stream scratch of a prepared matrix: zeroed device bytes a kernel keeps state in
between its blocks (merge-path SpMV's carries of rows split across blocks).

The kernel leaves its scratch zero when it ends, so launches that run one after another can
share one buffer; launches on two streams may overlap, so every stream gets a buffer of its
own, made (zeroed, on that stream) the first time a launch on it asks. A CUDA graph holds the
buffer of the stream it was captured on: ``ready_on`` makes it before the capture begins, so
nothing is allocated inside one. Replaying that graph while the same prepared matrix is
launched directly on the capture stream is the one overlap this cannot see.

A scratch of 0 bytes stands for a kernel that takes the parameter but does not use it for
this matrix (merge-path then adds split rows atomically): it passes a null pointer.
"""

from __future__ import annotations

from typing import Any


class StreamScratch:
    """``pointer(stream_pointer)``: this matrix's scratch for launches on that stream."""

    __slots__ = ("nbytes", "_cupy", "_buffers")

    def __init__(self, cupy: Any, nbytes: int) -> None:
        self.nbytes = int(nbytes)
        self._cupy = cupy
        self._buffers: dict[int, Any] = {}

    def array(self, stream_pointer: int) -> Any:
        """The buffer of the stream whose raw pointer is ``stream_pointer``, which must be the
        current CuPy stream (a new buffer is zeroed on it); None for a scratch of 0 bytes."""
        if not self.nbytes:
            return None
        buffer = self._buffers.get(stream_pointer)
        if buffer is None:
            buffer = self._cupy.zeros(self.nbytes, dtype=self._cupy.uint8)
            self._buffers[stream_pointer] = buffer
        return buffer

    def pointer(self, stream_pointer: int) -> int:
        """The buffer's device address (0 for a scratch of 0 bytes)."""
        buffer = self.array(stream_pointer)
        return 0 if buffer is None else int(buffer.data.ptr)

    def current_pointer(self) -> int:
        """:meth:`pointer` for CuPy's current stream."""
        return self.pointer(int(self._cupy.cuda.get_current_stream().ptr))

    def argument(self) -> Any:
        """The kernel argument for CuPy's generic launch on the current stream."""
        import numpy as np

        buffer = self.array(int(self._cupy.cuda.get_current_stream().ptr))
        return np.uintp(0) if buffer is None else buffer

    def ready_on(self, stream: Any) -> None:
        """Make ``stream``'s buffer now (before a graph capture on it, or a warm-up)."""
        with stream:
            self.array(int(stream.ptr))

    @property
    def streams(self) -> int:
        """How many streams have a buffer."""
        return len(self._buffers)
