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


def test_spmm_and_sddmm_floors_count_dense_row_gathers() -> None:
    from teaal_loops.matrix.limit_model import dense_row_sectors, sddmm_limits, spmm_limits

    A = sp.csr_matrix((np.ones(3), ([0, 0, 1], [0, 5, 5])), shape=(2, 8))
    # N = 16 floats: 64 bytes, 2 sectors a nonzero
    assert dense_row_sectors(A.indptr, A.indices, 16, 4) == 3 * 2
    # N = 2 floats: rows 0..3 of B share a sector: row 0 gathers sectors {0, 1}, row 1 {1}
    assert dense_row_sectors(A.indptr, A.indices, 2, 4) == 2 + 1
    lim = spmm_limits(A, 16)
    assert lim.compulsory_bytes == 3 * 8 + 3 * 4 + (8 + 2) * 16 * 4
    assert lim.gathered_bytes == 8 * 16 * 4 and lim.miss_fraction == 0.0
    s = sddmm_limits(A, 32)
    assert s.sector_bytes == (3 + 2) * 4 * 32  # 32 floats: 4 sectors per column and per row


def test_an_operand_larger_than_l2_adds_an_estimate_of_missed_gathers() -> None:
    from teaal_loops.matrix.limit_model import Limits

    small = Limits(1000, 8000, 1.0, 1.0, False, gathered_bytes=10, l2_bytes=100)
    assert small.miss_fraction == 0.0 and small.estimate_us == small.limit_us
    big = Limits(1000, 8000, 1.0, 100.0, False, gathered_bytes=400, l2_bytes=100)
    assert big.miss_fraction == 0.75
    assert big.estimate_us == (1000 + 6000) / 1e3


def test_gather_curve_interpolates_in_log_size_and_clamps() -> None:
    import pytest

    from teaal_loops.matrix.limit_model import GatherCurve

    curve = GatherCurve(((4 << 20, 1000.0), (1 << 20, 4000.0)))  # given out of order
    assert curve.points[0] == (1 << 20, 4000.0)
    assert curve.gbps(1 << 20) == 4000.0 and curve.gbps(4 << 20) == 1000.0
    assert curve.gbps(2 << 20) == 2500.0  # halfway in log2 of the size
    assert curve.gbps(1) == 4000.0 and curve.gbps(1 << 40) == 1000.0  # the nearest measured
    assert GatherCurve.of([[1 << 20, 4000]]) == GatherCurve(((1 << 20, 4000.0),))
    assert GatherCurve.of(None) is None and GatherCurve.of([]) is None
    for bad in (((1 << 20, 0.0),), ((0, 5.0),), ((1, 5.0), (1, 6.0)), ()):
        with pytest.raises(ValueError):
            GatherCurve(bad)


def test_sector_gathers_use_the_measured_curve_and_runs_of_sectors_the_read_rate() -> None:
    from teaal_loops.matrix.limit_model import (
        NOMINAL_GATHERS,
        RESIDENT_BYTES,
        GatherCurve,
        SectorCounts,
        limit_lines,
        spmm_limits,
        spmv_limits,
    )

    curve = GatherCurve(((1 << 20, 4000.0), (8 << 20, 3000.0), (32 << 20, 1500.0)))
    sectors = 10**6
    scattered = SectorCounts(sectors, sectors)  # no runs: every sector a scattered request
    # x of 32 MiB (float32, 8M columns): the floor at the resident rate, the estimate at 32 MiB
    big = spmv_limits(100, 8 << 20, scattered, 10**6, 4, 4, copy_gbps=3000.0, l2_gbps=7000.0,
                      gathers=curve)
    assert big.measured and big.gathers is curve
    assert big.gather_gbps == 3000.0 and big.l2_us == sectors * 32 / 3000e3
    assert big.estimate_us == sectors * 32 / 1500e3 > big.limit_us
    assert big.miss_fraction == 0.0  # the curve replaces the proportional-miss guess
    text = "\n".join(limit_lines(big))
    assert "random sector gathers" in text and "uniformly random" in text
    assert big.as_dict()["gather_curve"] == curve.as_list()
    # x between the smallest size and RESIDENT_BYTES: its own size's rate, no estimate beyond
    mid = spmv_limits(100, (2 << 20) // 4, scattered, 10**6, 4, 4, copy_gbps=3000.0,
                      l2_gbps=7000.0, gathers=curve)
    assert 3000.0 < mid.gather_gbps < 4000.0 and mid.estimate_us == mid.limit_us
    assert (2 << 20) < RESIDENT_BYTES
    # x smaller than the smallest buffer measured: L1 may serve it, the read rate bounds it
    small = spmv_limits(100, 1000, scattered, 10**6, 4, 4, copy_gbps=3000.0, l2_gbps=7000.0,
                        gathers=curve)
    assert small.gather_gbps == 7000.0 and "L2 reads" in limit_lines(small)[0]
    # measured rates without a curve never borrow the nominal (another GPU's) curve
    bare = spmv_limits(100, 8 << 20, scattered, 10**6, 4, 4, copy_gbps=3000.0, l2_gbps=7000.0)
    assert bare.gathers is None and bare.gather_gbps == 7000.0
    nominal = spmv_limits(100, 8 << 20, scattered, 10**6, 4, 4, copy_gbps=None, l2_gbps=None)
    assert nominal.gathers is NOMINAL_GATHERS and not nominal.measured
    # SpMM counts no runs of B's rows: every sector at the read rate, measured or nominal
    A = sp.csr_matrix((np.ones(3), ([0, 0, 1], [0, 5, 5])), shape=(2, 8))
    for dense in (spmm_limits(A, 8), spmm_limits(A, 8, copy_gbps=1.0, l2_gbps=2.0)):
        assert dense.gathers is None and dense.gather_gbps == dense.l2_gbps


def test_sector_runs_are_counted_alike_sorted_or_not() -> None:
    from teaal_loops.matrix.limit_model import (
        SectorCounts,
        x_gather_counts,
        x_gather_counts_sorted,
    )

    # float32 (8 a sector): row 0 fills sectors 0, 1, 2 and 5 (2 runs); row 1 sectors 1 and 2
    # (1 run; consecutive with nothing of row 0); row 2 empty; row 3 sector 7 (1 run)
    cols = [[0, 9, 17, 40], [8, 23], [], [60]]
    indptr = np.cumsum([0] + [len(c) for c in cols])
    indices = np.array([c for row in cols for c in row], dtype=np.int32)
    want = SectorCounts(sectors=4 + 2 + 0 + 1, runs=2 + 1 + 0 + 1)
    assert x_gather_counts_sorted(np, indptr, indices, 4) == want
    assert x_gather_counts(indptr, indices, 4) == want
    shuffled = np.concatenate([np.array(c[::-1], dtype=np.int32) for c in cols])
    assert x_gather_counts(indptr, shuffled, 4) == want  # any order within a row
    # a random matrix: the two counters agree
    A = synthetic("uniform", rows=300, nnz=6000, seed=3)
    A.sort_indices()
    assert x_gather_counts(A.indptr, A.indices, 8) == x_gather_counts_sorted(
        np, A.indptr, A.indices, 8)


def test_runs_of_sectors_go_at_the_read_rate() -> None:
    from teaal_loops.matrix.limit_model import GatherCurve, SectorCounts, spmv_limits

    curve = GatherCurve(((1 << 20, 4000.0), (8 << 20, 3000.0), (32 << 20, 1500.0)))
    kw = {"copy_gbps": 3000.0, "l2_gbps": 6000.0, "gathers": curve}
    scattered = spmv_limits(100, 8 << 20, SectorCounts(10**6, 10**6), 10**6, 4, 4, **kw)
    runs = spmv_limits(100, 8 << 20, SectorCounts(10**6, 10**5), 10**6, 4, 4, **kw)
    assert runs.run_bytes == 9 * 10**5 * 32 and runs.scattered_bytes == 10**5 * 32
    assert runs.l2_us == 10**5 * 32 / 3000e3 + 9 * 10**5 * 32 / 6000e3 < scattered.l2_us
    assert runs.estimate_us == max(runs.limit_us, 10**5 * 32 / 1500e3 + 9 * 10**5 * 32 / 6000e3)
