"""kernel.capture(A, x, y) on the fake GPU: what the graph holds (zeroing then launch, on the
capturing stream), that nothing allocates during the capture, that replays see x's new
contents, and that refusals leave no stream capturing."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import teaal_loops.pipeline as pipeline
from teaal_loops.errors import DeviceError, MatrixError
from teaal_loops.runtime import Kernel, backend

from .conftest import SPECS, FakeGpu


def _kernel(name: str) -> Kernel:
    kernel = pipeline.compile(SPECS / f"{name}.yaml", dtype="float64")
    assert isinstance(kernel, Kernel)
    return kernel


@pytest.mark.parametrize(("name", "ops"), [
    ("thread_mapped", ["launch"]),
    ("work_oriented", ["zero", "launch"]),
    ("merge_path", ["launch"]),  # SpMV's staged tiles carry split rows: no zeroing
])
def test_capture_records_the_zeroing_and_the_launch(
    fake_gpu: FakeGpu, name: str, ops: list[str]
) -> None:
    kernel = _kernel(name)
    A = sp.random(50, 40, density=0.2, format="csr", random_state=4)
    x = np.zeros(40)
    y = np.zeros(50)
    kernel.prepare(A)
    fake_gpu.log.clear()
    captured = kernel.capture(A, x, y)
    during = [entry for entry in fake_gpu.log if entry[2]]  # logged while capturing
    assert [what for what, _, _ in during] == ops
    assert all(not what.startswith("alloc") for what, _, _ in during)
    assert len({ptr for _, ptr, _ in during}) == 1 and during[0][1] != 0
    before = [(what, ptr) for what, ptr, capturing in fake_gpu.log if not capturing]
    scratch = kernel.prepared_for(A).scratch
    if scratch is None or not scratch.nbytes:
        assert not any(what.startswith("alloc") for what, _ in before)
    else:  # the capture stream's scratch is made on that stream before the capture begins
        assert ("alloc:zeros", during[0][1]) in before
    assert captured.prepared is kernel.prepared_for(A)
    assert captured.x is x and captured.y is y
    rng = np.random.default_rng(2)
    for _ in range(3):  # replays read x's current contents; accumulation restarts from zero
        x[...] = rng.uniform(-1, 1, 40)
        captured.launch()
        np.testing.assert_allclose(y, A @ x, rtol=1e-12, atol=1e-12)


def test_capture_on_a_given_stream(fake_gpu: FakeGpu) -> None:
    kernel = _kernel("merge_path")
    A = sp.random(30, 30, density=0.2, format="csr", random_state=5)
    stream = backend.cupy_module().cuda.Stream(non_blocking=True)
    fake_gpu.log.clear()
    kernel.capture(A, np.ones(30), np.zeros(30), stream=stream)
    assert {ptr for _, ptr, capturing in fake_gpu.log if capturing} == {stream.ptr}
    with pytest.raises(DeviceError, match="legacy default stream"):
        kernel.capture(A, np.ones(30), np.zeros(30), stream=fake_gpu.null)


def test_bad_vectors_are_refused_before_the_capture_begins(fake_gpu: FakeGpu) -> None:
    kernel = _kernel("merge_path")
    A = sp.random(30, 20, density=0.2, format="csr", random_state=5)
    stream = backend.cupy_module().cuda.Stream(non_blocking=True)
    with pytest.raises(MatrixError, match="y must be a contiguous float64 vector of 30"):
        kernel.capture(A, np.ones(20), np.zeros(20), stream=stream)
    with pytest.raises(MatrixError, match="x must be"):
        kernel.capture(A, np.ones(20, np.float32), np.zeros(30), stream=stream)
    assert not stream.capturing


def test_an_error_inside_the_capture_ends_it(
    fake_gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = _kernel("thread_mapped")
    A = sp.random(30, 20, density=0.2, format="csr", random_state=5)
    stream = backend.cupy_module().cuda.Stream(non_blocking=True)

    def broken(*args: object) -> None:
        raise RuntimeError("launch failed")

    kernel.prepare(A)
    monkeypatch.setattr(Kernel, "launch", broken)
    with pytest.raises(RuntimeError, match="launch failed"):
        kernel.capture(A, np.ones(20), np.zeros(30), stream=stream)
    assert not stream.capturing
