"""The exchange protocol with real MPI processes over host buffers (``mpiexec -n 2`` and
``-n 3``): plans negotiated over MPI equal the whole matrix's, and the distributed SpMV and
SpMM (SciPy standing in for the generated kernel; halo and allgather) equal the
single-process product on every rank (tests/distributed/mpi_rank.py); shards made by each rank
from a row-wise family, with halo lists learnt over MPI, equal the whole matrix's
(tests/distributed/mpi_generated_rank.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.distributed.conftest import find_mpiexec

RANK_PROGRAM = Path(__file__).with_name("mpi_rank.py")
GENERATED_PROGRAM = Path(__file__).with_name("mpi_generated_rank.py")
WORLD_PROGRAM = Path(__file__).with_name("mpi_world_rank.py")
MPI_CASES = [
    (2, "rmat", 3000, 30000, 1),
    (3, "banded", 3000, 30000, 2),
    (3, "emptyrows", 800, 6000, 3),
    (3, "uniform", 2, 3, 0),  # more ranks than rows: a rank owns nothing
]


def _mpiexec(ranks: int, program: list[str]) -> str:
    """Run ``program`` on ``ranks`` MPI processes; its output, after asserting it succeeded."""
    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip("mpiexec not found: pip install '.[test]' installs it (the mpich wheel)")
    pytest.importorskip("mpi4py", reason="mpi4py is not installed: pip install '.[test]'")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env["NCCL_NVLS_ENABLE"] = "0"
    proc = subprocess.run(
        [mpiexec, "-n", str(ranks), sys.executable, *program],
        capture_output=True, text=True, timeout=60, env=env, cwd=REPO,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return out


@pytest.mark.parametrize(("ranks", "kind", "rows", "nnz", "seed"), MPI_CASES)
def test_protocol_under_mpiexec(ranks: int, kind: str, rows: int, nnz: int, seed: int) -> None:
    out = _mpiexec(ranks, [str(RANK_PROGRAM), kind, str(rows), str(nnz), str(seed)])
    for r in range(ranks):
        assert f"rank {r}/{ranks}: OK" in out, out


GENERATED_CASES = [
    (2, "powerlaw:rows=3000,nnz=40000,seed=4", 700),
    (3, "powerlaw:rows=2500,cols=4000,nnz=30000,seed=6", 1000),
    (3, "banded:rows=2000,nnz=30000,seed=1", 500),
    (3, "powerlaw:rows=2,cols=50,nnz=6,seed=1", 5),  # a rank owns no rows
]


@pytest.mark.parametrize(("ranks", "family", "chunk"), GENERATED_CASES)
def test_generated_shards_under_mpiexec(ranks: int, family: str, chunk: int) -> None:
    """Each rank makes its own shard and learns its halo lists by asking the owners over MPI
    (tests/distributed/mpi_generated_rank.py)."""
    out = _mpiexec(ranks, [str(GENERATED_PROGRAM), family, str(chunk)])
    for r in range(ranks):
        assert f"rank {r}/{ranks}: OK" in out, out


@pytest.mark.parametrize("ranks", [2, 3])
def test_mpi_start_up_broadcasts_the_nccl_id(ranks: int) -> None:
    """``run --distributed`` under ``mpiexec`` up to NCCL's join: the world detected, NVLS
    off, rank 0's id broadcast and checked (tests/distributed/mpi_world_rank.py)."""
    out = _mpiexec(ranks, [str(WORLD_PROGRAM)])
    for r in range(ranks):
        assert f"rank {r}/{ranks}: OK local" in out, out
