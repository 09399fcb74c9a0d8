"""SDDMM through ``torch.sparse.sampled_addmm`` (cuSPARSE SDDMM inside PyTorch), the fallback
where nvmath-python is not installed, and a second column beside it where it is.

PyTorch works on the very same device memory: C's index arrays, A, B and the output Z are
shared with CuPy through DLPack, and Z is both the pattern operand and the ``out=`` of
``sampled_addmm`` (with ``beta=0`` its old values do not matter), so PyTorch copies nothing.
Each launch runs on CuPy's current stream (a ``torch.cuda.ExternalStream`` of it).
"""

from __future__ import annotations

import warnings
from typing import Any

from teaal_loops.bench.cusparse import choice as choosing
from teaal_loops.bench.cusparse.descriptors import (
    Algorithm,
    Availability,
    CusparseBaselineError,
    first_line,
    value_type,
)
from teaal_loops.runtime import backend

LABEL = "torch.sparse.sampled_addmm"


def torch_available() -> Availability:
    try:
        import torch
    except Exception as exc:
        return Availability(False, f"PyTorch is not importable ({first_line(exc)})")
    if not torch.cuda.is_available():
        return Availability(False, "PyTorch sees no CUDA device")
    if not hasattr(torch.sparse, "sampled_addmm"):
        return Availability(False, f"PyTorch {torch.__version__} has no sparse.sampled_addmm")
    return Availability(True)


class TorchSDDMM:
    """``launch(A, B, Z)`` as :class:`~teaal_loops.bench.cusparse.sddmm.SDDMM`, one
    algorithm (PyTorch chooses inside)."""

    family = "SDDMM"

    def __init__(
        self, C: Any, k: int, *, A: Any = None, B: Any = None, out: Any = None,
        scale: bool = True,
    ) -> None:
        check = torch_available()
        if not check:
            raise CusparseBaselineError(check.reason)
        import torch

        self.torch = torch
        self.cp = cp = backend.cupy_module()
        value_type(C.dtype)  # float32 / float64 or one line
        rows, cols = C.shape
        self.C, self.k, self.scale = C, k, scale
        self.shapes = ((rows, k), (k, cols), (int(C.nnz),))
        A = cp.zeros(self.shapes[0], dtype=C.dtype) if A is None else A
        B = cp.zeros(self.shapes[1], dtype=C.dtype) if B is None else B
        out = cp.zeros(self.shapes[2], dtype=C.dtype) if out is None else out
        self.operands = (A, B, out)
        self.algorithms = [Algorithm(LABEL, "torch", 0)]
        self.algorithm = self.algorithms[0]
        self.skipped: dict[str, str] = {}
        self.choice: choosing.Choice | None = None
        self.captured: Algorithm | None = None
        self._crow = torch.from_dlpack(C.indptr)
        self._col = torch.from_dlpack(C.indices)
        self._c_values = torch.from_dlpack(C.data)
        self._views: dict[tuple[int, int, int], tuple[Any, Any, Any]] = {}
        self._streams: dict[int, Any] = {}
        self._tensors(A, B, out)

    def _tensors(self, A: Any, B: Any, out: Any) -> tuple[Any, Any, Any]:
        key = (A.data.ptr, B.data.ptr, out.data.ptr)
        if key not in self._views:
            for array, shape, name in zip((A, B, out), self.shapes, ("A", "B", "Z"),
                                          strict=True):
                if (array.dtype != self.C.dtype or tuple(array.shape) != shape
                        or not array.flags.c_contiguous):
                    raise CusparseBaselineError(
                        f"torch SDDMM: {name} must be a C-ordered {self.C.dtype} CuPy array "
                        f"of shape {shape}"
                    )
            torch = self.torch
            z = torch.from_dlpack(out)
            with warnings.catch_warnings():  # "beta state" and "checks disabled" notices
                warnings.simplefilter("ignore", UserWarning)
                zt = torch.sparse_csr_tensor(self._crow, self._col, z, size=self.C.shape,
                                             check_invariants=False)
            if zt.values().data_ptr() != out.data.ptr:
                raise CusparseBaselineError("torch SDDMM: PyTorch copied the output values")
            self._views[key] = (torch.from_dlpack(A), torch.from_dlpack(B), zt)
        return self._views[key]

    def _stream(self) -> Any:
        """PyTorch's handle on CuPy's current stream. ``ExternalStream(0)`` would be a new
        stream from PyTorch's pool, not the legacy default stream that CuPy's null stream
        is (pointer 0): PyTorch's default stream is that one."""
        ptr = int(self.cp.cuda.get_current_stream().ptr)
        if ptr not in self._streams:
            torch = self.torch
            self._streams[ptr] = (torch.cuda.default_stream() if ptr == 0
                                  else torch.cuda.ExternalStream(ptr))
        return self._streams[ptr]

    def launch(self, A: Any, B: Any, Z: Any, algorithm: Algorithm | None = None) -> None:
        a, b, zt = self._tensors(A, B, Z)
        torch = self.torch
        with torch.cuda.stream(self._stream()):
            torch.sparse.sampled_addmm(zt, a, b, beta=0.0, alpha=1.0, out=zt)
            if self.scale:
                zt.values().mul_(self._c_values)

    def choose(self, timer: Any, *operands: Any, reps: int = 25,
               warmup: int = 3) -> choosing.Choice:
        operands = operands or self.operands
        self.choice = choosing.time_algorithms(
            timer, self.algorithms, lambda a: (lambda i: self.launch(*operands)),
            reps=reps, warmup=warmup)
        return self.choice

    def select(self, label: str) -> None:
        if label != LABEL:
            raise CusparseBaselineError(f"torch SDDMM: no algorithm {label!r} (only {LABEL})")

    def capture(self, *operands: Any) -> Any:
        """A graph of the launch captured with ``torch.cuda.graph``, which keeps PyTorch's
        workspace allocations in the graph's own pool (a CuPy stream capture would record
        buffers PyTorch frees and reuses right after); replayed on CuPy's current stream."""
        operands = operands or self.operands
        a, b, zt = self._tensors(*operands)
        torch = self.torch
        self.launch(*operands)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                torch.sparse.sampled_addmm(zt, a, b, beta=0.0, alpha=1.0, out=zt)
                if self.scale:
                    zt.values().mul_(self._c_values)
        except Exception as exc:
            raise choosing.GraphError(f"not capturable: {first_line(exc)}") from None
        self.captured = self.algorithm
        return _TorchGraph(graph, self)

    def describe(self, algorithm: Algorithm | None = None) -> str:
        then = ", then Z *= C's values" if self.scale else ""
        return f"cuSPARSE SDDMM via {LABEL} (PyTorch {self.torch.__version__}), K={self.k}{then}"

    @property
    def name(self) -> str:
        return self.describe()

    def close(self) -> None:
        self._views.clear()


class _TorchGraph:
    """``launch()`` replays a ``torch.cuda.CUDAGraph`` on CuPy's current stream."""

    def __init__(self, graph: Any, owner: TorchSDDMM) -> None:
        self.graph = graph
        self.owner = owner

    def launch(self, stream: Any = None) -> None:
        with self.owner.torch.cuda.stream(self.owner._stream()):
            self.graph.replay()
