"""A CPU stand-in for CuPy and a cuSPARSE binding, enough to drive the baselines' machinery
(set-up, re-pointing descriptors, choosing, capturing) without a GPU.

The fake binding records every call; its compute calls do no arithmetic (the GPU tests check
values), and ``spmv_buffer_size`` / ``spmm_buffer_size`` raise for algorithm codes listed in
``refuse`` as cuSPARSE does for an algorithm it does not support."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from teaal_loops.bench.timing import Samples


class FakeArray:
    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        self.shape = a.shape
        self.dtype = a.dtype
        self.size = a.size
        self.flags = SimpleNamespace(c_contiguous=a.flags.c_contiguous)
        self.data = SimpleNamespace(ptr=int(a.ctypes.data))

    @property
    def T(self) -> FakeArray:
        return FakeArray(self.a.T)


class FakeStream:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr
        self.captures = 0


class _CaptureStream:
    """``cupy.cuda.Stream(non_blocking=True)``: current inside ``with``, capture counted."""

    def __init__(self, owner: FakeCupy) -> None:
        self.owner = owner
        self.ptr = 99

    def __enter__(self) -> _CaptureStream:
        self.saved = self.owner.stream
        self.owner.stream = self  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: Any) -> None:
        self.owner.stream = self.saved

    def begin_capture(self) -> None:
        self.saved.captures += 1

    def end_capture(self) -> str:
        return "graph"


class FakeCupy:
    """``ndarray``, ``zeros``, ``empty``, ``int8`` and a current stream."""

    ndarray = FakeArray
    int8 = np.int8

    def __init__(self) -> None:
        self.stream = FakeStream(0)
        self.cuda = SimpleNamespace(get_current_stream=lambda: self.stream,
                                    Stream=lambda non_blocking=False: _CaptureStream(self))

    def zeros(self, shape: Any, dtype: Any = np.float64) -> FakeArray:
        return FakeArray(np.zeros(shape, dtype=dtype))

    def empty(self, shape: Any, dtype: Any = np.float64) -> FakeArray:
        return FakeArray(np.empty(shape, dtype=dtype))


class FakeCSR:
    format = "csr"

    def __init__(self, rows: int, cols: int, nnz: int, dtype: Any = np.float32) -> None:
        self.shape = (rows, cols)
        self.nnz = nnz
        self.dtype = np.dtype(dtype)
        self.indptr = FakeArray(np.zeros(rows + 1, dtype=np.int32))
        self.indices = FakeArray(np.zeros(nnz, dtype=np.int32))
        self.data = FakeArray(np.zeros(nnz, dtype=dtype))


class FakeBinding:
    name = "cupy"
    preprocess = False
    tracks_stream = False

    def __init__(self, refuse: tuple[int, ...] = (), name: str = "cupy") -> None:
        self.name = name
        self.tracks_stream = name == "nvmath"
        self.refuse = refuse
        self.calls: list[tuple[Any, ...]] = []
        self.destroyed: list[tuple[str, int]] = []
        self._next = 100

    def _new(self, kind: str) -> int:
        self._next += 1
        self.calls.append(("create", kind, self._next))
        return self._next

    def csr(self, *args: Any) -> int:
        return self._new("csr")

    def dn_vec(self, *args: Any) -> int:
        return self._new("vec")

    def dn_mat(self, *args: Any) -> int:
        return self._new("mat")

    def set_vec(self, desc: int, ptr: int) -> None:
        self.calls.append(("set_vec", desc, ptr))

    def set_mat(self, desc: int, ptr: int) -> None:
        self.calls.append(("set_mat", desc, ptr))

    def set_sp_values(self, desc: int, ptr: int) -> None:
        self.calls.append(("set_sp_values", desc, ptr))

    def set_stream(self, ptr: int) -> None:
        self.calls.append(("set_stream", ptr))

    def destroyer(self, kind: str) -> Any:
        return lambda desc: self.destroyed.append((kind, desc))

    def _size(self, alg: int) -> int:
        if alg in self.refuse:
            raise RuntimeError(f"CUSPARSE_STATUS_NOT_SUPPORTED for algorithm {alg}\nmore")
        return 64 * (alg + 1)

    def spmv_buffer_size(self, *args: Any) -> int:
        return self._size(args[-1])

    def spmm_buffer_size(self, *args: Any) -> int:
        return self._size(args[-1])

    def spmv(self, *args: Any) -> None:
        self.calls.append(("spmv", args[2], args[3], args[5], args[7], args[8]))

    def spmm(self, *args: Any) -> None:
        self.calls.append(("spmm", args[3], args[4], args[6], args[8], args[9]))

    def spmv_preprocess(self, *args: Any) -> None:
        self.calls.append(("spmv_preprocess", args[7], args[8]))

    def spmm_preprocess(self, *args: Any) -> None:
        self.calls.append(("spmm_preprocess", args[8], args[9]))


class FakeTimer:
    """Times each algorithm by ``cost[label]`` (ms), read from ``state['label']`` that the
    timed op sets; ``queued_ok`` false makes every queued run untrusted."""

    def __init__(self, cost: dict[str, float], state: dict[str, str], *,
                 queued_ok: bool = True, per_call_cost: dict[str, float] | None = None) -> None:
        self.cost = cost
        self.per_call_cost = per_call_cost or cost
        self.state = state
        self.queued_ok = queued_ok
        self.log: list[tuple[str, str, int]] = []

    def _run(self, op: Any, reps: int) -> str:
        for i in range(reps):
            op(i)
        return self.state["label"]

    def per_call(self, op: Any, reps: int, *, before: Any = None) -> Samples:
        label = self._run(op, reps)
        self.log.append(("per_call", label, reps))
        return Samples((self.per_call_cost[label],) * reps, host_ms=0.01 * reps)

    def queued(self, op: Any, reps: int, *, before: Any = None,
               host_ms_per_rep: float = 0.1) -> Samples:
        label = self._run(op, reps)
        self.log.append(("queued", label, reps))
        return Samples((self.cost[label],) * reps, queued=self.queued_ok, host_ms=0.01 * reps)
