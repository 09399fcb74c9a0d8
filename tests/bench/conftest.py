"""The ``fake_gpu`` fixture: the benchmark harness on NumPy (:mod:`tests.bench.fake_gpu`)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
import scipy.sparse

from tests.bench.fake_gpu import FakeBaseline, FakeGraph, FakeKernel, FakeNumpyCupy, sddmm_values

# spec file stem -> how its fake kernel misbehaves
MODES = {"work_oriented": "wrong", "thread_mapped": "skip_last", "group_lanes_over_k": "wrong"}
SPMV_ALGORITHMS = ("DEFAULT", "CSR_ALG1", "CSR_ALG2", "BROKEN", "CSR_ALG1+preprocess")
SPMM_ALGORITHMS = ("DEFAULT", "CSR_ALG1", "CSR_ALG2", "BROKEN")
SDDMM_ALGORITHMS = ("CSR_ALG1", "BROKEN")


class FakeEnv(types.SimpleNamespace):
    cp: FakeNumpyCupy
    kernels: list[FakeKernel]
    baselines: list[FakeBaseline]


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> FakeEnv:
    cp = FakeNumpyCupy()
    csp = types.ModuleType("cupyx.scipy.sparse")
    csp.csr_matrix = scipy.sparse.csr_matrix  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupyx", types.ModuleType("cupyx"))
    monkeypatch.setitem(sys.modules, "cupyx.scipy", types.ModuleType("cupyx.scipy"))
    monkeypatch.setitem(sys.modules, "cupyx.scipy.sparse", csp)
    import teaal_loops.bench.baselines as baselines
    import teaal_loops.bench.dense_timing as dense_timing
    import teaal_loops.bench.timing as timing
    import teaal_loops.pipeline as pipeline
    from teaal_loops.runtime import backend
    from teaal_loops.types import DeviceInfo

    env = FakeEnv(cp=cp, kernels=[], baselines=[])
    monkeypatch.setattr(backend, "cupy_module", lambda: cp)
    monkeypatch.setattr(backend, "device_info", lambda *a: DeviceInfo.h100())
    monkeypatch.setattr(timing, "copy_bandwidth",
                        lambda cupy, timer: {"gbps": 3000.0, "buffer_bytes": 1, "reps": 1})

    def fake_compile(spec: Any, *, layout: str, dtype: str, params: dict[str, int]) -> FakeKernel:
        mode = MODES.get(Path(spec).stem, "")
        if params.get("BLOCK_SIZE") == 2:
            mode = "raise"
        kernel = FakeKernel(Path(spec), params, dtype, mode, cp)
        env.kernels.append(kernel)
        return kernel

    def baseline(compute: Any, labels: tuple[str, ...], **kw: Any) -> FakeBaseline:
        made = FakeBaseline(cp, compute, labels, **kw)
        env.baselines.append(made)
        return made

    monkeypatch.setattr(pipeline, "compile", fake_compile)
    monkeypatch.setattr(baselines, "make_spmv", lambda A, x, y: baseline(
        lambda v: A @ v, SPMV_ALGORITHMS, preprocessed=("CSR_ALG1+preprocess",)))
    monkeypatch.setattr(baselines, "make_spmm", lambda A, n, B, C: baseline(
        lambda b: A @ b, SPMM_ALGORITHMS, family="SpMM"))
    monkeypatch.setattr(baselines, "make_sddmm", lambda C, k, A, B, out: baseline(
        lambda a, b: sddmm_values(C, a, b), SDDMM_ALGORITHMS, binding="nvmath",
        family="SDDMM"))
    monkeypatch.setattr(baselines, "make_torch_sddmm", lambda C, k, A, B, out: baseline(
        lambda a, b: sddmm_values(C, a, b), ("torch.sparse.sampled_addmm",), binding="torch",
        family="SDDMM"))
    monkeypatch.setattr(baselines, "libraries", lambda: {
        "cupy": True, "nvmath": True, "torch": True, "preprocess": "runs (fake)",
        "sddmm": "nvmath"})
    monkeypatch.setattr(dense_timing, "capture", lambda cupy, launch: FakeGraph(launch))
    return env
