"""SpMM kernels executed on the CPU (g++ and the CUDA shim): values and the owner of every
(nonzero, column n) against the CPU simulation, for every dense-rank placement and schedule.

The GPU repeats this (tests/gpu/test_dense_gpu.py); this is the check CI runs without one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.codegen import make_config, render
from teaal_loops.layouts import tile_view
from teaal_loops.lowering import lower, simulate
from teaal_loops.runtime import dense_builds
from teaal_loops.runtime.device_matrix import host_arguments
from teaal_loops.runtime.kernel import schedule_arguments
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec, load_spec_string
from tests.codegen import host_emulation as emu

pytestmark = pytest.mark.skipif(emu.CXX is None, reason="no C++ compiler (g++/clang++) found")

REPO = Path(__file__).resolve().parents[2]
MERGE_PATH_SPMM = """
einsum:
  declaration: {A: [M, K], B: [K, N], Z: [M, N]}
  expressions: ["Z[m, n] = A[m, k] * B[k, n]"]
mapping:
  partitioning:
    Z:
      (M, K): [flatten()]
      MK: [x_merge_path(A.I)]
  loop-order:
    Z: [MK1, MK0, N]
  spacetime:
    Z: {space: [MK1], time: [MK0, N]}
"""
WORK_ORIENTED_SPMM = MERGE_PATH_SPMM.replace("x_merge_path(A.I)", "uniform_occupancy(A.W)")
GROUP_N_IN_SPACE = """
einsum:
  declaration: {A: [M, K], B: [K, N], Z: [M, N]}
  expressions: ["Z[m, n] = A[m, k] * B[k, n]"]
mapping:
  partitioning:
    Z:
      K: [uniform_occupancy(A.G)]
  loop-order:
    Z: [M, N, K1, K0]
  spacetime:
    Z: {space: [M, N, K0], time: [K1]}
"""
CASES: list[tuple[str, Any, dict[str, int]]] = [
    ("lanes_over_n", REPO / "specs/spmm/lanes_over_n.yaml", {}),
    ("lanes_over_n_tiled", REPO / "specs/spmm/lanes_over_n_tiled.yaml", {"N_TILE": 2}),
    ("group_lanes_over_k", REPO / "specs/spmm/group_lanes_over_k.yaml", {"G": 4}),
    ("merge_path_n_in_time", MERGE_PATH_SPMM, {"I": 4}),
    ("work_oriented_n_in_time", WORK_ORIENTED_SPMM, {"W": 3}),
    ("group_n_in_space", GROUP_N_IN_SPACE, {"G": 4}),
    ("coo_lanes_over_n", (REPO / "specs/spmm/lanes_over_n.yaml", "coo"), {}),
    ("nonzero_split", REPO / "specs/spmm/nonzero_split.yaml",
     {"NNZ_PER_WORKER": 3, "N_LANES": 2}),
    ("nonzero_split_defaults", REPO / "specs/spmm/nonzero_split.yaml", {}),
    ("coo_nonzero_split", (REPO / "specs/spmm/nonzero_split.yaml", "coo"),
     {"NNZ_PER_WORKER": 4, "N_LANES": 4}),
]


def _schedule(spec: Any, params: dict[str, int]) -> Any:
    layout = None
    if isinstance(spec, tuple):
        spec, layout = spec
    parsed = load_spec_string(spec) if isinstance(spec, str) else load_spec(spec)
    return lower(parsed, params=params, layout=layout)


def _matrix() -> sp.csr_matrix:
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 5, size=19)
    lengths[[0, 7]] = 0
    lengths[11] = 23  # one long row: split chunks, several lanes
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(30, n, replace=False)) for n in lengths])
    return sp.csr_matrix((rng.uniform(-1, 1, indptr[-1]), indices, indptr), shape=(19, 30))


@pytest.mark.parametrize("width", [1, 5])
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_spmm_kernel_on_the_cpu(case: str, width: int) -> None:
    _, spec, params = next(c for c in CASES if c[0] == case)
    _run_and_compare(_schedule(spec, params), _matrix(), width)


@pytest.mark.parametrize("items", [1, 4])
def test_merge_path_rows_crossing_blocks_with_strided_columns(items: int) -> None:
    """Many blocks, so rows cross block boundaries (the staged path's atomicAdd of a row that
    goes on in the next block), and several columns, so y's row stride is not 1: an index
    added to a strided column after the column pointer was taken lands in the wrong row (a bug
    the GPU found and a one-block matrix cannot show)."""
    from teaal_loops.matrix import synthetic

    A = synthetic("uniform", rows=300, cols=257, nnz=3000, seed=1)
    _run_and_compare(_schedule(MERGE_PATH_SPMM, {"I": items}), A, 3)


@pytest.mark.parametrize(("matrix", "lanes"), [("uniform", 3), ("rmat", 32)])
def test_nonzero_split_rows_crossing_blocks_with_strided_columns(matrix: str, lanes: int) -> None:
    """Work-oriented with N0 in space over many blocks: rows longer than a chunk cross chunks
    and blocks, a block's 128 threads are not a whole number of workers when DS = 3 (its
    atom range is [first_worker * W, (last_worker + 1) * W) with workers = thread / DS), N = 7
    is no multiple of DS (threads leave the loop over n at different steps, after every
    barrier), and y's row stride is 7."""
    from teaal_loops.matrix import synthetic

    A = (synthetic("uniform", rows=300, cols=257, nnz=3000, seed=1) if matrix == "uniform"
         else synthetic("rmat", rows=256, nnz=2500, seed=2))
    params = {"NNZ_PER_WORKER": 4, "N_LANES": lanes}
    schedule = _schedule(REPO / "specs/spmm/nonzero_split.yaml", params)
    assert int(np.diff(A.indptr).max()) > params["NNZ_PER_WORKER"]
    bound = _run_and_compare(schedule, A, 7)
    assert bound.launch.blocks > 4
    assert bound.dense_space == min(lanes, 7)


@pytest.mark.parametrize(("lanes", "width"), [(8, 8), (64, 70)])
def test_nonzero_split_warps_find_their_own_rows(lanes: int, width: int) -> None:
    """Each warp finds the rows of its workers' chunks itself (two lanes search, shuffles
    share the result): workers of 8 threads, four to a warp, and workers of 64 threads, each
    spanning two warps; in both the launch's last block holds whole warps past the last
    worker (they leave at once, before the shuffles)."""
    from teaal_loops.matrix import synthetic

    A = synthetic("rmat", rows=256, nnz=1500, seed=4)
    for chunk in range(3, 12):
        params = {"NNZ_PER_WORKER": chunk, "N_LANES": lanes}
        schedule = _schedule(REPO / "specs/spmm/nonzero_split.yaml", params)
        bound = bind(schedule, tile_view(schedule.layout, A).shape, None, {}, dense_size=width)
        launched = bound.launch.blocks * bound.launch.threads_per_block
        if launched - bound.workers * lanes >= 32:
            break
    else:
        pytest.fail("no chunk leaves a whole warp idle")
    assert bound.dense_space == lanes
    _run_and_compare(schedule, A, width)


def _run_and_compare(schedule: Any, A: sp.csr_matrix, width: int,
                     options: tuple[str, ...] | None = None, *, held: Any = None,
                     start: np.ndarray | None = None) -> Any:
    """The kernel on the CPU against SciPy (values) and the simulation (the owner of every
    (atom, n)); ``options``: the build's (default: the runtime's for this launch); ``held``:
    the host layout the kernel reads, where it is not built from ``A`` by default (heavy
    rows below the default minimum); ``start``: Z before the launch, which the kernel must add
    into (a split's second launch)."""
    held = A if held is None else held
    view = tile_view(schedule.layout, held)
    atoms = view.shape.nnz  # the layout's atoms (ELL's padded slots included)
    bound = bind(schedule, view.shape, None, {}, dense_size=width)
    cfg = make_config(schedule, dtype="float64", bound=bound)
    if options is None:
        options = dense_builds.dense_options(render(cfg), bound.dense_space, bound.dense_time,
                                        chunk=bound.work_per_thread)
    exe = emu.build(cfg, options)
    B = np.random.default_rng(width).uniform(-1, 1, (A.shape[1], width))
    rows = A.shape[0]
    # zeroed where the runtime zeroes it (an atomic combine, a stacked layout), else NaN
    Z0 = np.zeros((rows, width)) if emu.zeroes_output(cfg, bound) else np.full((rows, width),
                                                                              np.nan)
    if start is not None:
        Z0 = np.array(start, dtype=np.float64)
    layout_args = host_arguments(schedule.layout, held, np.dtype("float64"))
    arrays = {
        **layout_args.arrays, "x_data": B, "y_data": Z0,
        "owner": np.full(atoms * width, -1, np.int32),
    }
    scalars: dict[str, int] = {"rows": rows, "cols": A.shape[1], "nnz": A.nnz,
                               **layout_args.scalars}
    scalars.update(schedule_arguments(bound))
    scalars.update({"dense_n": width, "dense_space": bound.dense_space,
                    "dense_time": bound.dense_time, "x_stride_k": width, "x_stride_n": 1,
                    "y_stride_m": width, "y_stride_n": 1})
    result = emu.execute(exe, cfg, bound, arrays, scalars, rows=rows * width,
                         atoms=atoms * width)
    Z = result.y.reshape(rows, width)
    want = A @ B if start is None else start + A @ B
    np.testing.assert_allclose(Z, want, rtol=1e-12, atol=1e-12)
    sim = simulate(bound, held, B)
    np.testing.assert_array_equal(result.owner.reshape(atoms, width), sim.owner)
    return bound
