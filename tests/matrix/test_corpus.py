"""Every corpus matrix reads, and agrees with the corpus's own STATS.csv."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from teaal_loops.matrix import matrix_shape, mm_fast, mmio, read_matrix_market
from teaal_loops.matrix.stats import row_stats
from tests.conftest import corpus_dir, require_corpus


def _stats_rows() -> list[dict[str, str]]:
    path = corpus_dir() / "matrices" / "STATS.csv"
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


STATS = _stats_rows()


@pytest.mark.parametrize("row", STATS or [None], ids=[r["file"] for r in STATS] or ["absent"])
def test_corpus_matrix_matches_stats_csv(row: dict[str, str] | None) -> None:
    folder = require_corpus("matrices", "STATS.csv").parent
    assert row is not None
    path = folder / f"{row['file']}.gz"
    if not path.exists():
        path = folder / row["file"]
    A = read_matrix_market(path)
    assert A.shape == (int(row["rows"]), int(row["cols"]))
    assert A.nnz == int(row["nnz_expanded"])
    shape = matrix_shape(A)
    assert (shape.rows, shape.cols, shape.nnz) == (A.shape[0], A.shape[1], A.nnz)
    assert shape.max_row == int(row["max_row"])
    stats = row_stats(A)
    assert stats.empty_rows == int(row["empty_rows"])
    assert stats.mean == pytest.approx(float(row["mean_row"]), abs=0.006)
    assert stats.cv == pytest.approx(float(row["cv_row"]), abs=0.006)


@pytest.mark.parametrize("tier", ["scipy-tier", "numpy-tier", "slow-only"])
@pytest.mark.parametrize(
    "name", ["1138_bus", "add32", "lp_ship04l", "cora", "wiki-Vote", "email-Enron"]
)
def test_corpus_values_agree_with_scipy_mmread(
    name: str, tier: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = require_corpus("matrices", f"{name}.mtx.gz")
    monkeypatch.setattr(mm_fast, "HAVE_SCIPY_READER", tier == "scipy-tier")
    monkeypatch.setattr(mm_fast, "SCIPY_MIN_BODY", 0)
    monkeypatch.setattr(mmio, "USE_FAST_PATH", tier != "slow-only")
    ours = read_matrix_market(path)
    theirs = sp.csr_matrix(scipy.io.mmread(str(path)))
    theirs.sum_duplicates()
    np.testing.assert_array_equal(ours.indptr, theirs.indptr)
    np.testing.assert_array_equal(ours.indices, theirs.indices)
    np.testing.assert_allclose(ours.data, theirs.data, rtol=0, atol=0)


def test_corpus_stats_csv_is_not_empty_when_the_corpus_exists() -> None:
    require_corpus("matrices", "STATS.csv")
    assert len(STATS) >= 20
    assert all(Path(corpus_dir() / "matrices" / f"{r['file']}.gz").exists() for r in STATS)
