"""The lean launch path without a GPU: one raw launch on the current stream, zeroing with
cudaMemsetAsync on that stream, nothing else on a cache hit, and no Jinja on a second prepare."""

from __future__ import annotations

import ctypes
import types
from typing import Any

import jinja2
import numpy as np
import pytest
import scipy.sparse as sp

import teaal_loops.pipeline as pipeline
import teaal_loops.runtime.kernel as kernel_module
from teaal_loops.codegen.render import clear_caches
from teaal_loops.runtime import Kernel, backend, launcher
from teaal_loops.runtime.dense_launch import DenseLaunch

from .conftest import SPECS, FakeGpu

REAL_LAUNCH = Kernel.launch  # before the fake_gpu fixture replaces it


class DeviceVector:
    """A stand-in for a CuPy vector: an address, a dtype, a shape, contiguous."""

    _next = [0x1000]

    def __init__(self, n: int, dtype: Any) -> None:
        DeviceVector._next[0] += 0x1000
        self.data = types.SimpleNamespace(ptr=DeviceVector._next[0])
        self.shape = (n,)
        self.dtype = np.dtype(dtype)
        self.nbytes = n * self.dtype.itemsize
        self.flags = types.SimpleNamespace(c_contiguous=True)
        self.filled: list[float] = []

    def fill(self, value: float) -> None:
        self.filled.append(value)


def _pointer_cupy(gpu: FakeGpu) -> Any:
    """cupy as far as the hot path uses it, allocating DeviceVectors (and logging it)."""

    def alloc(name: str) -> Any:
        def make(n: int, dtype: Any = np.float64) -> DeviceVector:
            gpu.record(f"alloc:{name}")
            return DeviceVector(n, dtype)

        return make

    return types.SimpleNamespace(ndarray=DeviceVector, empty=alloc("empty"), zeros=alloc("zeros"))


@pytest.mark.parametrize("name", ["thread_mapped", "work_oriented"])
def test_a_call_on_a_remembered_matrix_is_one_raw_launch(
    fake_gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    kernel = pipeline.compile(SPECS / f"{name}.yaml", dtype="float32")
    assert isinstance(kernel, Kernel)
    A = sp.random(40, 30, density=0.2, format="csr", random_state=1)
    prepared = kernel.prepare(A)
    monkeypatch.setattr(Kernel, "launch", REAL_LAUNCH)
    monkeypatch.setattr(kernel_module, "converter", lambda layout: pytest.fail("converted"))
    monkeypatch.setattr(backend, "get_function", lambda *a, **k: pytest.fail("compiled"))
    launches: list[tuple[int, ...]] = []
    prepared._raw[False] = lambda *pointers: launches.append(pointers)
    prepared.no_owner = DeviceVector(1, np.int32)
    kernel._cupy = _pointer_cupy(fake_gpu)
    x = DeviceVector(30, np.float32)
    fake_gpu.log.clear()

    y1 = kernel(prepared, x)
    y2 = kernel(A, x)  # remembered: no conversion, no compilation
    y3 = DeviceVector(40, np.float32)
    kernel.launch_into(A, x, y3)
    assert launches == [
        (x.data.ptr, y.data.ptr, prepared.no_owner.data.ptr) for y in (y1, y2, y3)
    ]
    accumulating = name == "work_oriented"
    allocation = "alloc:zeros" if accumulating else "alloc:empty"
    expected = [allocation, allocation] + (["zero"] if accumulating else [])
    assert [what for what, _, _ in fake_gpu.log] == expected


def test_the_raw_launcher_reads_the_current_stream_at_every_launch() -> None:
    streams = [types.SimpleNamespace(ptr=0)]
    calls: list[tuple[Any, ...]] = []
    function = types.SimpleNamespace(ptr=0xF00)
    matrix_array = types.SimpleNamespace(data=types.SimpleNamespace(ptr=0xA000))
    raw = launcher.RawLaunch(
        function, 7, 128, [matrix_array, np.int32(5)], 3,
        lambda *args: calls.append(args), lambda: streams[-1],
    )
    raw(0x1, 0x2, 0x3)
    streams.append(types.SimpleNamespace(ptr=0x55))  # as inside `with stream:`
    raw(0x4, 0x5, 0x6)
    assert [c[8] for c in calls] == [0, 0x55]
    assert [c[:7] for c in calls] == [(0xF00, 7, 1, 1, 128, 1, 1)] * 2
    # the argument array holds the packed matrix arguments and the last pointers written
    params = ctypes.cast(calls[-1][9], ctypes.POINTER(ctypes.c_void_p))
    cells = [params[i] for i in range(5)]
    assert ctypes.c_void_p.from_address(cells[0]).value == 0xA000
    assert ctypes.c_int32.from_address(cells[1]).value == 5
    assert [ctypes.c_void_p.from_address(c).value for c in cells[2:]] == [0x4, 0x5, 0x6]


def test_zeroing_is_one_memset_on_the_current_stream() -> None:
    memsets: list[tuple[int, ...]] = []
    current = types.SimpleNamespace(ptr=0x77)
    cupy = types.SimpleNamespace(
        ndarray=DeviceVector,
        cuda=types.SimpleNamespace(
            runtime=types.SimpleNamespace(memsetAsync=lambda *a: memsets.append(a)),
            get_current_stream=lambda: current,
        ),
    )
    y = DeviceVector(10, np.float64)
    backend.zero_async(cupy, y)
    assert memsets == [(y.data.ptr, 0, 80, 0x77)]
    y.flags.c_contiguous = False
    backend.zero_async(cupy, y)  # a strided view: CuPy's fill (a kernel on the same stream)
    assert y.filled == [0] and len(memsets) == 1


def test_a_second_prepare_calls_no_jinja(fake_gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    clear_caches()  # earlier tests may have rendered these configurations already
    kernel = pipeline.compile(SPECS / "merge_path.yaml", dtype="float64")
    assert isinstance(kernel, Kernel)
    first = kernel.prepare(sp.random(50, 50, density=0.1, format="csr", random_state=1))
    rendered: list[Any] = []
    real = jinja2.Template.render
    monkeypatch.setattr(jinja2.Template, "render", lambda *a, **k: rendered.append(a) or real(*a, **k))
    second = kernel.prepare(sp.random(80, 70, density=0.05, format="csr", random_state=2))
    assert rendered == [] and second.source is first.source
    other = pipeline.compile(SPECS / "merge_path.yaml", dtype="float32")
    other.prepare(sp.random(50, 50, density=0.1, format="csr", random_state=1))
    assert len(rendered) == 1, "the counter missed a render: the test proves nothing"


def _launcher(launch_kernel: Any, streams: list[Any]) -> launcher.RawLaunch:
    function = types.SimpleNamespace(ptr=0xF00)
    return launcher.RawLaunch(function, 7, 128, [np.int32(5)], 3, launch_kernel,
                             lambda: streams[-1])


def _slots(params_address: int, first: int, count: int) -> list[int | None]:
    params = ctypes.cast(params_address, ctypes.POINTER(ctypes.c_void_p))
    return [ctypes.c_void_p.from_address(params[i]).value for i in range(first, first + count)]


def test_a_launch_running_beside_another_fills_its_own_argument_array() -> None:
    """The driver reads the argument array while it holds no GIL: a second thread launching
    meanwhile must not rewrite the first launch's pointers (simulated by launching from
    inside the first launch's driver call)."""
    streams = [types.SimpleNamespace(ptr=0)]
    seen: list[list[int | None]] = []
    raw: launcher.RawLaunch

    def launch_kernel(*args: Any) -> None:
        if len(seen) == 0:
            seen.append([])  # reentered once: the "other thread"
            raw(0x7, 0x8, 0x9)
            seen.append(_slots(args[9], 1, 3))  # the outer launch's array, after the inner
        else:
            seen.append(_slots(args[9], 1, 3))

    raw = _launcher(launch_kernel, streams)
    raw(0x1, 0x2, 0x3)
    assert seen[1:] == [[0x7, 0x8, 0x9], [0x1, 0x2, 0x3]]
    assert len(raw._free) == 2  # both arrays are back for the next launches


def test_launch_on_takes_the_callers_stream_and_refuses_a_wrong_pointer_count() -> None:
    calls: list[tuple[Any, ...]] = []
    raw = _launcher(lambda *args: calls.append(args), [types.SimpleNamespace(ptr=0)])
    raw.launch_on(0x99, (0x1, 0x2, 0x3))
    assert calls[0][8] == 0x99 and _slots(calls[0][9], 1, 3) == [0x1, 0x2, 0x3]
    with pytest.raises(ValueError):
        raw.launch_on(0x99, (0x1, 0x2))
    assert len(calls) == 1 and len(raw._free) == 1


def test_a_failing_driver_status_is_a_device_error() -> None:
    raw = _launcher(lambda *args: 1, [types.SimpleNamespace(ptr=0)])  # CUDA_ERROR_INVALID_VALUE
    with pytest.raises(backend.DeviceError, match="CUDA driver error 1"):
        raw(0x1, 0x2, 0x3)
    assert len(raw._free) == 1


def test_the_launch_entry_point_named_first_and_the_other_as_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    binding = object()
    through_ctypes = object()
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(
        driver=types.SimpleNamespace(launchKernel=binding)))
    monkeypatch.setattr(launcher, "ctypes_launch_kernel", lambda: through_ctypes)
    assert launcher.launch_entry(cupy) is binding
    monkeypatch.setattr(launcher, "LAUNCH_ENTRY", "ctypes")
    assert launcher.launch_entry(cupy) is through_ctypes
    monkeypatch.setattr(launcher, "ctypes_launch_kernel", lambda: None)
    assert launcher.launch_entry(cupy) is binding
    no_binding = types.SimpleNamespace(cuda=types.SimpleNamespace())
    assert launcher.launch_entry(no_binding) is None


def test_contiguity_is_read_from_cupys_bit_where_there_is_one() -> None:
    class WithBit:
        _c_contiguous = False

        @property
        def flags(self) -> Any:
            raise AssertionError("the flags object must not be built")

    assert not backend.is_contiguous(WithBit())
    assert backend.is_contiguous(np.zeros(3))
    assert not backend.is_contiguous(np.zeros(6)[::2])


def test_a_bound_dense_launch_packs_every_argument_once() -> None:
    """DenseLaunch: all arguments (arrays by address, int32/int64 scalars) in the packed
    array, the output zeroed before each launch where the schedule accumulates, and a launch
    is one driver call with no pointers to write."""
    streams = [types.SimpleNamespace(ptr=0x33)]
    calls: list[tuple[Any, ...]] = []
    args = (types.SimpleNamespace(data=types.SimpleNamespace(ptr=0xB000)), np.int32(9),
            np.int64(-3), types.SimpleNamespace(data=types.SimpleNamespace(ptr=0xC000)))
    raw = launcher.RawLaunch(types.SimpleNamespace(ptr=0xF00), 11, 256, args, 0,
                            lambda *a: calls.append(a), lambda: streams[-1])
    memsets: list[tuple[int, ...]] = []
    cupy = types.SimpleNamespace(
        ndarray=DeviceVector,
        cuda=types.SimpleNamespace(
            runtime=types.SimpleNamespace(memsetAsync=lambda *a: memsets.append(a)),
            get_current_stream=lambda: streams[-1],
        ),
    )
    out = DeviceVector(6, np.float32)
    generic: list[Any] = []
    bound = DenseLaunch(cupy, lambda *a: generic.append(a), (11, 1, 1), (256, 1, 1), args,
                        out, True, keep=None, raw=raw)
    bound.launch()
    bound.launch()
    assert generic == [] and len(calls) == 2 and memsets == [(out.data.ptr, 0, 24, 0x33)] * 2
    assert calls[0][:9] == (0xF00, 11, 1, 1, 256, 1, 1, 0, 0x33)
    params = ctypes.cast(calls[-1][9], ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.c_void_p.from_address(params[0]).value == 0xB000
    assert ctypes.c_int32.from_address(params[1]).value == 9
    assert ctypes.c_int64.from_address(params[2]).value == -3
    assert ctypes.c_void_p.from_address(params[3]).value == 0xC000
