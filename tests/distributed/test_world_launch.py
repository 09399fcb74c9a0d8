"""Host channels and the MPI-free launcher: rank variables, NCCL_NVLS_ENABLE=0, failures."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

from teaal_loops.distributed import DistributedError
from teaal_loops.distributed import world as w
from teaal_loops.distributed.device import check_unique_id
from teaal_loops.distributed.launch import launch, main, parse_devices, rank_environment


def test_file_channel_broadcasts_and_gathers(tmp_path: Path) -> None:
    size = 3
    results: dict[int, tuple[object, list[object]]] = {}

    def rank(r: int) -> None:
        ch = w.FileChannel(tmp_path, r, size, timeout_s=20)
        got = ch.bcast({"id": [1, -2, 3]} if r == 0 else None)
        every = ch.allgather(r * 10)
        ch.barrier()
        results[r] = (got, every)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(results[r] == ({"id": [1, -2, 3]}, [0, 10, 20]) for r in range(size))


def test_a_silent_peer_is_one_error_line(tmp_path: Path) -> None:
    ch = w.FileChannel(tmp_path, 1, 2, timeout_s=0.2)
    with pytest.raises(DistributedError, match="rank 0 did not answer"):
        ch.bcast(None)


def test_detect_world_reads_the_launcher_and_always_disables_nvls(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    env = {w.ENV_RANK: "1", w.ENV_SIZE: "2", w.ENV_DEVICE: "5", w.ENV_STORE: str(tmp_path)}
    world = w.detect_world(env)
    assert (world.rank, world.size, world.device, world.launcher) == (1, 2, 5, "launch")
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"
    solo = w.detect_world({})
    assert (solo.rank, solo.size, solo.launcher) == (0, 1, "solo")
    with pytest.raises(DistributedError, match=w.ENV_RANK):
        w.detect_world({**env, w.ENV_RANK: "2"})  # rank past the world
    with pytest.raises(DistributedError, match=w.ENV_STORE):
        w.detect_world({**env, w.ENV_STORE: str(tmp_path / "missing")})
    assert w.under_mpi({"PMI_SIZE": "3"}) and not w.under_mpi({"PMI_SIZE": "1"})


def test_rank_environment_forces_nvls_off_and_keeps_every_gpu_visible() -> None:
    env = rank_environment({"NCCL_NVLS_ENABLE": "1", "CUDA_VISIBLE_DEVICES": "0,1"}, 1, 2, 1, "/s")
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert (env[w.ENV_RANK], env[w.ENV_SIZE], env[w.ENV_DEVICE]) == ("1", "2", "1")
    assert parse_devices("3,2", 2) == [3, 2]
    with pytest.raises(DistributedError):
        parse_devices("0", 2)


RANK_SCRIPT = """
import json, os, sys
from teaal_loops.distributed.world import detect_world
world = detect_world()
every = world.channel.allgather([world.rank, os.environ["NCCL_NVLS_ENABLE"], world.device])
if world.rank == 0:
    open(sys.argv[1], "w").write(json.dumps(every))
sys.exit(int(sys.argv[2]) if world.rank == world.size - 1 else 0)
"""


def _script(tmp_path: Path) -> list[str]:
    path = tmp_path / "rank.py"
    path.write_text(RANK_SCRIPT)
    return [sys.executable, str(path)]


def test_launch_starts_every_rank_with_its_variables(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    env = dict(os.environ, NCCL_NVLS_ENABLE="1",
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    code = launch([*_script(tmp_path), str(out), "0"], 3, devices=[2, 1, 0], environ=env,
                  timeout_s=60)
    assert code == 0
    assert json.loads(out.read_text()) == [[0, "0", 2], [1, "0", 1], [2, "0", 0]]


def test_launch_returns_the_failing_ranks_status(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    code = launch([*_script(tmp_path), str(tmp_path / "o.json"), "3"], 2, environ=env,
                  timeout_s=60)
    assert code == 3


def test_launch_command_line_refuses_a_missing_command(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    assert main(["-n", "2", "--"]) == 2
    assert "no command" in capsys.readouterr().err


def test_a_malformed_nccl_unique_id_is_refused() -> None:
    assert check_unique_id([-128, 255] + [0] * 126) == (-128, 255, *([0] * 126))
    for bad in (None, [0] * 127, [0] * 127 + [256], [0] * 127 + ["1"]):
        with pytest.raises(DistributedError, match="unique id"):
            check_unique_id(bad)
