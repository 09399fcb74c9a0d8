"""Register-blocked SpMM kernels get a build with blocks of one step for launches whose threads
take one dense step (backend.SINGLE_STEP_OPTION): without a GPU, a stand-in CuPy records the
compile options, so the test sees which build each launch asks for."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from teaal_loops import pipeline
from teaal_loops.runtime import backend

SPECS = Path(__file__).resolve().parents[2] / "specs"


class FakeCupy:
    def __init__(self) -> None:
        self.compiled: list[tuple[str, ...]] = []
        fake = self

        class RawModule:
            def __init__(self, code: str, options: tuple[str, ...], backend: str) -> None:
                fake.compiled.append(tuple(options))
                self.options = tuple(options)

            def get_function(self, name: str) -> Any:
                return types.SimpleNamespace(name=name, options=self.options)

        self.RawModule = RawModule
        device = types.SimpleNamespace(compute_capability="90")
        self.cuda = types.SimpleNamespace(Device=lambda: device)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCupy:
    cupy = FakeCupy()
    monkeypatch.setattr(backend, "cupy_module", lambda: cupy)
    monkeypatch.setattr(backend, "_modules", {})
    return cupy


def _prepared(kernel: Any) -> Any:
    """The two fields Kernel.function reads, for the kernel's nominal configuration."""
    return types.SimpleNamespace(source=kernel.source, config=kernel._nominal, _functions={})


@pytest.mark.parametrize("spec", ["spmm/lanes_over_n.yaml", "spmm/group_lanes_over_k.yaml"])
def test_a_blocked_kernel_builds_single_step_launches_apart(fake: FakeCupy, spec: str) -> None:
    kernel = pipeline.compile(SPECS / spec)
    prepared = _prepared(kernel)
    assert backend.reads_dense_block(prepared.source)
    blocked = kernel.function(prepared)
    single = kernel.function(prepared, single_step=True)
    assert backend.SINGLE_STEP_OPTION not in blocked.options
    assert backend.SINGLE_STEP_OPTION in single.options
    assert kernel.function(prepared, single_step=True) is single  # built once
    traced = kernel.function(prepared, trace=True, single_step=True)
    assert {backend.TRACE_OPTION, backend.SINGLE_STEP_OPTION} <= set(traced.options)
    assert len(fake.compiled) == 3


@pytest.mark.parametrize("spec", ["thread_mapped.yaml", "spmm/nonzero_split.yaml",
                                  "sddmm/lanes_over_k.yaml"])
def test_other_kernels_have_one_build(fake: FakeCupy, spec: str) -> None:
    kernel = pipeline.compile(SPECS / spec)
    prepared = _prepared(kernel)
    assert not backend.reads_dense_block(prepared.source)
    assert kernel.function(prepared, single_step=True) is kernel.function(prepared)
    assert fake.compiled == [backend.COMPILE_OPTIONS]


def test_dense_launches_ask_for_the_single_step_build_exactly_when_one_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernel = pipeline.compile(SPECS / "spmm/lanes_over_n_tiled.yaml")
    asked: list[bool] = []
    monkeypatch.setattr(kernel, "function", lambda p, trace=False, single_step=False:
                        asked.append(single_step))
    monkeypatch.setattr("teaal_loops.runtime.kernel.trailing_arguments", lambda *a: ())
    prepared = types.SimpleNamespace(bound=types.SimpleNamespace(index_bits=32),
                                     no_owner=None, leading_args=())
    for time in (1, 2, 5):
        kernel._dense_function(prepared, None, None, None, 32, time)
    assert asked == [True, False, False]
