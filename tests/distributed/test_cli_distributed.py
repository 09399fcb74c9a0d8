"""``explain --ranks P`` and the distributed flags of ``run`` and ``launch`` on the command
line: what they print, and one line with exit status 2 for every misuse."""

from __future__ import annotations

import json

import pytest

from teaal_loops.cli import main
from teaal_loops.runtime.backend import gpu_available
from tests.conftest import REPO

SPEC = "specs/merge_path.yaml"
BANDED = "banded:rows=3000,nnz=30000,seed=1"
DEVICE = "powerlaw:rows=3000,nnz=30000,seed=1"


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def test_explain_ranks_prints_partition_load_and_exchange(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    assert main(["explain", SPEC, "--synthetic", BANDED, "--ranks", "3"]) == 0
    out = capsys.readouterr().out
    assert "Distributed over 3 ranks" in out
    assert "allgather:" in out and "halo:" in out and "chosen:    halo" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    table = [r for r in rows if len(r) == 8]
    assert [int(r[0]) for r in table] == [0, 1, 2]
    assert sum(int(r[1]) for r in table) == 3000


def test_explain_ranks_json_and_forced_exchange(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "specs/spmm/lanes_over_n.yaml", "--synthetic",
                 "rmat:rows=2000,nnz=20000,seed=3", "--rank", "N=4", "--ranks", "2",
                 "--exchange", "halo", "--gpus-per-node", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["distributed"]
    assert doc["ranks"] == 2 and doc["exchange"] == "halo" and doc["forced"]
    assert doc["entry_bytes"] == 16  # f32 x 4 columns of B
    assert doc["fabric"]["nodes"] == 2
    assert sum(s["rows"][1] - s["rows"][0] for s in doc["shards"]) == 2000
    volume = doc["volume"]
    assert sum(volume["halo_recv_entries"]) == sum(volume["halo_send_entries"]) > 0


def test_explain_plans_a_generated_matrix_on_the_cpu(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    """explain --device-synthetic makes the whole matrix on the host: the same matrix, so the
    same partition, as the ranks of a run would make shard by shard."""
    import numpy as np

    from teaal_loops.distributed.generated import partition_family
    from teaal_loops.matrix import rowwise

    assert main(["explain", SPEC, "--device-synthetic", DEVICE, "--ranks", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["distributed"]
    want = partition_family(np, rowwise.parse_family(DEVICE), 3)
    assert [s["rows"] for s in doc["shards"]] == [list(want.rows_of(r)) for r in range(3)]
    assert sum(s["nnz"] for s in doc["shards"]) == int(want.nnz.sum())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain", SPEC, "--ranks", "2"], "--ranks needs a matrix"),
        (["explain", SPEC, "--synthetic", BANDED, "--ranks", "0"], "--ranks 0"),
        (["explain", "specs/sddmm/thread_per_nonzero.yaml", "--synthetic", BANDED,
          "--ranks", "2"], "distributed runs take SpMV and SpMM"),
        (["launch", "-n", "2"], "give the command after --"),
        (["run", SPEC, "--device-synthetic", DEVICE], "it needs --distributed"),
        (["run", SPEC, "--synthetic", BANDED, "--report", "r.json"], "it needs --distributed"),
        (["run", SPEC, "--device-synthetic", DEVICE, "--distributed", "--report",
          "no/such/folder/r.json"], "its folder does not exist"),
        (["run", SPEC, "--device-synthetic", "cube:rows=9,nnz=9", "--distributed"],
         "unknown kind 'cube'"),
        (["run", SPEC, "--device-synthetic", "banded:rows=2e9x,nnz=9", "--distributed"],
         "is not a number"),
        (["run", "specs/sddmm/thread_per_nonzero.yaml", "--device-synthetic", DEVICE,
          "--distributed"], "distributed runs take SpMV and SpMM"),
        (["run", SPEC, "--device-synthetic", DEVICE, "--distributed", "--rank", "N=4"],
         "is SpMV, which has no dense rank"),
        (["run", SPEC, "--device-synthetic", DEVICE, "--distributed", "--schedule", "auto"],
         "schedule auto chooses from the whole matrix"),
        (["run", SPEC, "--device-synthetic", DEVICE, "--distributed", "--layout", "ell"],
         "layout ell is not supported"),
        (["explain", SPEC, "--device-synthetic", "powerlaw:rows=2e9,nnz=4e12", "--ranks", "4"],
         "on the host needs about"),
        (["launch", "-n", "2", "--devices", "0", "--", "parse", SPEC], "--devices"),
    ],
)
def test_misuse_is_one_line_and_status_2(argv: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


@pytest.mark.skipif(gpu_available(), reason="checks the message a machine without a GPU gets")
def test_run_distributed_without_a_gpu_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", SPEC, "--synthetic", BANDED, "--distributed"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err


def test_launch_runs_teaal_loops_commands_on_every_rank(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    assert main(["launch", "-n", "2", "--timeout", "120", "--", "parse", SPEC]) == 0
