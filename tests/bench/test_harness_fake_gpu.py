"""The benchmark harness end to end on the CPU: NumPy stands in for CuPy and a kernel that
multiplies with SciPy stands in for the generated one. This checks the harness's own logic
(rotation, validation, timing flow, auto, best, JSON, errors), not the GPU."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse

from teaal_loops.bench import BenchOptions, markdown, run_bench
from teaal_loops.bench.suite import MatrixEntry
from teaal_loops.bench.variants import Variant
from teaal_loops.ir.model import Combine
from teaal_loops.lowering import lower
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec
from teaal_loops.types import DeviceInfo, MatrixShape
from tests.conftest import REPO

SPECS = REPO / "specs"


class FakeNumpyCupy(types.ModuleType):
    """``cupy`` as far as the harness uses it, backed by NumPy."""

    def __init__(self) -> None:
        super().__init__("cupy")
        clock = [0.0]

        class Event:
            def record(self) -> None:
                clock[0] += 1.0  # 1 ms a step: deterministic, positive intervals
                self.t = clock[0]

            def synchronize(self) -> None:
                pass

        self.cuda = types.SimpleNamespace(
            Event=Event,
            get_elapsed_time=lambda s, e: e.t - s.t,
            Device=lambda *a: types.SimpleNamespace(synchronize=lambda: None,
                                                    compute_capability="90"),
            runtime=types.SimpleNamespace(
                memGetInfo=lambda: (2**34, 2**35), driverGetVersion=lambda: 13000,
                runtimeGetVersion=lambda: 13000,
            ),
        )
        self.__version__ = "fake"
        self.RawKernel = lambda source, name: (lambda grid, block, args: None)
        self.get_default_memory_pool = lambda: types.SimpleNamespace(free_all_blocks=lambda: None)

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


class FakeKernel:
    def __init__(self, spec: Path, params: dict[str, int], dtype: str, mode: str) -> None:
        self.schedule = lower(load_spec(spec), params=params)
        self.kind = self.schedule.kind
        self.dtype = np.dtype(dtype)
        self.mode = mode

    def prepare(self, A: Any) -> Any:
        if self.mode == "raise":
            raise RuntimeError("nvrtc: template bug\nmore lines")
        bound = bind(self.schedule, MatrixShape(A.shape[0], A.shape[1], A.nnz), DeviceInfo.h100())
        return types.SimpleNamespace(A=A, bound=bound,
                                     accumulates=self.schedule.combine is Combine.ATOMIC)

    def new_output(self, p: Any) -> Any:
        return np.zeros(p.A.shape[0], self.dtype) if p.accumulates else np.empty(
            p.A.shape[0], self.dtype)

    def zero_output(self, p: Any, y: Any) -> None:
        if p.accumulates:
            y.fill(0)

    def launch(self, p: Any, x: Any, y: Any) -> None:
        product = p.A @ x
        if self.mode == "wrong":
            product = product * 1.5
        if self.mode == "skip_last":
            product = product[:-1]
            y[: len(product)] = product  # last row left as it was: NaN poison shows it
            return
        if p.accumulates:
            y += product
        else:
            y[:] = product

    def __call__(self, p: Any, x: Any) -> Any:
        y = self.new_output(p)
        self.launch(p, x, y)
        return y


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    cp = FakeNumpyCupy()
    csp = types.ModuleType("cupyx.scipy.sparse")
    csp.csr_matrix = scipy.sparse.csr_matrix  # type: ignore[attr-defined]
    cupyx = types.ModuleType("cupyx")
    cupyx_scipy = types.ModuleType("cupyx.scipy")
    monkeypatch.setitem(sys.modules, "cupyx", cupyx)
    monkeypatch.setitem(sys.modules, "cupyx.scipy", cupyx_scipy)
    monkeypatch.setitem(sys.modules, "cupyx.scipy.sparse", csp)
    import teaal_loops.bench.timing as timing
    import teaal_loops.pipeline as pipeline
    from teaal_loops.runtime import backend

    monkeypatch.setattr(backend, "cupy_module", lambda: cp)
    monkeypatch.setattr(backend, "device_info", lambda *a: DeviceInfo.h100())
    monkeypatch.setattr(timing, "copy_bandwidth",
                        lambda cupy, timer: {"gbps": 3000.0, "buffer_bytes": 1, "reps": 1})

    def fake_compile(spec: Any, *, layout: str, dtype: str, params: dict[str, int]) -> FakeKernel:
        mode = {"work_oriented": "wrong", "thread_mapped": "skip_last"}.get(Path(spec).stem, "")
        if params.get("BLOCK_SIZE") == 2:
            mode = "raise"
        return FakeKernel(Path(spec), params, dtype, mode)

    monkeypatch.setattr(pipeline, "compile", fake_compile)


def test_harness_end_to_end(fake_gpu: None, tmp_path: Path) -> None:
    mtx = tmp_path / "pat.mtx"
    mtx.write_text("%%MatrixMarket matrix coordinate pattern general\n3 3 4\n1 1\n1 3\n2 2\n3 1\n")
    entries = [
        MatrixEntry("pat", "corpus", "file", path=mtx),
        MatrixEntry("uni", "custom", "synthetic", text="uniform:rows=200,nnz=3000,seed=1"),
        MatrixEntry("band", "large", "gpu", generator="banded", options={"rows": 400, "width": 8}),
    ]
    variants = [
        Variant(SPECS / "thread_mapped.yaml"),
        Variant(SPECS / "group_mapped.yaml", {"BLOCK_SIZE": 2}),
        Variant(SPECS / "group_mapped.yaml", {"BLOCK_SIZE": 8}),
        Variant(SPECS / "work_oriented.yaml"),
        Variant(SPECS / "merge_path.yaml"),
    ]
    out = tmp_path / "r.json"
    doc = run_bench(BenchOptions(entries, variants, dtypes=("float32", "float64"), reps=5,
                                 warmup=1, json_path=out, command="test"))
    assert json.loads(out.read_text())["summary"] == json.loads(json.dumps(doc["summary"]))
    cases = doc["cases"]
    assert [(c["matrix"], c["dtype"]) for c in cases] == [
        (m, d) for m in ("pat", "uni", "band") for d in ("float32", "float64")]
    for c in cases:
        by = {r["label"]: r for r in c["results"]}
        assert by["merge_path"]["valid"] and by["group_mapped[BLOCK_SIZE=8]"]["valid"]
        assert not by["work_oriented"]["valid"]  # wrong values
        assert by["work_oriented"]["mismatches"] > 0
        assert not by["thread_mapped"]["valid"]  # last row never written: the poison shows
        assert by["group_mapped[BLOCK_SIZE=2]"]["bug"]
        assert by["group_mapped[BLOCK_SIZE=2]"]["error"] == "RuntimeError: nvrtc: template bug"
        assert by["merge_path"]["accumulates"] and by["merge_path"]["kernel"]["reps"] == 5
        assert c["best"]["label"] in ("merge_path", "group_mapped[BLOCK_SIZE=8]")
        assert c["cusparse"]["kernel"]["queued"] is True
        assert sum(1 for r in c["results"] if r.get("auto")) == 1
        assert c["auto"]["label"] == c["auto_choice"]["label"]
        assert c["copies"] >= 1 and c["compulsory_bytes"] > 0
    # rotation: small matrices are copied (up to max_copies) so the L2 cannot hold them
    assert cases[0]["copies"] == 32
    assert cases[0]["stats"]["nnz"] == 4
    assert "pat" in markdown(doc)


def test_time_budget_skips_matrices_and_says_so(fake_gpu: None, tmp_path: Path) -> None:
    entries = [MatrixEntry(f"u{i}", "custom", "synthetic", text=f"uniform:rows=50,nnz=200,seed={i}")
               for i in range(3)]
    doc = run_bench(BenchOptions(entries, [Variant(SPECS / "merge_path.yaml")], reps=2,
                                 warmup=0, time_budget_s=1e-9))
    assert doc["incomplete"] is True
    assert doc["skipped"] == ["u0", "u1", "u2"]


def test_auto_choice_outside_the_variant_set_is_timed_too(fake_gpu: None) -> None:
    from teaal_loops import auto, matrix
    from teaal_loops.matrix.stats import row_stats

    text = "uniform:rows=300,nnz=6000,seed=2"
    expected = auto.choose(row_stats(matrix.synthetic_from_string(text)), DeviceInfo.h100()).label
    assert expected != "merge_path"
    entries = [MatrixEntry("u", "custom", "synthetic", text=text)]
    doc = run_bench(BenchOptions(entries, [Variant(SPECS / "merge_path.yaml")], reps=3, warmup=0))
    labels = [r["label"] for r in doc["cases"][0]["results"]]
    assert labels == ["merge_path", expected]
    assert doc["cases"][0]["results"][1]["auto"] is True
    only = run_bench(BenchOptions(entries, [Variant(SPECS / "merge_path.yaml")], reps=3,
                                  warmup=0, only_auto=True))
    assert [r["label"] for r in only["cases"][0]["results"]] == [expected]
