"""``teaal-loops explain``: the IR in words and JSON, load balance with a matrix, clean errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from teaal_loops.cli import main
from tests.conftest import REPO


@pytest.mark.parametrize(
    "name,kind",
    [
        ("thread_mapped", "thread_mapped"),
        ("group_mapped", "group_mapped"),
        ("work_oriented", "work_oriented"),
        ("merge_path", "merge_path"),
    ],
)
def test_json_names_the_schedule(name: str, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(REPO / "specs" / f"{name}.yaml"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schedule"] == kind


def test_synthetic_matrix_adds_load_balance(capsys: pytest.CaptureFixture[str]) -> None:
    spec = str(REPO / "specs" / "work_oriented.yaml")
    args = ["explain", spec, "--synthetic", "longrows:rows=2000,nnz=40000,seed=3",
            "--param", "WORK_PER_THREAD=16", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    lb = out["load_balance"]
    assert lb["max_atoms_per_thread"] <= 16
    assert lb["threads"] == -(-out["matrix"]["nnz"] // 16)
    assert out["matrix"]["rows"] == 2000


def test_matrix_market_file_and_text_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mtx = tmp_path / "tiny.mtx.gz"
    with gzip.open(mtx, "wt") as f:
        f.write("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n1 1\n2 1\n3 2\n")
    assert main(["explain", str(REPO / "specs" / "thread_mapped.yaml"), "-m", str(mtx)]) == 0
    text = capsys.readouterr().out
    assert "M0  space -> selects the thread" in text
    assert "3 x 3, 5 nonzeros" in text  # symmetric expansion: 2 off-diagonal entries mirrored


def test_unknown_param_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", str(REPO / "specs" / "merge_path.yaml"), "--param", "NOPE=3"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "NOPE" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "spec, layout, order",
    [("thread_mapped.yaml", "csc", "[K, M]"), ("work_oriented.yaml", "csc", "[K, M]"),
     ("layouts/csc/thread_mapped.yaml", "csr", "[M, K]")],
)
def test_a_layout_whose_tiles_run_the_other_way_names_the_spec_to_use(
    capsys: pytest.CaptureFixture[str], spec: str, layout: str, order: str
) -> None:
    """--layout csc on a spec that partitions rows would hand its splits to the columns."""
    rc = main(["explain", str(REPO / "specs" / spec), "--layout", layout])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert f"rank-order of A is {order}" in err and "specs/layouts/" in err
    assert "group-mapped" not in err.split(";")[0]  # not a confusing schedule message


def test_layouts_with_the_same_orientation_still_override(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["explain", str(REPO / "specs" / "work_oriented.yaml"), "--layout", "coo"])
    assert rc == 0 and "layout:    coo" in capsys.readouterr().out
