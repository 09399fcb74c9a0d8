"""Every layout x supported schedule executed on the CPU: values and owners.

The generated CUDA of each layout (trace switch on) runs on the CPU through the g++ CUDA shim
of tests/codegen. The owner of every atom must equal the IR simulation's, which is computed
from the layout's tile view alone (teaal_loops.layouts); storing schedules must write every
row (y is poisoned with NaN first); values must match the float64 reference A @ x.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.codegen import make_config
from teaal_loops.layouts import tile_view
from teaal_loops.lowering import simulate
from teaal_loops.runtime.device_matrix import host_arguments
from teaal_loops.schedules import bind
from teaal_loops.types import MatrixShape
from tests.layouts import cases
from tests.layouts import emulation as emu

pytestmark = pytest.mark.skipif(emu.CXX is None, reason="no C++ compiler (g++/clang++) found")

MATRICES = cases.matrices()
CASE_IDS = [c[0] for c in cases.SCHEDULE_CASES]
# float32: one build per layout (each build costs about a second of g++)
F32_CASES = [
    "csc/work_oriented", "coo/thread_mapped", "ell/merge_path", "dia/work_oriented",
    "bcsr_4x4/thread_mapped", "bcsr_3x2/work_oriented", "panels_3/merge_path",
    "heavy_32/group_mapped",
]
SANITIZED = [
    "ell/thread_mapped", "ell/merge_path", "dia/thread_mapped", "dia/work_oriented",
    "dia/merge_path", "bcsr_3x2/thread_mapped", "bcsr_3x2/work_oriented", "csc/thread_mapped",
    "panels_3/group_mapped", "heavy_32/work_oriented",
]

# Every case on every matrix with default parameters; the variants that split tiles or loop
# on the matrices that stress them (skewed rows, bands, stored zeros), to keep CI fast.
STRESS = ("skewed", "banded", "tall_with_zeros")
RUNS = [
    (case, params, matrix)
    for case in CASE_IDS
    for i, params in enumerate(cases.PARAM_VARIANTS[cases.kind_of(case)])
    for matrix in (sorted(MATRICES) if i == 0 else STRESS)
]


@pytest.fixture(scope="module", autouse=True)
def _build_all() -> None:
    """Compile every (case, dtype) up front, in parallel (2 cores on CI)."""
    jobs = []
    for dtype, ids in (("float64", CASE_IDS), ("float32", F32_CASES)):
        for case in ids:
            schedule = cases.schedule(case)
            bound = bind(schedule, MatrixShape(rows=10, cols=10, nnz=10))
            jobs.append(make_config(schedule, dtype=dtype, bound=bound))
    sanitized = []
    for case in SANITIZED:
        schedule = cases.schedule(case)
        bound = bind(schedule, MatrixShape(rows=10, cols=10, nnz=10))
        sanitized.append(make_config(schedule, dtype="float64", bound=bound))
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(emu.build, jobs))
        # a toolchain without libasan fails these; the sanitizer test then skips
        list(pool.map(lambda cfg: _try_sanitized_build(cfg), sanitized))


def _try_sanitized_build(cfg: Any) -> None:
    try:
        emu.build(cfg, sanitize=True)
    except Exception:  # noqa: BLE001 - reported by the test that needs it
        pass


def _run(case: str, params: dict[str, int], A: sp.csr_matrix, dtype: str) -> Any:
    schedule = cases.schedule(case)
    host = cases.host_layout_of(case, A)
    view = tile_view(schedule.layout, host)
    bound = bind(schedule, view.shape, None, params)
    args = host_arguments(schedule.layout, host, np.dtype(dtype), bound.index_bits)
    assert args.tiles == view.shape  # runtime and simulation bind to the same tiles and atoms
    x = np.random.default_rng(11).uniform(-1, 1, size=A.shape[1])
    result = emu.run(make_config(schedule, dtype=dtype, bound=bound), bound, args, x)
    return bound, host, x, result


@pytest.mark.parametrize(
    ("case", "params", "matrix"), RUNS,
    ids=[f"{c}-{'-'.join(map(str, p.values())) or 'default'}-{m}" for c, p, m in RUNS],
)
def test_owners_and_values_match_the_simulation(
    case: str, params: dict[str, int], matrix: str
) -> None:
    A = MATRICES[matrix]
    bound, host, x, result = _run(case, params, A, "float64")
    sim = simulate(bound, host, x)
    assert len(result.owner) == len(sim.owner) == bound.matrix.nnz
    np.testing.assert_array_equal(result.owner, sim.owner)
    assert np.all(result.owner >= 0) or bound.matrix.nnz == 0, "an atom nobody processed"
    assert not np.isnan(result.y).any(), "a row was never written"
    np.testing.assert_allclose(result.y, A @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sim.y, A @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", F32_CASES)
def test_float32_kernels_agree_with_the_reference(case: str) -> None:
    A = MATRICES["skewed"]
    bound, host, x, result = _run(case, {}, A, "float32")
    assert result.y.dtype == np.float32
    np.testing.assert_allclose(result.y, A @ x, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(result.owner, simulate(bound, host, x).owner)




@pytest.mark.parametrize("case", SANITIZED)
def test_no_access_outside_the_arrays(case: str) -> None:
    """Built with AddressSanitizer: ELL padding (column -1) and DIA slots outside the matrix
    must not read x, partial BCSR blocks must not read x past the last column nor write y past
    the last row. The arrays are sized exactly, so any such access aborts the run."""
    schedule = cases.schedule(case)
    bound0 = bind(schedule, MatrixShape(rows=10, cols=10, nnz=10))
    cfg = make_config(schedule, dtype="float64", bound=bound0)
    try:
        emu.build(cfg, sanitize=True)
    except Exception as err:  # pragma: no cover - a toolchain without libasan
        pytest.skip(f"AddressSanitizer build failed: {err}")
    for name in ("skewed", "tall_with_zeros", "banded"):
        A = MATRICES[name]
        host = cases.host_layout_of(case, A)
        bound = bind(schedule, tile_view(schedule.layout, host).shape)
        args = host_arguments(schedule.layout, host, np.dtype("float64"), bound.index_bits)
        x = np.random.default_rng(3).uniform(-1, 1, size=A.shape[1])
        result = emu.run(cfg, bound, args, x, sanitize=True)
        np.testing.assert_allclose(result.y, A @ x, rtol=1e-12, atol=1e-12)
