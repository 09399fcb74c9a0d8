"""SDDMM with K0 in space on the GPU (issue #13): values against SciPy in float64 within a
Wilkinson-style bound, the trace build's owner of every (atom, k) against the schedule's rule
(``thread = ((o // G) * S + k % S) * G + o % G``; K split twice into runs of R:
``(k // R) % S``), repeated launches bit for bit equal (the shuffle tree's order is fixed),
and V read through its strides (stored [N, K], or [K, N]; for runs, the vector build and the
scalar one give the same bits)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops import pipeline
from teaal_loops.layouts import tile_view
from teaal_loops.lowering import owners
from teaal_loops.matrix import synthetic
from teaal_loops.schedules import bind
from tests.codegen.sddmm_lanes_specs import LANES_SPEC, RUNS_SPEC, lanes_spec_text

pytestmark = pytest.mark.gpu

# name -> (spec kind or the library spec, parameters)
CASES: dict[str, tuple[str, dict[str, int]]] = {
    "library_g4_s8": ("library", {}),
    "thread_s32": ("thread_mapped", {"S": 32}),
    "thread_s4_tiled": ("thread_mapped", {"S": 4, "T": 3}),
    "group_g2_s16": ("group_mapped", {"G": 2, "S": 16}),
    "group_g16_s2": ("group_mapped", {"G": 16, "S": 2}),
    # K split twice: runs of R (K = 32 and 128 take the vector build, 1, 7, 33 the scalar one)
    "runs_library": ("runs_library", {}),
    "runs_group_g2_r2": ("group_mapped_runs", {"G": 2, "P": 32, "R": 2}),
    "runs_thread_r3": ("thread_mapped_runs", {"P": 24, "R": 3, "T": 2}),
    # work-oriented: S threads a chunk of W nonzeros
    "runs_work_library": ("runs_work_library", {}),
    "work_w3_s8": ("work_oriented", {"W": 3, "S": 8}),
}
MATRICES = {
    "uniform": synthetic("uniform", rows=300, cols=257, nnz=3000, seed=1),
    "rmat": synthetic("rmat", rows=512, nnz=6000, seed=2),
    "empty_rows": sp.random(200, 150, density=0.01, format="csr", random_state=3),
}


def _kernel(tmp_path: Path, case: str, dtype: str) -> Any:
    kind, params = CASES[case]
    if kind == "library":
        return pipeline.compile(LANES_SPEC, dtype=dtype)
    if kind == "runs_library":
        return pipeline.compile(RUNS_SPEC, dtype=dtype)
    if kind == "runs_work_library":
        return pipeline.compile(RUNS_SPEC.with_name("thread_per_nonzero_runs.yaml"), dtype=dtype)
    spec = tmp_path / f"{case}.yaml"
    spec.write_text(lanes_spec_text(kind))
    return pipeline.compile(spec, dtype=dtype, params=params)


def _bound(absolute: np.ndarray[Any, Any], terms: int, dtype: str) -> np.ndarray[Any, Any]:
    eps = np.finfo(np.dtype(dtype)).eps / 2
    gamma = terms * eps / max(1 - terms * eps, 1e-3)
    return gamma * absolute + np.finfo(np.dtype(dtype)).tiny


@pytest.mark.parametrize("width", [1, 7, 32, 33, 128])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("matrix", sorted(MATRICES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_sddmm_lanes(tmp_path: Path, case: str, matrix: str, dtype: str, width: int) -> None:
    import cupy

    kernel = _kernel(tmp_path, case, dtype)
    C = MATRICES[matrix].tocsr()
    C.sort_indices()
    rng = np.random.default_rng(width)
    U = rng.uniform(-1, 1, (C.shape[0], width)).astype(dtype).astype(np.float64)
    V = rng.uniform(-1, 1, (width, C.shape[1])).astype(dtype).astype(np.float64)
    C = C.astype(dtype).astype(np.float64)
    u = cupy.asarray(U, dtype=dtype)
    v = cupy.asfortranarray(cupy.asarray(V, dtype=dtype))  # stored [N, K]: the fast layout
    got = kernel(C, u, v).get().tocsr()
    got.sort_indices()
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    want = C.data * np.einsum("ij,ji->i", U[rows], V[:, C.indices])
    absolute = np.abs(C.data) * np.einsum("ij,ji->i", np.abs(U[rows]), np.abs(V[:, C.indices]))
    np.testing.assert_array_equal(got.indices, C.indices)
    assert np.all(np.abs(got.data - want) <= _bound(absolute, width + 1, dtype))
    # the same launch again, and V stored [K, N]: the same bits (the order is the tree's)
    again = kernel(C, u, v).get().tocsr()
    np.testing.assert_array_equal(again.data, kernel(C, u, cupy.ascontiguousarray(v)).get().data)
    np.testing.assert_array_equal(again.data, kernel(C, u, v).get().data)
    owner = kernel.trace_dense(C, (u, v)).get()
    view = tile_view(kernel.layout, C)
    bound = bind(kernel.schedule, view.shape, None, kernel.params, dense_size=width)
    np.testing.assert_array_equal(owner, owners(bound, view.tile_ptr))
    kind, params = CASES[case]
    lanes = params["P"] // params["R"] if "P" in params else params.get("S", 8)
    assert bound.dense_space == lanes


def test_a_launch_with_many_rows_fills_every_value() -> None:
    """Past one block's workers and a partial last warp: 100,003 rows, K = 32."""
    import cupy

    kernel = pipeline.compile(LANES_SPEC)
    C = synthetic("uniform", rows=100_003, cols=100_003, nnz=1_600_000, seed=5).tocsr()
    C.sort_indices()
    rng = np.random.default_rng(0)
    U = rng.uniform(-1, 1, (C.shape[0], 32)).astype(np.float32)
    V = rng.uniform(-1, 1, (32, C.shape[1])).astype(np.float32)
    y = cupy.full(C.nnz, np.nan, dtype=np.float32)
    kernel.call_dense(C, (cupy.asarray(U), cupy.asfortranarray(cupy.asarray(V))), out=y)
    got = y.get().astype(np.float64)
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    want = C.data * np.einsum("ij,ji->i", U[rows].astype(np.float64),
                              V[:, C.indices].astype(np.float64))
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_runs_read_by_vector_loads_beat_every_kth_k() -> None:
    """Issue #13's matrix: 1M x 1M, 16 nonzeros a row, float32, B stored [N, K] (a
    Fortran-ordered (K, N) array), K = 128. lanes_over_k_runs (each of a nonzero's 8 threads
    reads runs of 4 neighbouring k, one float4 of each factor) must beat lanes_over_k (every
    8th k, 4 bytes a load) by 1.3x at least; a patched kernel measured 1.65x on an H100
    (BENCHMARKS.md). Both times are in the message."""
    import cupy

    from teaal_loops.bench.timing import Timer

    C = synthetic("uniform", rows=1_000_000, nnz=16_000_000, seed=1).tocsr()
    U = cupy.random.uniform(-1, 1, (C.shape[0], 128), dtype=cupy.float32)
    V = cupy.asfortranarray(cupy.random.uniform(-1, 1, (128, C.shape[1]), dtype=cupy.float32))
    y = cupy.empty(C.nnz, dtype=cupy.float32)
    times = {}
    for spec in (LANES_SPEC, RUNS_SPEC):
        kernel = pipeline.compile(spec)
        prepared = kernel.prepare(C)
        kernel.call_dense(prepared, (U, V), out=y)  # compile and warm up

        def call(_: int, kernel: Any = kernel, prepared: Any = prepared) -> None:
            kernel.call_dense(prepared, (U, V), out=y)

        times[spec.stem] = Timer(cupy).queued(call, 20).median
    message = ", ".join(f"{name} {ms:.3f} ms" for name, ms in times.items())
    print(message)
    assert times["lanes_over_k_runs"] * 1.3 <= times["lanes_over_k"], message
