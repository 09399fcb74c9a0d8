"""A CPU stand-in for the GPU, for the runtime's own logic (cache, dispatch, streams, capture,
linear operators), not for the kernels.

``fake_gpu`` replaces CuPy by NumPy (uploads copy, as real uploads do; ``empty`` is poisoned
with NaN so that a missing zeroing shows; CUDA events tick 1 ms a record), cupyx's sparse
matrices, ``LinearOperator`` and ``cg`` by SciPy's (same constructors and calls), and a kernel launch by a SciPy product that adds into ``y`` where the schedule
accumulates and stores otherwise. Every allocation, zeroing and launch is logged with the
stream current at the time and whether that stream was capturing.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from teaal_loops.types import DeviceInfo

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "specs"


class FakeStream:
    def __init__(self, gpu: FakeGpu, ptr: int, non_blocking: bool = False) -> None:
        self.gpu = gpu
        self.ptr = ptr
        self.non_blocking = non_blocking
        self.capturing = False
        self.captured: list[tuple[str, Any]] = []

    def __enter__(self) -> FakeStream:
        self.gpu.streams.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.gpu.streams.pop()

    def begin_capture(self) -> None:
        assert not self.capturing
        self.capturing = True
        self.captured = []

    def end_capture(self) -> FakeGraph:
        assert self.capturing
        self.capturing = False
        return FakeGraph(self.gpu, list(self.captured))

    def synchronize(self) -> None:
        pass


@dataclass
class FakeGraph:
    gpu: FakeGpu
    ops: list[tuple[str, Any]]
    launches: int = 0

    def launch(self, stream: Any = None) -> None:
        self.launches += 1
        for _kind, replay in self.ops:
            replay()

    def upload(self, stream: Any = None) -> None:
        pass


@dataclass
class FakeGpu:
    """The log and the stream stack of the fake device."""

    streams: list[FakeStream] = field(default_factory=list)
    log: list[tuple[str, int, bool]] = field(default_factory=list)  # (what, stream, capturing)
    null: FakeStream | None = None

    def current(self) -> FakeStream:
        assert self.null is not None
        return self.streams[-1] if self.streams else self.null

    def record(self, what: str, replay: Any = None) -> None:
        stream = self.current()
        self.log.append((what, stream.ptr, stream.capturing))
        if stream.capturing and replay is not None:
            stream.captured.append((what, replay))

    def kinds(self, what: str) -> list[tuple[str, int, bool]]:
        return [entry for entry in self.log if entry[0] == what]


def make_fake_cupy(gpu: FakeGpu) -> types.ModuleType:
    cp = types.ModuleType("cupy")
    gpu.null = FakeStream(gpu, 0)
    next_ptr = [100]

    def new_stream(non_blocking: bool = False) -> FakeStream:
        next_ptr[0] += 1
        return FakeStream(gpu, next_ptr[0], non_blocking)

    def allocating(name: str, make: Any) -> Any:
        def create(*args: Any, **kwargs: Any) -> Any:
            gpu.record(f"alloc:{name}")
            return make(*args, **kwargs)

        return create

    def poisoned(shape: Any, dtype: Any = float, order: str = "C") -> Any:
        out = np.empty(shape, dtype=dtype, order=order)
        if out.dtype.kind == "f":
            out.fill(np.nan)
        return out

    cp.ndarray = np.ndarray  # type: ignore[attr-defined]
    cp.empty = allocating("empty", poisoned)  # type: ignore[attr-defined]
    cp.zeros = allocating("zeros", np.zeros)  # type: ignore[attr-defined]
    cp.full = allocating("full", np.full)  # type: ignore[attr-defined]
    cp.asarray = lambda a, dtype=None: np.array(a, dtype=dtype, copy=True)  # type: ignore[attr-defined]
    clock = [0.0]

    class Event:
        def record(self) -> None:
            clock[0] += 1.0  # 1 ms a step: deterministic, positive intervals
            self.t = clock[0]

        def synchronize(self) -> None:
            pass

    cp.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        Stream=new_stream,
        get_current_stream=gpu.current,
        Event=Event,
        get_elapsed_time=lambda start, end: end.t - start.t,
        runtime=types.SimpleNamespace(memGetInfo=lambda: (2**34, 2**35)),
    )
    cp.get_default_memory_pool = lambda: types.SimpleNamespace(  # type: ignore[attr-defined]
        free_bytes=lambda: 0
    )
    cp.__getattr__ = lambda name: getattr(np, name)  # type: ignore[attr-defined]
    return cp


def host_csr(prepared: Any) -> sp.csr_matrix:
    a = prepared.matrix.arrays
    shape = (prepared.shape.rows, prepared.shape.cols)
    return sp.csr_matrix((a["values"], a["indices"], a["indptr"]), shape=shape)


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGpu]:
    import teaal_loops.runtime.device_matrix as device_matrix
    from teaal_loops.runtime import backend, launcher
    from teaal_loops.runtime.kernel import Kernel

    gpu = FakeGpu()
    cp = make_fake_cupy(gpu)
    monkeypatch.setattr(backend, "cupy_module", lambda: cp)
    monkeypatch.setattr(device_matrix, "cupy_module", lambda: cp)
    monkeypatch.setattr(device_matrix, "free_device_bytes", lambda: 2**34)
    monkeypatch.setattr(backend, "device_info", lambda *a: DeviceInfo.h100())

    def zero_async(cupy: Any, y: Any) -> None:
        gpu.record("zero", lambda: y.fill(0))
        y.fill(0)

    def launch(self: Kernel, prepared: Any, x: Any, y: Any, owner: Any = None) -> None:
        assert x.dtype == self.dtype and y.dtype == self.dtype, "launched on mistyped vectors"
        assert x.shape == (prepared.shape.cols,) and y.shape == (prepared.shape.rows,)
        A = host_csr(prepared)

        def run() -> None:
            if prepared.accumulates:
                y[...] += A @ x
            else:
                y[...] = A @ x

        gpu.record("launch", run)
        run()

    monkeypatch.setattr(backend, "zero_async", zero_async)
    # compiling is logged (a capture must not compile); no raw launcher: launch is faked
    monkeypatch.setattr(
        backend, "get_function", lambda *a, **k: gpu.record("compile") or (lambda *args: None)
    )
    monkeypatch.setattr(launcher, "raw_launch", lambda *a, **k: None)
    monkeypatch.setattr(Kernel, "launch", launch)
    # the one-step call (vector_call.VectorCall, tested on its own) launches through the raw
    # launcher, which the fake replaces by Kernel.launch: calls take the general path here
    monkeypatch.setattr(Kernel, "_vector_call", lambda self, prepared: False, raising=False)
    linalg = types.ModuleType("cupyx.scipy.sparse.linalg")
    linalg.LinearOperator = spla.LinearOperator  # type: ignore[attr-defined]
    linalg.cg = spla.cg  # type: ignore[attr-defined]
    sparse = types.ModuleType("cupyx.scipy.sparse")
    sparse.csr_matrix = sp.csr_matrix  # type: ignore[attr-defined]
    for name, module in (
        ("cupyx", types.ModuleType("cupyx")),
        ("cupyx.scipy", types.ModuleType("cupyx.scipy")),
        ("cupyx.scipy.sparse", sparse),
        ("cupyx.scipy.sparse.linalg", linalg),
    ):
        monkeypatch.setitem(sys.modules, name, module)
    yield gpu


def poisson_2d(n: int) -> sp.csr_matrix:
    """The 5-point Laplacian on an n x n grid (SPD), CSR float64."""
    tri = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1])
    eye = sp.identity(n)
    return sp.csr_matrix(sp.kron(eye, tri) + sp.kron(tri, eye))


class RecordingCupy:
    """A stand-in CuPy that compiles nothing and records each module's build options (in
    ``compiled``), so that tests see which build each launch asks for."""

    def __init__(self) -> None:
        self.compiled: list[tuple[str, ...]] = []
        recorder = self

        class RawModule:
            def __init__(self, code: str, options: tuple[str, ...], backend: str) -> None:
                recorder.compiled.append(tuple(options))
                self.options = tuple(options)

            def get_function(self, name: str) -> Any:
                return types.SimpleNamespace(name=name, options=self.options)

        self.RawModule = RawModule
        device = types.SimpleNamespace(compute_capability="90")
        self.cuda = types.SimpleNamespace(Device=lambda: device)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> RecordingCupy:
    """:class:`RecordingCupy` in place of CuPy, with an empty module cache."""
    from teaal_loops.runtime import backend

    cupy = RecordingCupy()
    monkeypatch.setattr(backend, "cupy_module", lambda: cupy)
    monkeypatch.setattr(backend, "_modules", {})
    return cupy
