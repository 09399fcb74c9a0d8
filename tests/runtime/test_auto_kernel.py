"""``schedule: auto`` through compile(): the kernel is chosen per matrix, and the choice and
the prepared matrix are remembered per matrix (fake GPU where a kernel runs)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops import auto
from teaal_loops.errors import ParameterError, TeaalLoopsError
from teaal_loops.matrix import synthetic
from teaal_loops.pipeline import AutoKernel, compile, compile_for
from teaal_loops.runtime import Kernel, backend
from teaal_loops.spec import load_spec_string
from teaal_loops.types import DeviceInfo

from .conftest import FakeGpu

AUTO_SPEC = """
einsum:
  declaration: {A: [M, K], B: [K], Z: [M]}
  expressions: ["Z[m] = A[m, k] * B[k]"]
x-teaal-loops:
  schedule: auto
"""


def test_auto_spec_compiles_to_a_kernel_chosen_per_matrix() -> None:
    kernel = compile(load_spec_string(AUTO_SPEC))
    assert isinstance(kernel, AutoKernel)
    for A in (
        synthetic("longrows", rows=3000, nnz=60_000, seed=1),
        synthetic("banded", rows=3000, nnz=30_000, seed=1),
        sp.random(50, 50, density=0.1, format="csr", random_state=2),
    ):
        chosen = kernel.kernel_for(A)
        expected = auto.choose(auto.matrix_stats(A), _device())
        assert isinstance(chosen, Kernel)
        assert chosen.kind == expected.schedule
        assert kernel.last_choice == expected
        assert compile_for(load_spec_string(AUTO_SPEC), A).kind == expected.schedule


def test_auto_refuses_fixed_parameters_and_has_no_matrix_free_source() -> None:
    spec = load_spec_string(AUTO_SPEC)
    with pytest.raises(ParameterError, match="auto chooses the parameters"):
        compile(spec, params={"BLOCK_SIZE": 8})
    with pytest.raises(TeaalLoopsError, match="depends on the matrix"):
        _ = compile(spec).source  # type: ignore[union-attr]


@pytest.fixture
def stats_calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every matrix whose row statistics auto computes (what costs milliseconds a call)."""
    calls: list[object] = []
    real = auto.matrix_stats

    def counting(A: object) -> object:
        calls.append(A)
        return real(A)

    monkeypatch.setattr(auto, "matrix_stats", counting)
    return calls


def test_auto_remembers_its_choice_and_prepared_matrix_per_matrix(
    fake_gpu: FakeGpu, stats_calls: list[object]
) -> None:
    kernel = compile(load_spec_string(AUTO_SPEC), dtype="float64")
    assert isinstance(kernel, AutoKernel)
    A = synthetic("longrows", rows=3000, nnz=60_000, seed=1)
    B = synthetic("banded", rows=3000, nnz=30_000, seed=1)
    x = np.random.default_rng(0).uniform(-1, 1, 3000)
    for _ in range(3):
        np.testing.assert_allclose(kernel(A, x), A @ x, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(kernel(B, x), B @ x, rtol=1e-10, atol=1e-10)
    assert stats_calls == [A, B]
    assert kernel.last_choice == auto.choose(auto.matrix_stats(B), _device(),
                                             value_bytes=8)  # float64
    chosen = kernel.kernel_for(A)
    assert kernel.last_choice.schedule == chosen.kind
    prepared = chosen.prepared_for(A)  # the chosen kernel remembers A too: prepared once
    assert kernel._prepared(A) == (chosen, prepared)
    np.testing.assert_allclose(kernel(prepared, x), A @ x, rtol=1e-10, atol=1e-10)
    assert kernel.forget(A) and not kernel.forget(A)
    kernel(A, x)
    assert stats_calls[-1] is A and len(stats_calls) == 4
    A.data = A.data * 2  # new arrays: chosen and prepared again
    np.testing.assert_allclose(kernel(A, x), A @ x, rtol=1e-10, atol=1e-10)
    assert len(stats_calls) == 5


def test_auto_prepared_matrices_operators_and_graphs(fake_gpu: FakeGpu) -> None:
    kernel = compile(load_spec_string(AUTO_SPEC), dtype="float64")
    assert isinstance(kernel, AutoKernel)
    A = sp.random(200, 200, density=0.05, format="csr", random_state=3)
    x = np.linspace(-1, 1, 200)
    prepared = kernel.prepare(A)
    assert kernel.prepare(prepared) is prepared
    np.testing.assert_allclose(kernel(prepared, x), A @ x, rtol=1e-12, atol=1e-12)
    op = kernel.linear_operator(A)
    assert op.shape == (200, 200) and op.prepared is prepared
    np.testing.assert_allclose(op.matvec(x), A @ x, rtol=1e-12, atol=1e-12)
    y = np.zeros(200)
    graph = kernel.capture(A, x, y)
    graph.launch()
    np.testing.assert_allclose(y, A @ x, rtol=1e-12, atol=1e-12)
    other = compile(load_spec_string(AUTO_SPEC), dtype="float64")
    with pytest.raises(TeaalLoopsError, match="not prepared by this auto kernel"):
        other(prepared, x)


def test_auto_entries_die_with_their_matrix(fake_gpu: FakeGpu) -> None:
    kernel = compile(load_spec_string(AUTO_SPEC), dtype="float64")
    assert isinstance(kernel, AutoKernel)
    A = sp.random(100, 100, density=0.05, format="csr", random_state=3)
    prepared = weakref.ref(kernel.prepare(A))
    del A
    gc.collect()
    assert prepared() is None and len(kernel._resolved) == 0


@pytest.mark.parametrize("dtype, value_bytes", [("float32", 4), ("float64", 8)])
def test_auto_chooses_for_its_own_dtype(monkeypatch: pytest.MonkeyPatch, dtype: str,
                                        value_bytes: int) -> None:
    """merge-path's items a thread are capped by the value size (auto.staged_merge_items), so
    the kernel must tell the chooser its dtype."""
    seen: list[int] = []
    real = auto.resolve

    def spy(spec: object, A: object, device: object = None, *, value_bytes: int = 4,
            layout_free: bool = True) -> object:
        seen.append(value_bytes)
        return real(spec, A, device, value_bytes=value_bytes, layout_free=layout_free)

    monkeypatch.setattr(auto, "resolve", spy)
    kernel = compile(load_spec_string(AUTO_SPEC), dtype=dtype)
    assert isinstance(kernel, AutoKernel)
    kernel.kernel_for(sp.random(50, 50, density=0.1, format="csr", random_state=2))
    assert seen == [value_bytes]


def _device() -> DeviceInfo | None:
    """What an auto kernel tells the chooser: this machine's GPU, or nothing without one."""
    return backend.device_info() if backend.gpu_available() else None


def test_auto_tells_the_chooser_which_gpu_it_runs_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """So that the GPU's properties and the constants fitted on its model decide."""
    seen: list[object] = []
    real = auto.resolve

    def spy(spec: object, A: object, device: object = None, *, value_bytes: int = 4,
            layout_free: bool = True) -> object:
        seen.append(device)
        return real(spec, A, device, value_bytes=value_bytes, layout_free=layout_free)

    h200 = DeviceInfo("NVIDIA H200", 132)
    monkeypatch.setattr(auto, "resolve", spy)
    monkeypatch.setattr(backend, "gpu_available", lambda: True)
    monkeypatch.setattr(backend, "device_info", lambda: h200)
    kernel = compile(load_spec_string(AUTO_SPEC), dtype="float64")
    assert isinstance(kernel, AutoKernel)
    A = synthetic("banded", rows=3000, nnz=30_000, seed=1)
    kernel.kernel_for(A)
    assert seen == [h200]
    assert kernel.last_choice == auto.choose(auto.matrix_stats(A), h200, value_bytes=8)
