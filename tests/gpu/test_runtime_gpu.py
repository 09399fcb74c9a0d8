"""The CuPy runtime: input kinds, reuse, zeroing, bad input, memory, caching, 64-bit, CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import teaal_loops.pipeline as pipeline
from teaal_loops.errors import DeviceError, MatrixError
from tests.conftest import REPO
from tests.gpu import cases

pytestmark = pytest.mark.gpu


def _matrix(rows: int = 300, cols: int = 200, density: float = 0.05) -> sp.csr_matrix:
    return sp.random(rows, cols, density=density, format="csr", random_state=5, dtype=np.float64)


@pytest.mark.parametrize("case", ["thread_mapped", "group_mapped", "work_oriented", "merge_path"])
def test_accepts_scipy_cupyx_numpy_and_cupy_and_returns_cupy(case: str) -> None:
    import cupy
    import cupyx.scipy.sparse as csp

    A = _matrix()
    x = cases.random_x(A.shape[1], "float64")
    ref = A @ x
    k = cases.kernel(case, "float64")
    for matrix in (A, A.tocoo(), A.toarray(), csp.csr_matrix(A), cupy.asarray(A.toarray())):
        for vector in (x, cupy.asarray(x)):
            y = k(matrix, vector)
            assert isinstance(y, cupy.ndarray) and y.dtype == np.float64
            np.testing.assert_allclose(y.get(), ref, rtol=1e-12, atol=1e-12)


def test_prepared_matrix_is_reused_without_upload() -> None:
    k = cases.kernel("merge_path", "float32")
    A = _matrix()
    prepared = k.prepare(A)
    arrays = dict(prepared.matrix.arrays)
    x = cases.random_x(A.shape[1], "float32")
    first = k(prepared, x).get()
    second = k(prepared, x).get()
    assert k.prepare(prepared) is prepared
    assert all(prepared.matrix.arrays[n] is a for n, a in arrays.items())
    np.testing.assert_allclose(first, second, rtol=1e-6)


@pytest.mark.parametrize("case", ["work_oriented", "merge_path"])
def test_accumulating_schedules_rezero_a_reused_output(case: str) -> None:
    k = cases.kernel(case, "float64")
    A = _matrix()
    x = cases.random_x(A.shape[1], "float64")
    y = k(A, x)
    k(A, x, out=y)  # must not add onto the previous result
    np.testing.assert_allclose(y.get(), A @ x, rtol=1e-12, atol=1e-12)


def test_store_schedules_write_every_row_of_a_poisoned_output() -> None:
    import cupy

    k = cases.kernel("thread_mapped", "float32")
    A = _matrix()
    A[3, :] = 0
    A.eliminate_zeros()
    y = cupy.full(A.shape[0], cupy.nan, dtype=cupy.float32)
    k(A, cases.random_x(A.shape[1], "float32"), out=y)
    assert not cupy.isnan(y).any()
    assert float(y[3]) == 0.0


def _device_csr(indptr: list[int], indices: list[int], shape: tuple[int, int]) -> object:
    import cupy
    import cupyx.scipy.sparse as csp

    data = cupy.ones(len(indices), dtype=cupy.float32)
    return csp.csr_matrix(
        (data, cupy.asarray(indices, dtype=cupy.int32), cupy.asarray(indptr, dtype=cupy.int32)),
        shape=shape,
    )


def test_device_matrix_with_column_out_of_range_is_refused_before_launch() -> None:
    k = cases.kernel("thread_mapped", "float32")
    bad = _device_csr([0, 1, 2], [0, 7], (2, 3))
    with pytest.raises(MatrixError, match="row 1 has column index 7"):
        k(bad, np.ones(3, np.float32))


def test_device_matrix_with_decreasing_offsets_is_refused() -> None:
    k = cases.kernel("merge_path", "float32")
    bad = _device_csr([0, 2, 1, 3], [0, 1, 2], (3, 3))
    with pytest.raises(MatrixError, match="decrease at row 1"):
        k(bad, np.ones(3, np.float32))


def test_host_matrix_with_bad_index_is_refused() -> None:
    A = sp.csr_matrix((np.ones(2), np.array([0, 9]), np.array([0, 1, 2])), shape=(2, 3))
    with pytest.raises(MatrixError):
        cases.kernel("work_oriented", "float32")(A, np.ones(3, np.float32))


def test_vector_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(MatrixError, match="200 columns"):
        cases.kernel("group_mapped", "float32")(_matrix(), np.ones(199, np.float32))


def test_matrix_too_large_for_the_device_is_a_device_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import teaal_loops.runtime.device_matrix as device_matrix

    monkeypatch.setattr(device_matrix, "free_device_bytes", lambda: 1024)
    with pytest.raises(DeviceError, match="GiB of GPU memory"):
        cases.kernel("thread_mapped", "float32").prepare(_matrix())


@pytest.mark.parametrize("case", ["thread_mapped", "group_mapped", "work_oriented", "merge_path"])
def test_64_bit_offsets_kernel_runs(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The int64-offset build, forced on a small matrix (2^31 nonzeros do not fit here)."""
    binding = sys.modules["teaal_loops.schedules.binding"]
    monkeypatch.setattr(binding, "index_bits", lambda rows, nnz: 64)
    k = pipeline.compile(REPO / "specs" / f"{case}.yaml", dtype="float64")
    A = _matrix(500, 400, 0.02)
    prepared = k.prepare(A)
    assert prepared.bound.index_bits == 64
    assert prepared.matrix.arrays["indptr"].dtype == np.int64
    assert "typedef long long offset_t;" in prepared.source
    x = cases.random_x(400, "float64")
    np.testing.assert_allclose(k(prepared, x).get(), A @ x, rtol=1e-12, atol=1e-12)


def test_second_process_compiles_nothing(tmp_path: Path) -> None:
    script = (
        "import numpy as np, scipy.sparse as sp, teaal_loops.pipeline as pipeline\n"
        f"k = pipeline.compile({str(REPO / 'specs' / 'merge_path.yaml')!r}, dtype='float32')\n"
        "A = sp.random(100, 100, density=0.1, format='csr', random_state=1)\n"
        "print(float(k(A, np.ones(100, np.float32)).sum()))\n"
    )
    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO))

    def run() -> list[Path]:
        subprocess.run([sys.executable, "-c", script], env=env, check=True, cwd=REPO)
        return sorted(p for p in (tmp_path / "cache").rglob("*") if p.is_file())

    first = run()
    assert first, "the first process left no compiled module in the disk cache"
    mtimes = {p: p.stat().st_mtime_ns for p in first}
    second = run()
    assert second == first
    assert {p: p.stat().st_mtime_ns for p in second} == mtimes


def test_run_command_prints_times_and_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    from teaal_loops.cli import main

    rc = main(
        [
            "run",
            str(REPO / "specs" / "merge_path.yaml"),
            "--synthetic",
            "rmat:rows=4096,nnz=40000,seed=1",
            "--validate",
            "--rigorous",
            "--repeat",
            "5",
            "-v",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    lines = dict(line.split(": ", 1) for line in out.strip().splitlines())
    assert lines["Dimensions"].startswith("4096 x 4096 (")
    assert float(lines["Elapsed (ms)"]) > 0
    assert lines["Errors"] == "0"
    assert lines["GPUOverruns"] == "0"
    assert lines["Verdict"] == "NOT_A_BUG"
    for key in ("Matrix", "WilkinsonK", "NaiveMismatches", "F32BaselineOverruns", "MaxAbsError",
                "MaxRelError"):
        assert key in lines
