"""Runtime pieces that need no GPU: the one-line DeviceError, validation arithmetic, compile()."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import teaal_loops.pipeline as pipeline
from teaal_loops.cli import main
from teaal_loops.errors import ParameterError
from teaal_loops.runtime import validation

REPO = Path(__file__).resolve().parents[2]
HAS_CUPY = importlib.util.find_spec("cupy") is not None


@pytest.mark.skipif(HAS_CUPY, reason="checks the message shown where CuPy is missing")
def test_run_without_cupy_says_so_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    spec = str(REPO / "specs" / "merge_path.yaml")
    rc = main(["run", spec, "--synthetic", "uniform:rows=10,nnz=20"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    # the cause first, then the install command that works from a checkout (the package is
    # not on the index), and "error:" once
    assert err.startswith("error: CuPy is not importable (") and err.count("error:") == 1
    assert "pip install '.[cuda13]'" in err and "teaal-loops[cuda13]" not in err


def test_without_a_device_the_cause_comes_first_and_no_install_is_advised(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import types

    from teaal_loops.runtime import backend

    class NoDriver:
        @staticmethod
        def getDeviceCount() -> int:  # noqa: N802 - CuPy's name
            raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")

    fake = types.ModuleType("cupy")  # hashable, as CuPy's module is
    fake.cuda = types.SimpleNamespace(runtime=NoDriver)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", fake)
    backend._device_count.cache_clear()
    try:
        reason = backend.unavailable_reason()
        rc = main(["run", str(REPO / "specs" / "merge_path.yaml"), "--synthetic",
                   "uniform:rows=10,nnz=20"])
    finally:
        backend._device_count.cache_clear()
    assert reason is not None and reason.startswith("no usable CUDA device or driver")
    assert "cudaErrorInsufficientDriver" in reason and "pip install" not in reason
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == f"error: {reason}"


def test_a_device_error_says_error_once_in_a_traceback() -> None:
    from teaal_loops.errors import DeviceError

    err = DeviceError("no CUDA device found")
    assert str(err) == "no CUDA device found" and err.cli_line() == "error: no CUDA device found"


def test_compile_needs_no_gpu_and_exposes_the_source() -> None:
    k = pipeline.compile(REPO / "specs" / "group_mapped.yaml", dtype="f64", params={"BLOCK_SIZE": 16})
    assert "#define TEAAL_GROUP_SIZE 16" in k.source
    assert "typedef double value_t;" in k.source
    assert not k.accumulates
    assert pipeline.compile(REPO / "specs" / "work_oriented.yaml").accumulates


def test_compile_refuses_unknown_parameters() -> None:
    with pytest.raises(ParameterError):
        pipeline.compile(REPO / "specs" / "merge_path.yaml", params={"NOPE": 3})


def test_count_errors_uses_atol_and_rtol_and_counts_nan() -> None:
    ref = np.array([0.0, 100.0, 1.0, 5.0])
    y = np.array([0.0099, 100.0 + 0.0099 + 0.099, np.nan, 5.2])
    assert validation.count_errors(y, ref) == 2  # the NaN and the 0.2 miss


def test_wilkinson_bound_per_row() -> None:
    A = sp.csr_matrix(np.array([[1.0, -2.0, 0.0], [0.0, 0.0, 0.0], [1e6, 1e6, 1e6]]))
    x = np.array([1.0, 1.0, -1.0])
    bound = validation.wilkinson_bound(A, x, "float32")
    assert bound[0] == pytest.approx(1e-3)  # the floor
    assert bound[1] == pytest.approx(1e-3)
    assert bound[2] == pytest.approx(8 * 3 * 2.0**-24 * 3e6)


def test_rigorous_verdicts() -> None:
    rng = np.random.default_rng(0)
    A = sp.random(200, 100, density=0.1, format="csr", random_state=1)
    x = rng.uniform(-1, 1, 100).astype(np.float32)
    good = (A.astype(np.float32) @ x).astype(np.float32)
    report = validation.rigorous(A, x, good, "float32")
    assert report.verdict == "NOT_A_BUG" and report.gpu_overruns == 0
    assert report.baseline_overruns == 0
    bad = good.copy()
    bad[7] += 1.0
    bad[9] = np.nan
    report = validation.rigorous(A, x, bad, "float32")
    assert report.gpu_overruns == 2 and report.verdict == "POTENTIAL_BUG"
    assert report.naive_mismatches == 2
    lines = report.lines()
    assert [line.split(":")[0] for line in lines] == [
        "WilkinsonK", "NaiveMismatches", "F32BaselineOverruns", "GPUOverruns", "MaxAbsError",
        "MaxRelError", "Verdict",
    ]


def test_random_vector_is_never_all_zero() -> None:
    x = validation.random_vector(1000, "float32", seed=3)
    assert x.dtype == np.float32 and np.count_nonzero(x) == 1000
