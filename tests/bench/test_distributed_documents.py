"""The distributed runs BENCHMARKS.md quotes (benchmarks/distributed_x2_*.json.gz, each a
``run --distributed --report`` document from two H200s): the speedups and times the text
prints are the documents', the 1e9 matrices have at least 1e9 nonzeros, every rank's rows
passed the float64 check, and the matrix said not to fit one GPU does not."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TEXT = (REPO / "BENCHMARKS.md").read_text()
DOCS = sorted((REPO / "benchmarks").glob("distributed_x2_*.json.gz"))
ONE_H200_BYTES = 143771 * 2**20  # nvidia-smi's memory.total on the machine that ran them


def _doc(name: str) -> dict[str, Any]:
    with gzip.open(REPO / "benchmarks" / f"distributed_x2_{name}.json.gz", "rt") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def test_every_distributed_document_is_quoted() -> None:
    assert DOCS
    for path in DOCS:
        assert f"benchmarks/{path.name}" in TEXT, path.name


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_rank_passed_the_float64_check(path: Path) -> None:
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    assert "H200" in doc["device"]
    assert len(doc["per_rank"]) == doc["ranks"]
    assert sum(r["nnz"] for r in doc["per_rank"]) == doc["nnz"]
    assert all(r["check"]["overruns"] == 0 for r in doc["per_rank"])


@pytest.mark.parametrize("matrix", ["banded", "power-law"])
def test_the_quoted_speedups_are_the_documents(matrix: str) -> None:
    name = matrix.replace("-", "")
    one, two = _doc(f"{name}_p1"), _doc(f"{name}_p2")
    assert one["ranks"] == 1 and two["ranks"] == 2 and one["matrix"] == two["matrix"]
    assert one["nnz"] >= 1e9 and one["repeat"] == two["repeat"] == 100
    row = re.search(rf"^\| {re.escape(matrix)} \| ([0-9,]+) \| ([0-9.]+) \| ([0-9.]+) \| "
                    r"\*\*([0-9.]+)x\*\*", TEXT, re.M)
    assert row is not None
    assert int(row.group(1).replace(",", "")) == one["nnz"]
    assert float(row.group(2)) == pytest.approx(one["mean_ms"], abs=5e-4)
    assert float(row.group(3)) == pytest.approx(two["mean_ms"], abs=5e-4)
    speedup = one["mean_ms"] / two["mean_ms"]
    assert float(row.group(4)) == pytest.approx(speedup, abs=0.005)
    assert speedup >= 1.8  # the target, as measured


def test_the_large_matrix_does_not_fit_one_gpu() -> None:
    doc = _doc("huge_p2")
    value_bytes = {"f32": 4, "f64": 8}[doc["dtype"]]
    offsets = 8 * (doc["rows"] + 1)  # 64-bit: past 2^31 nonzeros
    assert doc["nnz"] * (value_bytes + 4) + offsets > ONE_H200_BYTES
    assert doc["ranks"] == 2
