"""The SpMV limit model: compulsory bytes, x-gather sectors, which floor binds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from teaal_loops.cli import main
from teaal_loops.matrix import synthetic
from teaal_loops.matrix.limit_model import (
    NOMINAL_COPY_GBPS,
    compulsory_bytes,
    limits,
    x_gather_sectors,
)


def test_sectors_count_distinct_32_byte_sectors_per_row() -> None:
    # row 0: columns 0..7 share one float32 sector; row 1: columns 0 and 8 are two sectors;
    # row 2: empty; row 3: column 8 alone (the same sector as row 1's second counts again)
    A = sp.csr_matrix(
        (np.ones(11), (np.r_[[0] * 8, 1, 1, 3], np.r_[np.arange(8), 0, 8, 8])), shape=(4, 16)
    )
    assert x_gather_sectors(A.indptr, A.indices, 4) == 1 + 2 + 0 + 1
    assert x_gather_sectors(A.indptr, A.indices, 8) == 2 + 2 + 0 + 1  # 4 doubles a sector


def test_compulsory_bytes_formula() -> None:
    assert compulsory_bytes(10, 20, 100, 4) == 100 * 8 + 11 * 4 + 20 * 4 + 10 * 4
    assert compulsory_bytes(10, 20, 100, 8, 8) == 100 * 12 + 11 * 8 + 20 * 8 + 10 * 8


def test_random_columns_are_bound_by_l2_and_bands_by_dram() -> None:
    uniform = limits(synthetic("uniform", rows=20000, nnz=320000, seed=1))
    banded = limits(synthetic("banded", rows=20000, nnz=320000, seed=1))
    assert uniform.bound_by.startswith("L2") and uniform.l2_us > uniform.dram_us
    assert banded.bound_by.startswith("DRAM") and banded.l2_us < banded.dram_us
    assert not uniform.measured and uniform.copy_gbps == NOMINAL_COPY_GBPS
    measured = limits(synthetic("banded", rows=200, nnz=2000, seed=1), copy_gbps=1000.0,
                      l2_gbps=2000.0)
    assert measured.measured and measured.closeness(measured.limit_us * 2) == 0.5


def test_explain_prints_the_limit(capsys) -> None:  # type: ignore[no-untyped-def]
    spec = Path(__file__).resolve().parents[2] / "specs" / "thread_mapped.yaml"
    assert main(["explain", str(spec), "--synthetic",
                 "uniform:rows=2000,nnz=20000,seed=1"]) == 0
    out = capsys.readouterr().out
    assert "limit:" in out and "bound by L2" in out and "nominal" in out
