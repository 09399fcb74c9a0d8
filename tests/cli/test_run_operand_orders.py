"""`run` lays dense operands out as the spec stores them (the kernels read through strides;
the layout decides whether the fast mapping's loads coalesce)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from teaal_loops import pipeline
from teaal_loops.cli.cmd_run import _in_storage_order

REPO = Path(__file__).resolve().parents[2]


class FakeCupy:
    asarray = staticmethod(np.asarray)
    asfortranarray = staticmethod(np.asfortranarray)


@pytest.mark.parametrize(
    ("spec", "fortran"),
    [
        ("specs/sddmm/lanes_over_k.yaml", [False, True]),  # B stored [N, K]
        ("specs/sddmm/thread_per_nonzero.yaml", [False, True]),
        ("specs/spmm/lanes_over_n.yaml", [False]),  # B stored [K, N]
    ],
)
def test_operands_follow_the_specs_storage_order(spec: str, fortran: list[bool]) -> None:
    form = pipeline.compile(REPO / spec).schedule.form
    arrays = [np.arange(12.0).reshape(4, 3), np.arange(15.0).reshape(3, 5)][: len(fortran)]
    placed = [_in_storage_order(FakeCupy, a, i, form) for i, a in enumerate(arrays)]
    assert [p.flags.f_contiguous and not p.flags.c_contiguous for p in placed] == fortran
    for before, after in zip(arrays, placed, strict=True):
        np.testing.assert_array_equal(before, after)  # the same logical matrix


@pytest.mark.parametrize(
    ("spec", "rank", "message"),
    [
        ("specs/spmm/lanes_over_n.yaml", "X=4", "not a rank of this spec"),
        ("specs/spmm/lanes_over_n.yaml", "N=0", "size 0 is not in"),
        ("specs/spmm/lanes_over_n.yaml", "M=4", "comes from the matrix"),
        ("specs/thread_mapped.yaml", "N=4", "has no dense rank"),
    ],
)
def test_run_refuses_a_bad_rank_before_the_gpu_in_one_line(
    spec: str, rank: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from teaal_loops.cli import main

    code = main(["run", str(REPO / spec), "--synthetic", "uniform:rows=10,nnz=20",
                 "--rank", rank])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
