"""Register-blocked SpMM on the GPU (thread- and group-mapped walk a row's atoms once for up
to TEAAL_DENSE_BLOCK = 4 of a thread's dense steps): values against SciPy within a
Wilkinson-style bound, f32 and f64, for N in {1, 3, 8, 33, 100, 128} with N_TILE choices that
make dense_time 1, 2, 3, 4, 5 and 7 (the last block holding dead steps, and N no multiple of
N_TILE leaving some slots a dead step that others have live), and the trace build's owner of
every (atom, n) against the simulation's. tests/codegen/test_dense_blocked.py runs the same
kernels on the CPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops import pipeline
from teaal_loops.layouts import tile_view
from teaal_loops.matrix import synthetic
from teaal_loops.schedules import bind
from teaal_loops.types import DeviceInfo
from tests.gpu.test_dense_gpu import _bound, _expected_owner

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
TILED = REPO / "specs/spmm/lanes_over_n_tiled.yaml"
GROUP = REPO / "specs/spmm/group_lanes_over_k.yaml"

# (N, N_TILE, dense_time = ceil(N / min(N_TILE, N)))
TILED_CASES: list[tuple[int, int, int]] = [
    (1, 1, 1), (3, 1, 3), (3, 2, 2), (8, 2, 4), (8, 3, 3), (8, 8, 1),
    (33, 7, 5), (33, 5, 7), (33, 32, 2), (100, 32, 4), (100, 15, 7), (100, 20, 5),
    (128, 32, 4), (128, 26, 5), (128, 64, 2), (128, 19, 7), (128, 128, 1),
]
WIDTHS = [1, 3, 8, 33, 100, 128]  # group-mapped: N in time, dense_time = N


def _matrices() -> dict[str, sp.csr_matrix]:
    return {
        "uniform": synthetic("uniform", rows=300, cols=257, nnz=3000, seed=1),
        "rmat": synthetic("rmat", rows=512, nnz=6000, seed=2),
        "banded": synthetic("banded", rows=400, nnz=4000, seed=4),
        "empty_rows": sp.random(200, 150, density=0.01, format="csr", random_state=3),
    }


MATRICES = _matrices()


def _check(spec: Path, params: dict[str, int], matrix: str, dtype: str, width: int,
           dense_time: int | None) -> None:
    import cupy

    kernel = pipeline.compile(spec, dtype=dtype, params=params)
    A = MATRICES[matrix]
    view = tile_view(kernel.layout, A)
    bound = bind(kernel.schedule, view.shape, DeviceInfo.h100(), kernel.params,
                 dense_size=width)
    assert bound.dense_time == (width if dense_time is None else dense_time)
    rng = np.random.default_rng(width)
    B = rng.uniform(-1, 1, (A.shape[1], width)).astype(dtype).astype(np.float64)
    op = A.astype(dtype).astype(np.float64)
    Z = kernel(A, cupy.asarray(B, dtype=dtype)).get()
    want = op @ B
    terms = int(np.diff(op.indptr).max()) + 1 if op.nnz else 1
    assert np.all(np.abs(Z - want) <= _bound(abs(op) @ np.abs(B), terms, dtype))
    # the same launch twice gives the same bits (one owner per element, a fixed order)
    np.testing.assert_array_equal(kernel(A, cupy.asarray(B, dtype=dtype)).get(), Z)
    owner = kernel.trace_dense(A, (cupy.asarray(B, dtype=dtype),)).get()
    np.testing.assert_array_equal(owner, _expected_owner(kernel, A, width))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("matrix", sorted(MATRICES))
@pytest.mark.parametrize(("width", "n_tile", "dense_time"), TILED_CASES)
def test_thread_mapped_tiled(width: int, n_tile: int, dense_time: int, matrix: str,
                             dtype: str) -> None:
    _check(TILED, {"N_TILE": n_tile}, matrix, dtype, width, dense_time)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("matrix", sorted(MATRICES))
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("group", [1, 4, 32, 64])
def test_group_mapped_n_in_time(group: int, width: int, matrix: str, dtype: str) -> None:
    _check(GROUP, {"G": group}, matrix, dtype, width, None)


def test_the_cases_cover_every_dense_time_of_the_brief() -> None:
    assert {dt for _, _, dt in TILED_CASES} >= {1, 2, 3, 4, 5, 7}
    assert {n for n, _, _ in TILED_CASES} == set(WIDTHS)
    for width, n_tile, dense_time in TILED_CASES:
        assert -(-width // min(n_tile, width)) == dense_time
