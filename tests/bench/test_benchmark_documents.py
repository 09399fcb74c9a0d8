"""The measured documents that BENCHMARKS.md quotes (benchmarks/*.json.gz): each is a valid
schema-2 bench document made on the GPU the text names, and the best-over-cuSPARSE geomean the
text prints for each SpMV document is the one its cases give."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from teaal_loops.bench.schema import read_document, version

REPO = Path(__file__).resolve().parents[2]
BENCH_DOCS = sorted((REPO / "benchmarks").glob("*_h[12]00*.json.gz"))
BENCH_DOCS = [p for p in BENCH_DOCS if not p.name.startswith("api_")]
TEXT = (REPO / "BENCHMARKS.md").read_text()


def test_every_measured_document_is_quoted() -> None:
    assert BENCH_DOCS, "benchmarks/ holds no measured documents"
    for path in BENCH_DOCS:
        assert f"benchmarks/{path.name}" in TEXT or path.name in TEXT, path.name


@pytest.mark.parametrize("path", BENCH_DOCS, ids=lambda p: p.name)
def test_documents_are_schema_2_from_the_named_gpu(path: Path) -> None:
    doc = read_document(path)  # checks the schema
    assert version(doc) == 2
    gpu = "H200" if "_h200" in path.name else "H100"
    assert gpu in doc["device"]["name"]
    assert doc["cases"] and all(c.get("best") for c in doc["cases"] if c.get("results"))


SPMV_COLUMNS = ["spmv_h100_f32", "spmv_h100_f64", "spmv_h200_f32", "spmv_h200_f64"]


@pytest.mark.parametrize("name", SPMV_COLUMNS)
def test_the_quoted_spmv_geomean_is_the_documents(name: str) -> None:
    doc = read_document(REPO / "benchmarks" / f"{name}.json.gz")
    ratios = [c["best"]["speedup"]["kernel"] for c in doc["cases"]]
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    row = re.search(r"^\| \*\*geomean\*\* \|(.*)\|$", TEXT, re.M)
    assert row is not None
    quoted = float(row.group(1).split("|")[SPMV_COLUMNS.index(name)].strip(" *x"))
    assert quoted == pytest.approx(geomean, abs=0.005)


LATEST_COLUMNS = {  # document: (the geomean row's label, its column)
    "spmv_h100_f32_publish": ("geomean, latest", 2),
    "spmv_h100_f64_publish": ("geomean, latest", 3),
    "spmv_h200_f32_publish": ("geomean, latest H200", 0),
    "spmv_h200_f64_publish": ("geomean, latest H200", 1),
}


@pytest.mark.parametrize("name", sorted(LATEST_COLUMNS))
def test_the_latest_spmv_geomean_is_the_documents(name: str) -> None:
    """The latest tables' geomean rows (float32, float64 columns) against their documents."""
    doc = read_document(REPO / "benchmarks" / f"{name}.json.gz")
    ratios = [c["best"]["speedup"]["kernel"] for c in doc["cases"]]
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    label, column = LATEST_COLUMNS[name]
    row = re.search(rf"^\| \*\*{re.escape(label)}\*\* \|(.*)\|$", TEXT, re.M)
    assert row is not None
    quoted = float(row.group(1).split("|")[column].strip(" *x"))
    assert quoted == pytest.approx(geomean, abs=0.005)
