"""``kernel(A, x)`` remembers A's prepared form: hits do not convert again, changed arrays
prepare again, in-place edits need forget(), entries die with their matrix (fake GPU)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import teaal_loops.pipeline as pipeline
from teaal_loops.errors import MatrixError
from teaal_loops.runtime import Kernel, PreparedMatrix

from .conftest import SPECS, FakeGpu


def _matrix(rows: int = 60, cols: int = 50, seed: int = 1) -> sp.csr_matrix:
    return sp.random(rows, cols, density=0.1, format="csr", random_state=seed, dtype=np.float64)



def _kernel(name: str = "merge_path", dtype: str = "float64") -> Kernel:
    kernel = pipeline.compile(SPECS / f"{name}.yaml", dtype=dtype)
    assert isinstance(kernel, Kernel)
    return kernel


@pytest.mark.parametrize("name", ["thread_mapped", "merge_path"])
def test_a_matrix_passed_again_is_not_converted_again(
    fake_gpu: FakeGpu, conversions: list[Any], name: str
) -> None:
    kernel = _kernel(name)
    A = _matrix()
    x = np.random.default_rng(0).uniform(-1, 1, A.shape[1])
    for _ in range(3):
        np.testing.assert_allclose(kernel(A, x), A @ x, rtol=1e-12, atol=1e-12)
    assert conversions == [A]
    assert kernel.prepared_for(A) is kernel.prepared_for(A)
    assert len(fake_gpu.kinds("launch")) == 3


def test_new_arrays_prepare_again(fake_gpu: FakeGpu, conversions: list[Any]) -> None:
    kernel = _kernel()
    A = _matrix()
    x = np.ones(A.shape[1])
    kernel(A, x)
    A.data = A.data * 2  # a new array: detected
    np.testing.assert_allclose(kernel(A, x), A @ x, rtol=1e-12)
    A.indices = A.indices.copy()  # same content, new array: prepared again all the same
    kernel(A, x)
    B = A[:, :40]  # a different matrix object
    np.testing.assert_allclose(kernel(B, x[:40]), B @ x[:40], rtol=1e-12)
    assert len(conversions) == 4


def test_in_place_edits_of_a_copied_matrix_need_forget_or_prepare(
    fake_gpu: FakeGpu, conversions: list[Any]
) -> None:
    """Host matrices are copied to the device, so an in-place edit is not seen (documented);
    forget(A) or prepare(A) takes the new values."""
    kernel = _kernel("thread_mapped")
    A = _matrix()
    x = np.ones(A.shape[1])
    before = A @ x
    assert not kernel.prepare(A).aliases_input
    A.data *= 3
    np.testing.assert_allclose(kernel(A, x), before, rtol=1e-12)  # stale, as documented
    assert kernel.forget(A) and not kernel.forget(A)
    np.testing.assert_allclose(kernel(A, x), A @ x, rtol=1e-12)
    A.data *= 2
    kernel.prepare(A)  # prepares anew and refreshes the entry
    np.testing.assert_allclose(kernel(A, x), A @ x, rtol=1e-12)
    assert len(conversions) == 3


def test_the_entry_dies_with_its_matrix(fake_gpu: FakeGpu) -> None:
    kernel = _kernel()
    A = _matrix()
    prepared = weakref.ref(kernel.prepared_for(A))
    assert len(kernel._cache) == 1 and prepared() is not None
    del A
    gc.collect()
    assert len(kernel._cache) == 0
    assert prepared() is None, "the prepared matrix (device memory) outlived its matrix"


def test_the_cache_is_bounded_and_keeps_the_recently_used(
    fake_gpu: FakeGpu, conversions: list[Any]
) -> None:
    kernel = _kernel()
    mats = [_matrix(seed=s) for s in range(Kernel.CACHE_SIZE + 2)]
    x = np.ones(50)
    for A in mats:
        kernel(A, x)
        kernel(mats[0], x)  # kept in use: never evicted
    assert len(kernel._cache) == Kernel.CACHE_SIZE
    before = len(conversions)
    kernel(mats[0], x)
    kernel(mats[-1], x)
    assert len(conversions) == before
    kernel(mats[1], x)  # evicted long ago
    assert len(conversions) == before + 1


def test_matrices_that_take_no_weak_reference_are_prepared_every_call(
    fake_gpu: FakeGpu, conversions: list[Any]
) -> None:
    kernel = _kernel("thread_mapped")
    dense = [[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]
    for _ in range(2):
        np.testing.assert_allclose(kernel(dense, np.ones(3)), [3.0, 3.0])
    assert len(conversions) == 2 and len(kernel._cache) == 0


def test_a_matrix_prepared_for_another_dtype_is_refused(fake_gpu: FakeGpu) -> None:
    A = _matrix()
    prepared = _kernel(dtype="float64").prepare(A)
    with pytest.raises(MatrixError, match="prepared for float64, not for this float32"):
        _kernel(dtype="float32")(prepared, np.ones(A.shape[1], np.float32))


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (np.zeros(59), "contiguous float64 vector of 60 elements"),
        (np.zeros(60, np.float32), "got a contiguous float32 array"),
        (np.zeros(120)[::2], "got a non-contiguous float64"),
        ([0.0] * 60, "must be a CuPy array"),
    ],
)
def test_out_is_checked_before_the_kernel_writes_it(
    fake_gpu: FakeGpu, out: Any, message: str
) -> None:
    kernel = _kernel("thread_mapped")
    A = _matrix()
    with pytest.raises(MatrixError, match=message):
        kernel(A, np.ones(A.shape[1]), out=out)
    assert not fake_gpu.kinds("launch")


def test_zeroing_allocation_and_launch_go_to_the_current_stream(fake_gpu: FakeGpu) -> None:
    import teaal_loops.runtime.backend as backend

    kernel = _kernel("work_oriented")
    A = _matrix()
    x = np.ones(A.shape[1])
    kernel.prepare(A)
    fake_gpu.log.clear()
    y = np.full(A.shape[0], 7.0)
    stream = backend.cupy_module().cuda.Stream(non_blocking=True)
    with stream:
        assert kernel(A, x, out=y) is y  # zeroed first: not 7 + A @ x
        fresh = kernel(A, x)
    np.testing.assert_allclose(y, A @ x, rtol=1e-12)
    np.testing.assert_allclose(fresh, A @ x, rtol=1e-12)
    assert [what for what, _, _ in fake_gpu.log] == ["zero", "launch", "alloc:zeros", "launch"]
    assert {ptr for _, ptr, _ in fake_gpu.log} == {stream.ptr}


def test_complex_vectors_are_refused(fake_gpu: FakeGpu) -> None:
    kernel = _kernel("thread_mapped")
    A = _matrix()
    with pytest.raises(MatrixError, match="complex values"):
        kernel(A, np.ones(A.shape[1], complex))


def test_passing_a_prepared_matrix_back_returns_it(fake_gpu: FakeGpu, conversions: list[Any]) -> None:
    kernel = _kernel()
    A = _matrix()
    prepared = kernel.prepare(A)
    assert isinstance(prepared, PreparedMatrix)
    assert kernel.prepare(prepared) is prepared and kernel.prepared_for(prepared) is prepared
    x = np.ones(A.shape[1])
    np.testing.assert_allclose(kernel(prepared, x), A @ x, rtol=1e-12)
    assert conversions == [A]
