"""vector_call.VectorCall and OutputVectors on the GPU: the one-step call computes A @ x on every
schedule, batched outputs are zero, distinct and never reused while a caller holds one, other
streams get their own batches, and a call captured in a CUDA graph writes (and, where the
schedule accumulates, zeroes) its output at every replay."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import teaal_loops.pipeline as pipeline
from teaal_loops.runtime import vector_call
from teaal_loops.runtime.backend import unavailable_reason
from tests.conftest import REPO

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(unavailable_reason() is not None,
                       reason=f"needs a CUDA GPU: {unavailable_reason()}"),
]
SCHEDULES = ["thread_mapped", "group_mapped", "work_oriented", "merge_path"]
NATIVE = pytest.mark.parametrize("native", [False, True], ids=["python", "native"])


def _setup(name: str, native: bool = False) -> tuple[Any, Any, Any, Any, Any]:
    """(cupy, the cupyx matrix, x, the kernel's one-step call: vector_call.VectorCall, or with
    ``native`` its C twin, the reference A @ x)."""
    import cupy
    import cupyx.scipy.sparse as csp

    kernel: Any = pipeline.compile(REPO / "specs" / f"{name}.yaml", dtype="float32")
    A = csp.csr_matrix(sp.random(3000, 2500, density=0.004, format="csr", random_state=7,
                                 dtype=np.float32))
    x = cupy.asarray(np.random.default_rng(0).uniform(-1, 1, 2500).astype(np.float32))
    prepared = kernel.warm_up(A)
    raw = prepared._raw[False]
    assert raw, "no raw launcher on a GPU"
    if native:
        if vector_call.native_unavailable() is not None:
            pytest.skip(f"the native call cannot be built here: {vector_call.native_unavailable()}")
        call = vector_call.vector_call(cupy, raw, 3000, 2500, np.float32,
                                   zeroed=prepared.accumulates,
                                   owner=prepared.no_owner.data.ptr, scratch=prepared.scratch)
        assert not isinstance(call, vector_call.VectorCall)
    else:
        call = vector_call.VectorCall(cupy, raw, 3000, 2500, np.float32,
                                  zeroed=prepared.accumulates,
                                  owner=prepared.no_owner.data.ptr, scratch=prepared.scratch)
    return cupy, A, x, call, A @ x


def _close(got: Any, want: Any) -> None:
    np.testing.assert_allclose(got.get(), want.get(), rtol=1e-5, atol=1e-5)


@NATIVE
@pytest.mark.parametrize("name", SCHEDULES)
def test_the_vector_call_computes_the_product(name: str, native: bool) -> None:
    cupy, A, x, call, want = _setup(name, native)
    outputs = [call(x) for _ in range(70)]  # more than one batch where the schedule adds
    assert len({y.data.ptr for y in outputs}) == 70
    for y in outputs:
        _close(y, want)
    assert call(x.astype(cupy.float64)) is None and call(x[::1].reshape(1, -1)) is None


@NATIVE
@pytest.mark.parametrize("name", ["thread_mapped", "merge_path"])
def test_a_held_output_is_never_reused(name: str, native: bool) -> None:
    cupy, A, x, call, want = _setup(name, native)
    held = call(x)
    held[...] = 7.0
    for _ in range(300):  # several batches come and go
        y = call(x)
        y += 1.0
    del y
    assert bool((held == 7.0).all())


@NATIVE
def test_batched_outputs_follow_the_current_stream(native: bool) -> None:
    """A batch zeroed on stream 1 behind a 50 ms spin: had stream 2 taken its output from
    that batch, the late memset would wipe the product stream 2 wrote meanwhile."""
    cupy, A, x, call, want = _setup("work_oriented", native)
    spin = cupy.RawKernel(
        'extern "C" __global__ void spin(unsigned long long ns) { unsigned long long t0, t;'
        ' asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));'
        ' do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns); }',
        "spin")
    first = cupy.cuda.Stream(non_blocking=True)
    second = cupy.cuda.Stream(non_blocking=True)
    with first:
        spin((1,), (1,), (cupy.uint64(50_000_000),))
        held = call(x)  # the batch's memset waits behind the spin
    with second:
        y = call(x)
    assert call.outputs.stream is second
    second.synchronize()
    first.synchronize()
    _close(y, want)
    _close(held, want)


@NATIVE
@pytest.mark.parametrize("name", SCHEDULES)
def test_a_captured_call_zeroes_its_output_at_every_replay(name: str, native: bool) -> None:
    cupy, A, x, call, want = _setup(name, native)
    call(x)  # a batch exists on the capturing stream's neighbour
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        call(x)  # and on the capturing stream itself, from before the capture
        stream.begin_capture()
        y = call(x)
        graph = stream.end_capture()
        for _ in range(3):
            graph.launch()
            stream.synchronize()
            _close(y, want)  # not 2x, 3x: the graph zeroed y before adding
