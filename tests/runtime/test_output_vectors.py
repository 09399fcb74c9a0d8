"""Output vectors zeroed in batches, and the one-step vector call, without a GPU: a fake CuPy
logs every allocation, memset and capture query with its stream, so the tests see exactly
which device work an output costs and that no output is ever handed out twice."""

from __future__ import annotations

import gc
import threading
import types
import weakref
from typing import Any

import numpy as np
import pytest

from teaal_loops.runtime import native, vector_call


class Memory:
    def __init__(self, ptr: int, size: int) -> None:
        self.ptr, self.size = ptr, size


class Pointer:
    def __init__(self, mem: Memory, offset: int) -> None:
        self.mem, self.ptr = mem, mem.ptr + offset


class Stream:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class FakeCupy:
    """The part of CuPy that OutputVectors and VectorCall use, logging device work."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.next_ptr = 1 << 20
        self.device = 0
        self.capturing: set[int] = set()
        self.stream = Stream(0)
        self.stream_reads = 0
        fake = self

        class Array:
            def __init__(self, shape: tuple[int, ...], dtype: Any, memptr: Any = None) -> None:
                self.shape = tuple(shape)
                self.dtype = np.dtype(dtype)
                self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
                self.data = memptr if memptr is not None else fake.alloc(self.nbytes)
                self._c_contiguous = True

        def current() -> Stream:
            self.stream_reads += 1
            return self.stream

        def is_capturing(ptr: int) -> bool:
            self.log.append(("capturing?", ptr))
            if ptr == 666:
                raise RuntimeError("cudaErrorStreamCaptureImplicit")
            return ptr in self.capturing

        self.ndarray = Array
        self.cuda = types.SimpleNamespace(
            MemoryPointer=Pointer,
            alloc=self.alloc,
            get_current_stream=current,
            runtime=types.SimpleNamespace(
                memsetAsync=lambda ptr, value, size, stream: self.log.append(
                    ("memset", ptr, value, size, stream)),
                streamIsCapturing=is_capturing,
                getDevice=lambda: self.device,
            ),
        )

    def alloc(self, size: int) -> Pointer:
        self.log.append(("alloc", size))
        ptr = self.next_ptr
        self.next_ptr += -(-size // 512) * 512 + 512
        return Pointer(Memory(ptr, size), 0)

    def work(self) -> list[str]:
        return [entry[0] for entry in self.log if entry[0] != "capturing?"]


def native_module() -> Any:
    """The compiled native module (runtime/native/vector_call.c); the test is skipped where
    no compiler or headers exist, and fails where they exist but the build fails."""
    module = native.load()
    if module is None:
        reason = native.unavailable_reason() or ""
        # a compiler and headers that fail to build the file are a bug, not a missing tool
        if "failed" in reason or "cannot load" in reason:
            pytest.fail(f"the native call did not build: {reason}")
        pytest.skip(f"the native call cannot be built here: {reason}")
    return module


# Every rule of OutputVectors holds for its native twin too (runtime/native/vector_call.c).
FORMS = pytest.mark.parametrize("native", [False, True], ids=["python", "native"])


def _outputs(cp: FakeCupy, n: int = 2000, zeroed: bool = True, native: bool = False) -> Any:
    outputs = vector_call.OutputVectors(cp, n, np.float32, zeroed=zeroed)
    return native_module().OutputVectors(*outputs.native_parts()) if native else outputs


@FORMS
def test_zeroed_outputs_come_in_batches_of_one_alloc_and_one_memset(native: bool) -> None:
    cp = FakeCupy()
    out = _outputs(cp, native=native)
    slot = 8192  # 8,000 bytes rounded up to CuPy's 512-byte allocation unit
    count = min(vector_call.MAX_BATCH, vector_call.BATCH_BYTES // slot)
    ys = [out.new(cp.stream, 0) for _ in range(count)]
    assert cp.log == [("alloc", slot * count), ("memset", ys[0].data.ptr, 0, slot * count, 0)]
    pointers = [y.data.ptr for y in ys]
    assert pointers == [ys[0].data.ptr + i * slot for i in range(count)]
    assert all(p % 512 == 0 for p in pointers)
    assert all(y.shape == (2000,) and y.dtype == np.float32 for y in ys)
    assert all(y.data.mem is ys[0].data.mem for y in ys), "each output keeps its batch alive"
    nxt = out.new(cp.stream, 0)  # the batch is used up: a new one
    assert cp.work() == ["alloc", "memset", "alloc", "memset"]
    assert nxt.data.ptr not in pointers


@FORMS
def test_outputs_that_need_no_zeroing_come_in_batches_without_a_memset(native: bool) -> None:
    cp = FakeCupy()
    out = _outputs(cp, zeroed=False, native=native)
    ys = [out.new(cp.stream, 0) for _ in range(3)]
    assert cp.log == [("alloc", 8192 * 64)]
    assert [y.data.ptr - ys[0].data.ptr for y in ys] == [0, 8192, 16384]


@FORMS
def test_outputs_that_need_no_zeroing_keep_their_batch_inside_a_capture(native: bool) -> None:
    """Nothing of the batch is a stream operation then: the graph only writes the output."""
    cp = FakeCupy()
    out = _outputs(cp, zeroed=False, native=native)
    stream = Stream(0x30)
    first = out.new(stream, 0x30)
    cp.capturing.add(0x30)
    inside = out.new(stream, 0x30)
    assert cp.log == [("alloc", 8192 * 64)]  # no capture query, no allocation, no memset
    assert inside.data.ptr == first.data.ptr + 8192


@FORMS
def test_large_outputs_are_plain_allocations(native: bool) -> None:
    cp = FakeCupy()
    n = vector_call.BATCH_BYTES // 4 // (vector_call.MIN_BATCH - 1)  # fewer than MIN_BATCH a batch
    _outputs(cp, n, zeroed=False, native=native).new(cp.stream, 0)
    assert cp.log == [("alloc", 4 * n)]


@FORMS
def test_large_outputs_are_zeroed_one_by_one(native: bool) -> None:
    cp = FakeCupy()
    n = vector_call.BATCH_BYTES // 4 // (vector_call.MIN_BATCH - 1)  # fewer than MIN_BATCH a batch
    out = _outputs(cp, n, native=native)
    y = out.new(cp.stream, 0)
    assert cp.log == [("alloc", 4 * n), ("memset", y.data.ptr, 0, 4 * n, 0)]


@FORMS
def test_another_stream_object_gets_a_batch_of_its_own(native: bool) -> None:
    cp = FakeCupy()
    out = _outputs(cp, native=native)
    first = Stream(0x10)
    out.new(first, 0x10)
    out.new(first, 0x10)
    same_handle = Stream(0x10)  # e.g. a new stream that reuses a destroyed one's handle
    out.new(same_handle, 0x10)
    other = Stream(0x20)
    out.new(other, 0x20)
    memsets = [entry[4] for entry in cp.log if entry[0] == "memset"]
    assert memsets == [0x10, 0x10, 0x20]
    assert cp.work() == ["alloc", "memset"] * 3


@FORMS
def test_a_dead_stream_never_matches(native: bool) -> None:
    cp = FakeCupy()
    out = _outputs(cp, native=native)
    stream = Stream(0x10)
    out.new(stream, 0x10)
    del stream
    gc.collect()
    out.new(Stream(0x10), 0x10)
    assert cp.work() == ["alloc", "memset"] * 2


@FORMS
def test_another_device_gets_a_batch_of_its_own(native: bool) -> None:
    cp = FakeCupy()
    out = _outputs(cp, native=native)
    out.new(cp.stream, 0)
    cp.device = 1  # the legacy default stream object is shared by every device
    out.new(cp.stream, 0)
    assert cp.work() == ["alloc", "memset"] * 2


@FORMS
def test_a_capture_zeroes_every_output_alone_and_spares_the_batch(native: bool) -> None:
    cp = FakeCupy()
    out = _outputs(cp, native=native)
    stream = Stream(0x30)
    before = out.new(stream, 0x30)
    cp.log.clear()
    cp.capturing.add(0x30)
    inside = [out.new(stream, 0x30) for _ in range(2)]
    assert cp.work() == ["alloc", "memset"] * 2  # each captured: replays zero it again
    assert [e[3] for e in cp.log if e[0] == "memset"] == [8000, 8000]
    cp.capturing.clear()
    cp.log.clear()
    after = out.new(stream, 0x30)
    assert cp.work() == []  # the batch resumes where it stopped
    assert after.data.ptr == before.data.ptr + 8192
    assert all(y.data.ptr != after.data.ptr for y in inside)


@FORMS
def test_a_failing_capture_query_counts_as_capturing(native: bool) -> None:
    cp = FakeCupy()
    out = _outputs(cp, native=native)
    out.new(Stream(666), 666)
    out.new(Stream(666), 666)
    assert cp.work() == ["alloc", "memset"] * 2
    assert all(e[3] == 8000 for e in cp.log if e[0] == "memset")


@FORMS
def test_the_legacy_default_stream_is_never_asked_about_capture(native: bool) -> None:
    cp = FakeCupy()
    out = _outputs(cp, native=native)
    for _ in range(3):
        out.new(cp.stream, 0)
    assert ("capturing?", 0) not in cp.log
    out.new(Stream(0x40), 0x40)
    assert ("capturing?", 0x40) in cp.log


@FORMS
def test_a_batch_is_let_go_with_its_last_output(native: bool) -> None:
    cp = FakeCupy()
    out = _outputs(cp, n=100, native=native)  # 64 outputs a batch
    first = out.new(cp.stream, 0)
    gone = weakref.ref(first.data.mem)
    rest = [out.new(cp.stream, 0) for _ in range(63)]
    assert all(y.data.mem is first.data.mem for y in rest)
    assert out.stream is cp.stream
    out.new(cp.stream, 0)  # the batch is used up: the factory lets it go
    del rest
    assert gone() is not None, "an output still holds it"
    del first
    assert gone() is None


def test_the_native_factory_refuses_slots_smaller_than_an_output() -> None:
    parts = list(vector_call.OutputVectors(FakeCupy(), 2000, np.float32, zeroed=True)
                 .native_parts())
    parts[-2] = 4000  # the slot: fewer bytes than an output's 8,000
    with pytest.raises(ValueError, match="sizes"):
        native_module().OutputVectors(*parts)


@FORMS
def test_threads_never_share_an_output(native: bool) -> None:
    cp = FakeCupy()
    out = _outputs(cp, n=100, native=native)  # 512-byte slots: 64 outputs a batch
    got: list[int] = []

    def take() -> None:
        got.extend(out.new(cp.stream, 0).data.ptr for _ in range(500))

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2000 and len(set(got)) == 2000


class Launches:
    def __init__(self) -> None:
        self.calls: list[tuple[int, tuple[int, ...]]] = []

    def launch_on(self, stream: int, pointers: tuple[int, ...]) -> None:
        self.calls.append((stream, tuple(pointers)))


def _vector_call(cp: FakeCupy, launch: Any, zeroed: bool = True) -> vector_call.VectorCall:
    return vector_call.VectorCall(cp, launch, 40, 30, np.float32, zeroed=zeroed, owner=0xBEEF)


def test_a_vector_call_reads_the_stream_once_and_launches_on_it() -> None:
    cp = FakeCupy()
    launches = Launches()
    call = _vector_call(cp, launches)
    x = cp.ndarray((30,), np.float32)
    cp.stream = Stream(0x50)
    cp.stream_reads = 0
    y = call(x)
    assert cp.stream_reads == 1
    assert launches.calls == [(0x50, (x.data.ptr, y.data.ptr, 0xBEEF))]
    assert y.shape == (40,) and y.dtype == np.float32
    assert [e[4] for e in cp.log if e[0] == "memset"] == [0x50]


# Inputs the one-step call leaves to the general path (the calls are built for 30 columns of
# float32); tests/runtime/test_native_vector_call.py holds the native call to the same list.
NOT_PLAIN = [
    lambda cp: cp.ndarray((30,), np.float64),  # another dtype
    lambda cp: cp.ndarray((31,), np.float32),  # another length
    lambda cp: cp.ndarray((30, 1), np.float32),  # not a vector
    lambda cp: np.zeros(30, np.float32),  # not on the device
]


@pytest.mark.parametrize("make", NOT_PLAIN)
def test_a_vector_call_leaves_anything_else_to_the_general_path(make: Any) -> None:
    cp = FakeCupy()
    launches = Launches()
    call = _vector_call(cp, launches)
    x = make(cp)
    cp.log.clear()
    assert call(x) is None
    assert launches.calls == [] and cp.log == []


def test_a_vector_call_leaves_strided_and_subclassed_vectors_to_the_general_path() -> None:
    cp = FakeCupy()
    launches = Launches()
    call = _vector_call(cp, launches)
    strided = cp.ndarray((30,), np.float32)
    strided._c_contiguous = False
    sub = type("Sub", (cp.ndarray,), {})((30,), np.float32)
    assert call(strided) is None and call(sub) is None and launches.calls == []


def test_an_empty_grid_returns_the_zeroed_output_without_a_launch() -> None:
    cp = FakeCupy()
    call = _vector_call(cp, None)
    y = call(cp.ndarray((30,), np.float32))
    assert y.shape == (40,)
    assert cp.work()[-2:] == ["alloc", "memset"]
