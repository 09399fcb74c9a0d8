"""Every schedule's kernel executed on the CPU (g++ + a CUDA shim): values and owners.

The generated CUDA source, with the trace switch on, is compiled as C++ against
tests/codegen/cuda_emulation.h and run thread by thread (lanes that shuffle or synchronise run
concurrently). Its owner array must equal the IR simulation's atom by atom, stores must cover
every row (y is poisoned with NaN first), and values must match the float64 reference. This is
the CPU-side check of the ownership contract; tests/gpu repeats it on real hardware.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.codegen import make_config
from teaal_loops.errors import ParameterError
from teaal_loops.ir.model import Schedule
from teaal_loops.lowering import simulate
from teaal_loops.schedules import bind
from teaal_loops.types import MatrixShape
from tests.codegen import hand_schedules as hs
from tests.codegen import host_emulation as emu

pytestmark = pytest.mark.skipif(emu.CXX is None, reason="no C++ compiler (g++/clang++) found")


def _matrices() -> dict[str, sp.csr_matrix]:
    rng = np.random.default_rng(7)
    mats: dict[str, sp.csr_matrix] = {}
    # skewed rows, empty rows (including leading and trailing ones), a long row
    lengths = rng.integers(0, 6, size=57)
    lengths[[0, 1, 20, 55, 56]] = 0
    lengths[30] = 140
    cols = 150
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths])
    data = rng.uniform(-1, 1, size=indptr[-1])
    mats["skewed"] = sp.csr_matrix((data, indices, indptr), shape=(57, cols))
    mats["rectangular"] = sp.random(23, 70, density=0.2, format="csr", random_state=3)
    mats["single_row"] = sp.csr_matrix(rng.uniform(-1, 1, size=(1, 33)))
    mats["all_empty"] = sp.csr_matrix((9, 4))
    return mats


MATRICES = _matrices()

# (variant, parameters that force multi-level loops and split rows)
CASES: list[tuple[str, Schedule, dict[str, int]]] = [
    ("thread_default", hs.thread_mapped(), {}),
    ("thread_grid_stride", hs.thread_mapped(), {"NUM_TILES": 9, "NUM_THREADS": 3}),
    ("thread_depth0", hs.thread_mapped(sizes=(), space_levels=(0,), time_levels=()), {}),
    (
        "thread_depth1_time",
        hs.thread_mapped(sizes=("S",), space_levels=(0,), time_levels=(1,), params={"S": 5}),
        {},
    ),
    (
        "thread_two_space",
        hs.thread_mapped(space_levels=(2, 0), time_levels=(1,)),
        {"NUM_TILES": 12, "NUM_THREADS": 4},
    ),
    ("group_g1", hs.group_mapped(1), {"NUM_TILES": 8, "GRID_SIZE": 4}),
    ("group_g4", hs.group_mapped(4), {"NUM_TILES": 8, "GRID_SIZE": 4}),
    ("group_g32", hs.group_mapped(32), {}),
    ("group_g64_shared_block", hs.group_mapped(64), {"NUM_TILES": 6, "GRID_SIZE": 3}),
    ("group_g256", hs.group_mapped(256), {}),
    ("work_default", hs.work_oriented(), {}),
    ("work_wpt3", hs.work_oriented(), {"WORK_PER_THREAD": 3}),
    ("work_wpt1", hs.work_oriented(), {"WORK_PER_THREAD": 1}),
    ("merge_default", hs.merge_path(), {}),
    ("merge_ipt5", hs.merge_path(), {"ITEMS_PER_THREAD": 5}),
    ("merge_ipt1", hs.merge_path(), {"ITEMS_PER_THREAD": 1}),
]


# float32 builds: one per schedule kind (each build costs about a second of g++)
F32_KINDS = ("thread_grid_stride", "group_g4", "group_g64_shared_block", "work_wpt3", "merge_ipt5")
F32_CASES = [c for c in CASES if c[0] in F32_KINDS]


@pytest.fixture(scope="module", autouse=True)
def _build_all() -> None:
    """Compile every (variant, dtype) up front, in parallel (2 cores on CI)."""
    jobs = []
    for dtype, cases in (("float64", CASES), ("float32", F32_CASES)):
        for _, schedule, params in cases:
            bound = bind(schedule, MatrixShape(rows=10, cols=10, nnz=10), None, params)
            jobs.append(make_config(schedule, dtype=dtype, bound=bound))
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(emu.build, jobs))


def _run(schedule: Schedule, params: dict[str, int], A: sp.csr_matrix, dtype: str) -> Any:
    bound = bind(schedule, MatrixShape(rows=A.shape[0], cols=A.shape[1], nnz=A.nnz), None, params)
    x = np.random.default_rng(11).uniform(-1, 1, size=A.shape[1])
    result = emu.run(make_config(schedule, dtype=dtype, bound=bound), bound, A, x)
    return bound, x, result


@pytest.mark.parametrize("matrix", sorted(MATRICES))
@pytest.mark.parametrize(("case", "schedule", "params"), CASES, ids=[c[0] for c in CASES])
def test_owners_and_values_match_the_simulation(
    case: str, schedule: Schedule, params: dict[str, int], matrix: str
) -> None:
    A = MATRICES[matrix]
    bound, x, result = _run(schedule, params, A, "float64")
    sim = simulate(bound, A, x)
    np.testing.assert_array_equal(result.owner, sim.owner)
    assert not np.isnan(result.y).any(), "a row was never written"
    np.testing.assert_allclose(result.y, A @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("case", "schedule", "params"), F32_CASES, ids=[c[0] for c in F32_CASES]
)
def test_float32_kernels_agree_with_the_reference(
    case: str, schedule: Schedule, params: dict[str, int]
) -> None:
    A = MATRICES["skewed"]
    bound, x, result = _run(schedule, params, A, "float32")
    assert result.y.dtype == np.float32
    np.testing.assert_allclose(result.y, A @ x, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(result.owner, simulate(bound, A, x).owner)


def test_non_nested_tile_sizes_are_refused_by_name() -> None:
    """Where S_{j+1} is not a multiple of S_j, TeAAL's positional and coordinate readings of a
    split disagree on owners, so binding refuses rather than pick one silently."""
    A = MATRICES["rectangular"]
    with pytest.raises(ParameterError, match="NUM_TILES = 7 is not a multiple of NUM_THREADS = 3"):
        _run(hs.thread_mapped(), {"NUM_TILES": 7, "NUM_THREADS": 3}, A, "float64")


def test_default_tile_sizes_nest_around_a_bound_one() -> None:
    A = MATRICES["rectangular"]
    bound, x, result = _run(hs.thread_mapped(), {"NUM_THREADS": 3}, A, "float64")
    assert bound.sizes[0] % 3 == 0
    np.testing.assert_array_equal(result.owner, simulate(bound, A, x).owner)


@pytest.mark.parametrize(
    ("case", "schedule", "params"),
    [
        ("work_default", hs.work_oriented(), {}),
        ("merge_ipt16", hs.merge_path(), {"ITEMS_PER_THREAD": 16}),
    ],
)
def test_blocks_spanning_more_rows_than_shared_memory_holds(
    case: str, schedule: Schedule, params: dict[str, int]
) -> None:
    """3000 rows and 40 nonzeros: a block spans more than TPB * 8 rows, so the kernel reads
    the row boundaries from the layout instead of shared memory; owners must not change."""
    rng = np.random.default_rng(4)
    A = sp.random(3000, 50, density=40 / 150000, format="csr", random_state=rng)
    A.data[:] = rng.uniform(-1, 1, A.nnz)
    bound, x, result = _run(schedule, params, A, "float64")
    np.testing.assert_array_equal(result.owner, simulate(bound, A, x).owner)
    np.testing.assert_allclose(result.y, A @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("items", [40, 97])
def test_merge_path_chunks_longer_than_the_staged_tile_take_the_direct_path(
    dtype: str, items: int
) -> None:
    """Past 32 (f32) or 16 (f64) items a thread the staged shared-memory tile cannot hold a
    block's share, and merge-path walks the layout directly: owners and values must not move."""
    for A in (MATRICES["rectangular"], _skewed(seed=items)):
        bound, x, result = _run(hs.merge_path(), {"ITEMS_PER_THREAD": items}, A, dtype)
        np.testing.assert_array_equal(result.owner, simulate(bound, A, x).owner)
        tol = 1e-4 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(result.y, A @ x, rtol=tol, atol=tol)


def _skewed(seed: int) -> sp.csr_matrix:
    """Rows of 0 to 400 nonzeros, a few empty rows in a run: rows split across chunks."""
    rng = np.random.default_rng(seed)
    lengths = rng.choice([0, 0, 1, 3, 17, 400], size=300)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(500, n, replace=False)) for n in lengths])
    return sp.csr_matrix((rng.uniform(-1, 1, len(indices)), indices, indptr), shape=(300, 500))
