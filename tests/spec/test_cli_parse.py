"""``teaal-loops parse``: JSON on stdout, warnings and errors on stderr, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from teaal_loops.cli import main

REPO = Path(__file__).resolve().parents[2]

GROUP_MAPPED = """\
einsum:
  declaration:
    A: [M, K]
    B: [K]
    Z: [M]
  expressions:
    - Z[m] = A[m, k] * B[k]
mapping:
  partitions: {}
  partitioning:
    Z:
      M: [uniform_shape(TILES), uniform_shape(GRID)]
      K: [uniform_occupancy(A.BLOCK)]
  loop-order:
    Z: [M2, M1, M0, K1, K0]
  spacetime:
    Z:
      space: [M0, K0.coord]
      time: [M2, M1, K1]
x-teaal-loops:
  schedule: group_mapped
"""


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    f = tmp_path / "group.yaml"
    f.write_text(GROUP_MAPPED, encoding="utf-8")
    return f


def test_parse_prints_the_normalized_spec(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["parse", str(spec_file)]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    (e,) = data["einsums"]
    assert e["text"] == "Z[m] = A[m, k] * B[k]"
    assert e["final_ranks"] == ["M2", "M1", "M0", "K1", "K0"]
    assert e["expr"]["op"] == "intersect"
    assert [f["tensor"] for f in e["expr"]["factors"]] == ["A", "B"]
    assert data["declaration"] == {"A": ["M", "K"], "B": ["K"], "Z": ["M"]}
    assert data["mapping"]["rank-order"]["A"] == ["M", "K"]
    m, k = data["mapping"]["partitioning"]["Z"]
    assert [f["size"] for f in m["functions"]] == ["TILES", "GRID"]
    assert m["produces"] == ["M2", "M1", "M0"]
    assert k["functions"][0] == {
        "kind": "uniform_occupancy",
        "text": "uniform_occupancy(A.BLOCK)",
        "size": "BLOCK",
        "leader": "A",
        "target": None,
        "extension": False,
    }
    assert data["mapping"]["loop-order"] == {"Z": ["M2", "M1", "M0", "K1", "K0"]}
    assert data["mapping"]["spacetime"]["Z"]["space"] == [
        {"rank": "M0", "style": "pos"},
        {"rank": "K0", "style": "coord"},
    ]
    assert data["parameters"] == ["TILES", "GRID", "BLOCK"]
    assert data["x-teaal-loops"]["schedule"] == "group_mapped"
    (w,) = data["warnings"]
    assert w["key_path"] == "mapping.partitions" and w["line"] == 9 and w["column"] == 3
    # The warning also goes to stderr, located.
    assert f"{spec_file}:9:3: warning: mapping.partitions: unknown key 'partitions'" in err


def test_parse_strict_rejects_extensions(
    spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["parse", "--strict", str(spec_file)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"{spec_file}:20:1: error: x-teaal-loops: ")
    assert "teaal-loops extension" in err


def test_parse_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GROUP_MAPPED.replace("A[m, k] * B[k]", "A[m, k] \u2217 B[k]"), encoding="utf-8")
    assert main(["parse", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"{bad}:7:22: error: einsum.expressions[0]: unexpected character")


def test_parse_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(tmp_path / "nope.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "teaal_loops", "parse", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


def test_subprocess_bad_inputs_never_show_a_traceback(tmp_path: Path) -> None:
    cases = {
        "syntax.yaml": "einsum: [unclosed\n",
        "list.yaml": "- 1\n- 2\n",
        "types.yaml": "einsum:\n  declaration: {A: 3}\n  expressions: ['Z[] = a']\n",
        "binary.yaml": "einsum:\n  x: \x00\n",
    }
    for name, text in cases.items():
        f = tmp_path / name
        f.write_text(text, encoding="utf-8")
        proc = _run(str(f))
        assert proc.returncode == 2, (name, proc.stderr)
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith(f"{f}:"), proc.stderr
        assert ": error: " in proc.stderr
        assert proc.stdout == ""


def test_subprocess_good_spec(spec_file: Path) -> None:
    proc = _run(str(spec_file))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["final_ranks"] == {"Z": ["M2", "M1", "M0", "K1", "K0"]}
    assert "warning: mapping.partitions" in proc.stderr
