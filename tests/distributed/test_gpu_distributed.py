"""The GPU path: the generated kernel's blocks on one GPU, a world of one through NCCL, and
``teaal-loops launch -n 2`` over NCCL (NCCL_NVLS_ENABLE=0) where two GPUs are visible; each
distributed result within the Wilkinson bound of float64 and of the single-GPU kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from teaal_loops import matrix, pipeline
from teaal_loops.distributed import ALLGATHER, HALO, partition_rows, shard_matrix
from teaal_loops.distributed.device import KernelBlocks
from tests.conftest import REPO

pytestmark = pytest.mark.gpu

SPMV_SPECS = ["thread_mapped", "group_mapped", "work_oriented", "merge_path"]
MATRIX = "rmat:rows=20000,nnz=200000,seed=5"


@pytest.mark.parametrize("name", SPMV_SPECS)
@pytest.mark.parametrize("exchange", [HALO, ALLGATHER])
def test_kernel_blocks_compute_each_shard(name: str, exchange: str) -> None:
    import cupy

    A = matrix.synthetic("rmat", rows=5000, nnz=50000, seed=2)
    kernel = pipeline.compile_for(f"{REPO}/specs/{name}.yaml", A, dtype="float64")
    part = partition_rows(A, 3)
    x = np.random.default_rng(0).uniform(-1, 1, A.shape[1])
    want = A @ x
    block = part.max_owned_cols
    gathered = np.zeros(3 * block)
    for q in range(3):
        a, b = part.cols_of(q)
        gathered[q * block : q * block + b - a] = x[a:b]
    for r in range(3):
        s = shard_matrix(A, part, r)
        blocks = KernelBlocks(kernel, s, s.offd_for(exchange, part), None)
        y = cupy.full(s.local_rows, np.nan)
        blocks.diag(cupy.asarray(x[slice(*s.cols)]), y)
        operand = x[s.ghost_cols] if exchange == HALO else gathered
        blocks.offd_add(cupy.asarray(operand), y)
        np.testing.assert_allclose(y.get(), want[slice(*s.rows)], rtol=1e-10, atol=1e-10)


def _run(argv: list[str]) -> str:
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    proc = subprocess.run([sys.executable, "-m", "teaal_loops", *argv], capture_output=True,
                          text=True, timeout=600, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_a_world_of_one_runs_through_nccl(tmp_path: object) -> None:
    report = f"{tmp_path}/run.json"
    out = _run(["run", "specs/merge_path.yaml", "--synthetic", MATRIX, "--distributed",
                "--rigorous", "--repeat", "5", "--report", report])
    assert "Ranks: 1" in out and "Verdict: NOT_A_BUG" in out
    assert "SingleGPUDisagreements: 0" in out
    doc = json.loads(open(report).read())
    assert doc["ranks"] == 1 and doc["nnz"] > 0 and doc["repeat"] == 5
    assert doc["mean_ms"] > 0 and len(doc["per_rank"]) == 1


def _two_gpus() -> None:
    import cupy

    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs (nvidia-h200-x2)")


@pytest.mark.parametrize("name", SPMV_SPECS)
@pytest.mark.parametrize("exchange", [HALO, ALLGATHER])
def test_two_ranks_agree_with_one_gpu(name: str, exchange: str) -> None:
    _two_gpus()
    out = _run(["launch", "-n", "2", "--timeout", "500", "--", "run", f"specs/{name}.yaml",
                "--synthetic", MATRIX, "--distributed", "--rigorous", "--exchange", exchange,
                "--repeat", "5", "-v"])
    assert "Ranks: 2 (launch" in out and f"Exchange: {exchange} (asked for)" in out
    assert "Verdict: NOT_A_BUG" in out and "SingleGPUDisagreements: 0" in out


@pytest.mark.parametrize("exchange", [HALO, ALLGATHER])
def test_two_ranks_spmm(exchange: str) -> None:
    _two_gpus()
    out = _run(["launch", "-n", "2", "--timeout", "500", "--", "run",
                "specs/spmm/lanes_over_n.yaml", "--synthetic", MATRIX, "--rank", "N=8",
                "--distributed", "--rigorous", "--exchange", exchange, "--repeat", "5"])
    assert "Verdict: NOT_A_BUG" in out and "SingleGPU: agrees" in out


def test_calibration_fits_the_links() -> None:
    _two_gpus()
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    proc = subprocess.run(
        [sys.executable, "-m", "teaal_loops.distributed.launch", "-n", "2", "--timeout", "300",
         "--", sys.executable, "-m", "teaal_loops.distributed.calibrate", "--repeat", "5",
         "--max-bytes", str(1 << 22)],
        capture_output=True, text=True, timeout=400, cwd=REPO, env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ranks"] == 2 and len(doc["sizes"]) >= 5
    assert doc["allgather_fit"]["beta_gbs"] > 1 and doc["halo_fit"]["beta_gbs"] > 1


GENERATED = "powerlaw:rows=30000,nnz=400000,seed=5"


@pytest.mark.parametrize("text", [GENERATED, "banded:rows=20000,nnz=300000,seed=2"])
def test_shards_made_on_the_gpu_equal_the_whole_matrix_shards(text: str) -> None:
    import cupy

    from teaal_loops.distributed.generated import ShardBuilder, partition_family
    from teaal_loops.matrix import rowwise
    from teaal_loops.matrix.csr_arrays import CsrArrays

    family = rowwise.parse_family(text)
    whole = CsrArrays(*rowwise.generate_rows(family, 0, family.rows, np.float32, xp=cupy),
                      (family.rows, family.cols)).to_scipy()  # made on the same device
    part = partition_family(cupy, family, 3, group_size=2, chunk=5000)
    for rank in range(3):
        builder = ShardBuilder(cupy, family, part, rank, chunk=7777)
        want = shard_matrix(whole, part, rank)
        for kind in (HALO, ALLGATHER):
            shard = builder.build(kind, np.float32)
            for got, expected in ((shard.diag, want.diag), (shard.offd, want.offd_for(kind, part))):
                g = got.to_scipy()
                assert g.shape == expected.shape
                assert np.array_equal(g.indptr, expected.indptr)
                assert np.array_equal(g.indices, expected.indices)
                assert np.array_equal(g.data, expected.data)


def test_a_generated_matrix_in_a_world_of_one() -> None:
    out = _run(["run", "specs/merge_path.yaml", "--device-synthetic", GENERATED, "--distributed",
                "--rigorous", "--repeat", "5", "-v"])
    assert "Ranks: 1" in out and "Exchange: none" in out and "Verdict: NOT_A_BUG" in out
    assert "GPUOverruns: 0" in out


@pytest.mark.parametrize("name", ["thread_mapped", "merge_path"])
@pytest.mark.parametrize("exchange", [HALO, ALLGATHER])
def test_two_ranks_generate_their_shards(name: str, exchange: str, tmp_path: object) -> None:
    _two_gpus()
    report = f"{tmp_path}/run.json"
    out = _run(["launch", "-n", "2", "--timeout", "500", "--", "run", f"specs/{name}.yaml",
                "--device-synthetic", GENERATED, "--distributed", "--rigorous", "--exchange",
                exchange, "--repeat", "5", "--report", report, "--dtype", "f64"])
    assert "Ranks: 2 (launch" in out and "Verdict: NOT_A_BUG" in out
    doc = json.loads(open(report).read())
    assert doc["exchange"] == exchange and doc["forced"] and doc["ranks"] == 2
    assert sum(r["nnz"] for r in doc["per_rank"]) == doc["nnz"]
    assert all(r["check"]["overruns"] == 0 for r in doc["per_rank"])


def test_generated_spmm_in_a_world_of_one_and_on_two_ranks(tmp_path: object) -> None:
    out = _run(["run", "specs/spmm/lanes_over_n.yaml", "--device-synthetic", GENERATED,
                "--rank", "N=8", "--distributed", "--rigorous", "--repeat", "5"])
    assert "B and Z of 8 columns" in out and "Verdict: NOT_A_BUG" in out
    _two_gpus()
    for exchange in (HALO, ALLGATHER):
        out = _run(["launch", "-n", "2", "--timeout", "500", "--", "run",
                    "specs/spmm/lanes_over_n_vec.yaml", "--device-synthetic", GENERATED,
                    "--rank", "N=32", "--distributed", "--rigorous", "--exchange", exchange,
                    "--repeat", "5"])
        assert "Ranks: 2 (launch" in out and "Verdict: NOT_A_BUG" in out


def test_the_transport_stream_runs_at_high_priority() -> None:
    """The exchange's stream outranks the caller's, so NCCL's few-block kernels are placed
    beside the diagonal block's instead of after it (teaal_loops.distributed.device)."""
    from teaal_loops.distributed.device import NcclTransport, nccl_communicator
    from teaal_loops.distributed.world import detect_world

    transport = NcclTransport(nccl_communicator(detect_world({})), np.float32)
    assert transport.stream.priority < 0  # below 0 is above the default
