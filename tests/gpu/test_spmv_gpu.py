"""Every kernel x dtype x matrix on the GPU: rigorous verdict, cuSPARSE, simulation, trace, races.

For each case: one launch into a poisoned output (NaN where the schedule stores), the trace
build's owner array against ``lowering.simulate`` (identical), the Wilkinson-bound verdict against the
float64 reference (NOT_A_BUG), agreement with cuSPARSE (``cupyx csr @ x``) and with the
simulated result within the bound, and a second launch that must be bitwise equal for STORE and
GROUP_REDUCE schedules (no race) and within the bound for atomic ones.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from teaal_loops.lowering import simulate
from teaal_loops.runtime import validation
from tests.gpu import cases

pytestmark = pytest.mark.gpu

MATRICES = cases.matrix_ids()
KERNELS = [c[0] for c in cases.KERNEL_CASES]


@pytest.mark.parametrize("matrix_id", MATRICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", KERNELS)
def test_kernel_is_correct(case: str, dtype: str, matrix_id: str) -> None:
    import cupy
    import cupyx.scipy.sparse as csp

    A = cases.load(matrix_id)
    kernel = cases.kernel(case, dtype)
    prepared = kernel.prepare(A)
    x = cases.random_x(A.shape[1], dtype, seed=zlib.crc32(matrix_id.encode()))
    xd = kernel.vector(prepared, x)

    y = kernel.new_output(prepared)
    if not prepared.accumulates:
        y.fill(cupy.nan)
    kernel.launch(prepared, xd, y)
    y1 = y.get()
    assert not np.isnan(y1).any(), "rows left unwritten"

    report = validation.rigorous(A, x, y1, dtype)
    assert report.verdict == "NOT_A_BUG", report.lines()

    bound = validation.wilkinson_bound(A, x, dtype)
    sim = simulate(prepared.bound, A, x)
    assert np.all(np.abs(y1 - sim.y) <= bound)
    cus = (csp.csr_matrix(A.astype(dtype)) @ cupy.asarray(x)).get()
    assert np.all(np.abs(y1.astype(np.float64) - cus) <= 2 * bound)

    owner = kernel.trace(prepared, xd).get()
    np.testing.assert_array_equal(owner, sim.owner)

    y2 = kernel(prepared, xd).get()
    if prepared.accumulates:
        assert np.all(np.abs(y2.astype(np.float64) - y1) <= bound)
    else:
        np.testing.assert_array_equal(y2.view(np.uint8), y1.view(np.uint8))  # bitwise
