"""Suites (which matrices) and variants (which specs and parameters) of a benchmark."""

from __future__ import annotations

from pathlib import Path

import pytest

from teaal_loops import bench
from teaal_loops.bench.roofline import compulsory_bytes
from teaal_loops.bench.suite import build_suite, matrix_name
from teaal_loops.bench.variants import DEFAULT, Variant, expand, parse_sweep
from teaal_loops.errors import ParameterError, TeaalLoopsError
from tests.conftest import REPO

MTX = "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1.0\n"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    for name in ("b.mtx", "a.mtx.gz", "west0067.mtx"):
        (tmp_path / name).write_text(MTX)
    (tmp_path / "notes.txt").write_text("not a matrix")
    return tmp_path


def test_corpus_suite_lists_matrix_files_by_name(corpus: Path) -> None:
    entries = build_suite(["corpus"], corpus_dir=corpus)
    assert [e.name for e in entries] == ["a", "b", "west0067"]
    assert {e.group for e in entries} == {"corpus"}
    assert entries[0].source.endswith("a.mtx.gz")
    assert matrix_name(Path("x/y.mtx.gz")) == "y"


def test_large_suite_matrices_exceed_a_gigabyte_and_the_l2() -> None:
    entries = build_suite(["large"])
    kinds = [e.generator for e in entries]
    assert kinds == ["banded", "uniform", "rmat", "longrows", "powerlaw", "emptyrows"]
    for e in entries:
        o = e.options
        rows = 1 << o["scale"] if "scale" in o else o["rows"]
        nnz = o.get("nnz", rows * o.get("width", 0))
        if e.generator in ("rmat", "powerlaw"):
            assert o.get("scale", 23) >= 23
            nnz = int(0.85 * nnz)  # floors and merged duplicates (generator tests: a few %)
        assert compulsory_bytes(rows, rows, nnz, "float32") >= 1e9, e.name


def test_smoke_and_scaled_suites_are_small(corpus: Path) -> None:
    entries = build_suite(["smoke"], corpus_dir=corpus)
    assert [e.name for e in entries if e.group == "corpus"] == ["west0067"]
    large = [e for e in entries if e.group == "large"]
    assert len(large) == 6 and all(e.options.get("nnz", 0) < 2**21 for e in large)
    scaled = build_suite(["large"], large_scale=0.01)
    assert scaled[0].options["rows"] < 2**17


def test_files_synthetic_only_and_errors(corpus: Path) -> None:
    entries = build_suite([], files=[str(corpus / "b.mtx")],
                          synthetic=["uniform:rows=100,nnz=1000"])
    assert [e.origin for e in entries] == ["file", "synthetic"]
    assert build_suite(["corpus"], corpus_dir=corpus, only=["b"])[0].name == "b"
    with pytest.raises(TeaalLoopsError, match="unknown suite"):
        build_suite(["nope"])
    with pytest.raises(TeaalLoopsError, match="no such file"):
        build_suite([], files=[str(corpus / "missing.mtx")])
    with pytest.raises(TeaalLoopsError, match="empty"):
        build_suite([])
    with pytest.raises(TeaalLoopsError, match="twice"):
        build_suite([], files=[str(corpus / "b.mtx")] * 2)
    with pytest.raises(TeaalLoopsError, match="large-scale"):
        build_suite(["large"], large_scale=2.0)


def test_parse_sweep() -> None:
    assert parse_sweep(["B=4,8,4", "W=default,16"]) == {"B": (4, 8), "W": (DEFAULT, 16)}
    for bad in (["B"], ["B=x"], ["B=0"], ["B=1", "B=2"], ["=1"]):
        with pytest.raises(ParameterError):
            parse_sweep(bad)


def test_expand_applies_sweeps_to_specs_that_have_the_parameter() -> None:
    a, b = Path("s/a.yaml"), Path("s/b.yaml")
    variants = expand([(a, ("G", "N")), (b, ("W",))],
                      sweeps={"G": (2, 4), "W": (DEFAULT, 8)}, fixed={"N": 7})
    assert [v.label for v in variants] == ["a[G=2,N=7]", "a[G=4,N=7]", "b", "b[W=8]"]
    assert Variant(a, {}, "csr").label == "a"


def test_library_variants_and_schedule_filter() -> None:
    variants, wants_auto = bench.variants_for()
    labels = [v.label for v in variants]
    assert wants_auto is False
    assert "thread_mapped" in labels and "merge_path" in labels
    assert "group_mapped[BLOCK_SIZE=8]" in labels
    assert "group_mapped_block[GROUP=256]" in labels
    assert len(labels) == len(set(labels))
    only_merge, _ = bench.variants_for(schedule="merge_path")
    assert only_merge and all(v.spec_name == "merge_path" for v in only_merge)
    none, auto_only = bench.variants_for(schedule="auto")
    assert none == [] and auto_only
    with pytest.raises(TeaalLoopsError):
        bench.variants_for(schedule="fastest")


def test_a_spec_asking_for_auto_turns_auto_on(tmp_path: Path) -> None:
    spec = tmp_path / "mine.yaml"
    spec.write_text((REPO / "specs" / "thread_mapped.yaml").read_text()
                    + "x-teaal-loops:\n  schedule: auto\n")
    variants, wants_auto = bench.variants_for([spec, REPO / "specs" / "merge_path.yaml"])
    assert wants_auto
    assert [v.label for v in variants] == ["merge_path"]  # explicit specs: no default sweeps


def test_profile_labels_round_trip() -> None:
    from teaal_loops.bench.profile import parse_label
    from teaal_loops.bench.variants import variant_label

    for label in ("merge_path", "group_mapped[BLOCK_SIZE=32]", "a[X=1,Y=20]"):
        name, params = parse_label(label)
        assert variant_label(name, params) == label
    for bad in ("[X=1]", "a[X=1", "a[X=y]"):
        with pytest.raises(TeaalLoopsError):
            parse_label(bad)
