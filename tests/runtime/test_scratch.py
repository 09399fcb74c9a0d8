"""StreamScratch: one zeroed buffer per launch stream, made once and reused."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

from teaal_loops.runtime.scratch import StreamScratch


def _fake_cupy() -> Any:
    state = {"current": 0, "made": []}

    class Stream:
        def __init__(self, ptr: int) -> None:
            self.ptr = ptr

        @contextlib.contextmanager
        def _use(self) -> Iterator[None]:
            before, state["current"] = state["current"], self.ptr
            try:
                yield
            finally:
                state["current"] = before

        def __enter__(self) -> None:
            self._ctx = self._use()
            self._ctx.__enter__()

        def __exit__(self, *exc: object) -> None:
            self._ctx.__exit__(None, None, None)

    class Array:
        def __init__(self, n: int) -> None:
            self.host = np.zeros(n, np.uint8)
            self.data = types.SimpleNamespace(ptr=1000 + 100 * len(state["made"]))
            self.stream = state["current"]
            state["made"].append(self)

    cuda = types.SimpleNamespace(get_current_stream=lambda: Stream(state["current"]))
    return types.SimpleNamespace(zeros=lambda n, dtype: Array(n), uint8=np.uint8, cuda=cuda,
                                 Stream=Stream, state=state)


def test_one_zeroed_buffer_per_stream_made_on_that_stream() -> None:
    cp = _fake_cupy()
    scratch = StreamScratch(cp, 48)
    a = scratch.array(0)
    assert scratch.current_pointer() == a.data.ptr and a.host.size == 48 and not a.host.any()
    other = cp.Stream(7)
    scratch.ready_on(other)  # before a capture on `other`
    b = scratch.array(7)
    assert b is not a and b.stream == 7 and scratch.streams == 2
    assert scratch.pointer(7) == b.data.ptr
    with other:
        assert scratch.argument() is b
    assert len(cp.state["made"]) == 2  # nothing made twice


def test_an_empty_scratch_passes_a_null_pointer_and_allocates_nothing() -> None:
    cp = _fake_cupy()
    scratch = StreamScratch(cp, 0)
    assert scratch.current_pointer() == 0 and scratch.argument() == 0
    scratch.ready_on(cp.Stream(3))
    assert scratch.streams == 0 and not cp.state["made"]
