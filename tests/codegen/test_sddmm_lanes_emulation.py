"""The SDDMM lanes kernels (K0 in space) run on the CPU: the generated source under g++ with
tests/codegen/cuda_emulation.h, whose ``__shfl_down_sync`` runs the lanes of a block as threads
and checks that every lane a shuffle names is in its mask and takes part in it (a lane missing
from a segment's shuffle hangs the run, which the timeout turns into a failure).

Checked for every case: every atom's value is written, and bit for bit what the documented
order gives (thread k0 sums k = k0, k0 + S, ... in value_t, then the shuffle tree
``p[k0] += p[k0 + o]`` for o = S/2 .. 1, :func:`teaal_loops.ir.dense.lane_tree_sum`); the
trace build's owner of every (atom, k) is the simulation's (``dense_owners``: thread
``((o // G) * S + k % S) * G + o % G``). g++ at -O0 on x86-64 rounds each product and sum in
value_t (no fused multiply-add), so the CPU run follows the order exactly; on the GPU nvcc may
fuse them, which the GPU tests bound instead.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.codegen import make_config
from teaal_loops.ir.dense import lane_tree_sum, run_length
from teaal_loops.ir.model import Schedule
from teaal_loops.layouts import tile_view
from teaal_loops.lowering import lower, simulate
from teaal_loops.runtime.device_matrix import host_arguments
from teaal_loops.schedules import bind, schedule_definition
from teaal_loops.spec import load_spec
from tests.codegen import host_emulation as emu
from tests.codegen.sddmm_lanes_specs import LANES_SPEC, RUNS_SPEC, lanes_schedule
from tests.layouts import emulation as layout_emulation

pytestmark = pytest.mark.skipif(emu.CXX is None, reason="no C++ compiler (g++/clang++) found")


def _matrices() -> dict[str, sp.csr_matrix]:
    rng = np.random.default_rng(11)
    lengths = rng.integers(0, 7, size=45)
    lengths[[0, 1, 17, 18, 44]] = 0  # empty rows: leading, a run, trailing
    lengths[25] = 70  # one long row: many trips of every lane
    cols = 90
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths])
    data = rng.uniform(-1, 1, size=indptr[-1])
    return {
        "skewed": sp.csr_matrix((data, indices, indptr), shape=(45, cols)),
        "single_row": sp.csr_matrix(rng.uniform(-1, 1, size=(1, 13))),
        "all_empty": sp.csr_matrix((5, 4)),
    }


MATRICES = _matrices()

# (name, schedule params, layout, dtype, offset bits, K values): every case runs every matrix
# with each K, which covers K < S (threads with no term), K a multiple of S, unrolled steps
# with a remainder, and K = 1.
CASES: list[tuple[str, dict[str, int], str, str, int, tuple[int, ...]]] = [
    ("thread_mapped", {"S": 32}, "csr", "float32", 32, (1, 37, 130)),
    ("thread_mapped", {"S": 4, "T": 3}, "csr", "float32", 32, (3, 8, 21)),
    ("thread_mapped", {"S": 8, "T": 2}, "coo", "float64", 32, (5, 40)),
    ("thread_mapped", {"S": 2}, "csr", "float32", 64, (7,)),
    ("group_mapped", {"G": 4, "S": 8}, "csr", "float32", 32, (1, 19, 64)),
    ("group_mapped", {"G": 2, "S": 16}, "csr", "float64", 64, (9, 70)),
    ("group_mapped", {"G": 16, "S": 2}, "csr", "float32", 32, (5,)),
    ("group_mapped", {"G": 8}, "csr", "float32", 32, (13,)),  # S defaults to 32 / G = 4
    # K split twice: S = P / R threads, runs of R; K not a multiple of R (a partial run), of
    # P (a partial step), and below R
    ("group_mapped_runs", {"G": 4, "P": 32, "R": 4}, "csr", "float32", 32, (1, 19, 64)),
    ("group_mapped_runs", {"G": 2, "P": 32, "R": 2}, "csr", "float64", 64, (9, 70)),
    ("thread_mapped_runs", {"P": 24, "R": 3, "T": 2}, "csr", "float32", 32, (3, 37)),
    # work-oriented: chunks of W nonzeros crossing rows, walked by S threads together
    ("work_oriented", {"W": 3, "S": 8}, "csr", "float32", 32, (1, 19)),
    ("work_oriented_runs", {"W": 1, "P": 32, "R": 4}, "csr", "float64", 32, (7, 64)),
    ("work_oriented_runs", {"W": 5, "P": 16, "R": 2}, "coo", "float32", 64, (9, 33)),
]
# The runs read by 16-byte loads (dense_builds.sampled_vector's build): K a multiple of R, rows of
# 16-byte multiples; float32 runs of 4 (one float4), float64 runs of 4 (two double2).
VECTOR_CASES: list[tuple[str, dict[str, int], str, tuple[int, ...]]] = [
    ("group_mapped_runs", {"G": 4, "P": 32, "R": 4}, "float32", (4, 32, 132)),
    ("group_mapped_runs", {"G": 2, "P": 64, "R": 4}, "float64", (8, 72)),
    ("work_oriented_runs", {"W": 2, "P": 32, "R": 4}, "float32", (4, 132)),
]
IDS = [f"{k}{''.join(f'-{n}{v}' for n, v in p.items())}-{lay}-{d}-i{b}"
       for k, p, lay, d, b, _ in CASES]


def _schedule(kind: str, params: dict[str, int]) -> Schedule:
    return lower(load_spec(LANES_SPEC)) if kind == "library" else lanes_schedule(kind, params)


def _expected(U: np.ndarray, V: np.ndarray, view: object, lanes: int, value: np.dtype,
              run: int = 1) -> np.ndarray:
    """Each atom's value in the kernel's order, in ``value``: per-thread partial sums over its
    k in increasing order (thread (k div run) mod S), the shuffle tree, then the atom's value
    times the sum (module docstring)."""
    e = view.entries  # type: ignore[attr-defined]
    K = U.shape[1]
    products = U[e.row] * V[:, e.col].T  # (entries, K), rounded to value_t
    partial = np.zeros((len(e.row), lanes), dtype=value)
    for k in range(K):
        lane = k // run % lanes
        partial[:, lane] = partial[:, lane] + products[:, k]
    out = np.full(view.num_atoms, np.nan, dtype=value)  # type: ignore[attr-defined]
    out[e.atom] = e.val.astype(value) * lane_tree_sum(partial)
    return out


def run_lanes(schedule: Schedule, params: dict[str, int], layout: str, dtype: str, bits: int,
              A: sp.csr_matrix, K: int, *, sanitize: bool = False,
              options: tuple[str, ...] = ()) -> None:
    """Run the kernel on ``A`` with U[M, K] row-major and V stored [N, K] (the fast layout),
    and check its values and owners (module docstring)."""
    view = tile_view(layout, A)
    bound = bind(schedule, view.shape, None, params, dense_size=K)
    bound = dataclasses.replace(bound, index_bits=max(bits, bound.index_bits))
    cfg = make_config(schedule, dtype=dtype, layout=layout, bound=bound)
    value = np.dtype(dtype)
    host = host_arguments(layout, A, value, bound.index_bits)
    rng = np.random.default_rng(K)
    rows, cols = A.shape
    U = rng.uniform(-1, 1, size=(rows, K)).astype(value)
    V = rng.uniform(-1, 1, size=(K, cols)).astype(value)
    nnz = view.shape.nnz
    arrays = {**host.arrays, "u_data": U.ravel(), "v_data": np.ascontiguousarray(V.T).ravel(),
              "y": np.full(nnz, np.nan, value), "owner": np.full(nnz * K, -1, np.int32)}
    scalars = {"rows": rows, "cols": cols, "nnz": nnz, **host.scalars}
    scalars.update(schedule_definition(bound.kind).kernel_arguments(bound))
    scalars.update(dense_n=K, u_stride_m=K, u_stride_k=1, v_stride_k=1, v_stride_n=K)
    exe = emu.build(cfg, options) if options else layout_emulation.build(cfg, sanitize=sanitize)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")  # the shim keeps its barriers
    result = emu.execute(exe, cfg, bound, arrays, scalars, rows=nnz, atoms=nnz * K, env=env,
                         timeout=60)
    assert not np.isnan(result.y).any(), "an atom's value was never written"
    np.testing.assert_array_equal(
        result.y, _expected(U, V, view, bound.dense_space, value, run_length(schedule)))
    sim = simulate(bound, A, np.zeros((rows, K)), np.zeros((K, cols)))
    np.testing.assert_array_equal(result.owner.reshape(nnz, K), sim.owner)


@pytest.fixture(scope="module")
def built() -> None:
    """The g++ builds of CASES, in parallel."""
    configs = []
    for kind, params, layout, dtype, bits, _ in CASES:
        schedule = _schedule(kind, params)
        bound = bind(schedule, tile_view(layout, MATRICES["skewed"]).shape, None, params)
        bound = dataclasses.replace(bound, index_bits=bits)
        configs.append(make_config(schedule, dtype=dtype, layout=layout, bound=bound))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(emu.build, configs))


@pytest.mark.usefixtures("built")
@pytest.mark.parametrize(("kind", "params", "layout", "dtype", "bits", "ks"), CASES, ids=IDS)
def test_lanes_kernel_values_follow_the_tree_and_owners_the_simulation(
    kind: str, params: dict[str, int], layout: str, dtype: str, bits: int, ks: tuple[int, ...]
) -> None:
    schedule = _schedule(kind, params)
    for A in MATRICES.values():
        for K in ks:
            run_lanes(schedule, params, layout, dtype, bits, A, K)


def test_the_library_spec_kernel_on_the_cpu() -> None:
    schedule = _schedule("library", {})
    for K in (32, 11):
        run_lanes(schedule, {}, "csr", "float32", 32, MATRICES["skewed"], K)


@pytest.mark.parametrize(("kind", "params", "dtype", "ks"), VECTOR_CASES,
                         ids=[f"{k}-{d}" for k, _, d, _ in VECTOR_CASES])
def test_runs_read_by_vector_loads_give_the_documented_bits(
    kind: str, params: dict[str, int], dtype: str, ks: tuple[int, ...]
) -> None:
    """The vector build (the shim aborts on a 16-byte load that is not 16-byte aligned)."""
    schedule = _schedule(kind, params)
    for A in MATRICES.values():
        for K in ks:
            run_lanes(schedule, params, "csr", dtype, 32, A, K,
                      options=("-DTEAAL_DENSE_VECTOR=1",))


def test_the_runs_library_spec_kernel_on_the_cpu() -> None:
    schedule = lower(load_spec(RUNS_SPEC))
    assert run_length(schedule) == 4
    for K in (32, 128, 11):
        run_lanes(schedule, {}, "csr", "float32", 32, MATRICES["skewed"], K)
    run_lanes(schedule, {}, "csr", "float32", 32, MATRICES["skewed"], 64,
              options=("-DTEAAL_DENSE_VECTOR=1",))


@pytest.mark.parametrize("kind,params", [("thread_mapped", {"S": 8, "T": 2}),
                                         ("group_mapped", {"G": 4, "S": 4})])
def test_lanes_kernel_reads_and_writes_only_its_arrays(kind: str, params: dict[str, int]) -> None:
    """AddressSanitizer builds: no k past K in U's row or V's column (K not a multiple of S,
    K < S), no owner slot outside the atom's K."""
    schedule = _schedule(kind, params)
    for K in (3, 13):
        run_lanes(schedule, params, "csr", "float64", 32, MATRICES["skewed"], K, sanitize=True)
