"""Every layout x supported schedule x dtype on the GPU, on every corpus matrix.

For each case: the layout is built as documented (a padded layout over the limit must be
refused in one SKIP_TOO_LARGE line; when the padded size is moderate it is then built without
the limit and run anyway), one launch into a poisoned output, the rigorous Wilkinson verdict
(NOT_A_BUG), agreement with the CPU simulation, the trace build's owner of every atom equal to
the simulation's, and a second launch (bitwise equal for storing schedules).
"""

from __future__ import annotations

import functools
import zlib
from typing import Any

import numpy as np
import pytest

from teaal_loops.errors import LayoutError
from teaal_loops.layouts import TileView, tile_view
from teaal_loops.lowering import simulate, simulate_view
from teaal_loops.runtime.backend import gpu_available, unavailable_reason
from tests.gpu import cases as gpu_cases
from tests.layouts import cases

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not gpu_available(), reason=f"needs a CUDA GPU: {unavailable_reason()}"),
]

MATRICES = [m for m in gpu_cases.matrix_ids() if m.startswith("corpus:")] + [
    "synthetic:banded:rows=30000,nnz=300000,seed=2",
    "synthetic:emptyrows:rows=40000,nnz=100000,seed=5",
    # 16 rows of about 22,500 nonzeros: heavy in heavy:32 (1,250 panels, 10,000 from)
    "synthetic:longrows:rows=40000,nnz=400000,long_rows=16,fraction=0.9,seed=3",
]
CASES = [c[0] for c in cases.SCHEDULE_CASES]
UNGUARDED_MAX_ATOMS = 20_000_000  # padded layouts over the limit still run when this small


@functools.lru_cache(maxsize=8)
def _host(matrix_id: str, layout: str) -> tuple[Any, str | None]:
    """(host layout, refusal message or None)."""
    from teaal_loops.layouts import convert
    from teaal_loops.layouts.bcsr import block_shape as bcsr_block_shape

    A = gpu_cases.load(matrix_id)
    name, _, option = layout.partition(":")
    opts: dict[str, Any] = {"block": bcsr_block_shape(option or None)} if name == "bcsr" else {}
    try:
        return convert(A, layout, **opts), None  # (panels:3: the count travels in the name)
    except LayoutError as err:
        refusal = err.cli_line()
    rows = A.shape[0]
    atoms = {
        "ell": rows * int(np.diff(A.indptr).max(initial=0)),
        "dia": rows * len(np.unique(A.indices - np.repeat(np.arange(rows), np.diff(A.indptr)))),
    }.get(name, UNGUARDED_MAX_ATOMS + 1)
    if atoms > UNGUARDED_MAX_ATOMS:
        return None, refusal
    return convert(A, layout, padding_limit=None, **opts), refusal


@functools.lru_cache(maxsize=8)
def _view(matrix_id: str, layout: str) -> TileView:
    host, _ = _host(matrix_id, layout)
    return tile_view(layout, host)


@functools.lru_cache(maxsize=64)
def _kernel(case: str, dtype: str) -> Any:
    from teaal_loops.runtime import Kernel

    return Kernel(cases.schedule(case), dtype=dtype)


@pytest.mark.parametrize("matrix_id", MATRICES)
@pytest.mark.parametrize("case", CASES)
def test_layout_kernel_is_correct(case: str, matrix_id: str) -> None:
    import cupy

    from teaal_loops.runtime import validation

    A = gpu_cases.load(matrix_id)
    layout = cases.schedule(case).layout
    host, refusal = _host(matrix_id, layout)
    if refusal is not None:
        assert "SKIP_TOO_LARGE" in refusal and "\n" not in refusal
    if host is None:
        return  # refused as documented, and too large to run without the limit
    view = _view(matrix_id, layout)
    for dtype in ("float32", "float64"):
        kernel = _kernel(case, dtype)
        prepared = kernel.prepare(host)
        assert prepared.bound.matrix == view.shape  # bound to the layout's tiles and atoms
        x = gpu_cases.random_x(A.shape[1], dtype, seed=zlib.crc32(matrix_id.encode()))
        xd = kernel.vector(prepared, x)
        y = kernel.new_output(prepared)
        if not prepared.accumulates:
            y.fill(cupy.nan)
        kernel.launch(prepared, xd, y)
        y1 = y.get()
        assert not np.isnan(y1).any(), f"{dtype}: rows left unwritten"
        report = validation.rigorous(A, x, y1, dtype)
        assert report.verdict == "NOT_A_BUG", (dtype, report.lines())
        sim = simulate_view(prepared.bound, view, x)
        bound = validation.wilkinson_bound(A, x, dtype)
        assert np.all(np.abs(y1 - sim.y) <= bound), dtype
        owner = kernel.trace(prepared, xd).get()
        np.testing.assert_array_equal(owner, sim.owner, err_msg=dtype)
        y2 = kernel(prepared, xd).get()
        if prepared.accumulates:
            assert np.all(np.abs(y2.astype(np.float64) - y1) <= bound), dtype
        else:
            np.testing.assert_array_equal(y2.view(np.uint8), y1.view(np.uint8))


@pytest.mark.parametrize("case", ["csc/work_oriented", "coo/thread_mapped", "ell/merge_path",
                                  "dia/thread_mapped", "bcsr_4x4/work_oriented",
                                  "panels_3/merge_path", "panels_3/group_mapped"])
def test_cupyx_and_scipy_inputs_convert_to_every_layout(case: str) -> None:
    import cupy
    import cupyx.scipy.sparse as csp
    import scipy.sparse as sp

    rng = np.random.default_rng(2)
    offsets = (-40, -3, 0, 1, 7, 120)  # banded, so that DIA stays within its padding limit
    A = sp.diags([rng.uniform(-1, 1, 700) for _ in offsets], offsets, shape=(700, 500),
                 format="csr")
    x = rng.uniform(-1, 1, 500)
    kernel = _kernel(case, "float64")
    for matrix in (A, A.tocoo(), csp.csr_matrix(A)):
        y = kernel(matrix, cupy.asarray(x))
        np.testing.assert_allclose(y.get(), A @ x, rtol=1e-12, atol=1e-12)
    owner = kernel.trace(A, x).get()
    schedule_bound = kernel.prepare(A).bound
    np.testing.assert_array_equal(owner, simulate(schedule_bound, A, x).owner)


def test_compile_picks_the_layout_from_the_spec_format() -> None:
    import teaal_loops

    kernel = teaal_loops.compile(cases.LAYOUT_SPECS / "bcsr_4x4" / "thread_mapped.yaml",
                                 dtype="float32")
    assert kernel.layout == "bcsr:4x4"
    A = gpu_cases.load(MATRICES[0])
    x = gpu_cases.random_x(A.shape[1], "float32")
    y = kernel(A, x).get()
    np.testing.assert_allclose(y, A @ x.astype(np.float64), rtol=1e-3, atol=1e-3)


def test_run_command_refuses_excess_padding_and_validates_a_layout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from teaal_loops.cli import main

    spec = str(cases.SPECS / "thread_mapped.yaml")
    skewed = "longrows:rows=3000,nnz=60000,seed=4"
    assert main(["run", spec, "--layout", "ell", "--synthetic", skewed]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "SKIP_TOO_LARGE" in err
    layout_spec = str(cases.LAYOUT_SPECS / "dia" / "merge_path.yaml")
    banded = "banded:rows=20000,nnz=200000,seed=2"
    assert main(["run", layout_spec, "--synthetic", banded, "--rigorous", "--repeat", "3"]) == 0
    assert "Verdict: NOT_A_BUG" in capsys.readouterr().out


def test_a_device_matrix_is_built_into_panels_on_the_gpu_as_the_host_builds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cupyx input takes the device builder (the host builder is not called) and gives the
    arrays the host builder gives."""
    import cupy
    import cupyx.scipy.sparse as csp
    import scipy.sparse as sp

    from teaal_loops.layouts import convert
    from teaal_loops.runtime import device_matrix
    from teaal_loops.runtime.device_matrix import converter

    A = sp.random(3000, 7001, density=0.003, format="csr", random_state=8)
    host = convert(A, "panels:3")

    def no_host_build(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a device matrix went through the host builder")

    monkeypatch.setattr(device_matrix, "to_device_layout", no_host_build)
    device = converter("panels:3")(csp.csr_matrix(A), np.dtype("float64"))
    assert device.tiles is not None and device.tiles.rows == 3 * 3000
    np.testing.assert_array_equal(device.arrays["indptr"].get(), host.indptr)
    np.testing.assert_array_equal(device.arrays["indices"].get(), host.indices)
    np.testing.assert_array_equal(device.arrays["values"].get(), host.data)
    kernel = _kernel("panels_3/group_mapped", "float64")
    x = np.random.default_rng(1).uniform(-1, 1, 7001)
    y = kernel(csp.csr_matrix(A), cupy.asarray(x)).get()
    np.testing.assert_allclose(y, A @ x, rtol=1e-12, atol=1e-12)


LONG_ROWS = "synthetic:longrows:rows=40000,nnz=400000,long_rows=16,fraction=0.9,seed=3"


def test_a_device_matrix_with_heavy_rows_is_built_on_the_gpu_as_the_host_builds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cupyx input takes the heavy layout's device builder: the host builder's arrays and
    counts (H and P, kernel arguments of their own), and SpMV and SpMM right from it."""
    import cupy
    import cupyx.scipy.sparse as csp

    import teaal_loops
    from teaal_loops.layouts import convert
    from teaal_loops.runtime import device_matrix
    from teaal_loops.runtime.device_matrix import converter, host_arguments

    A = gpu_cases.load(LONG_ROWS)
    host = convert(A, "heavy:1024")
    assert len(host.heavy_rows) == 16
    packed = host_arguments("heavy:1024", host, np.dtype("float64"))

    def no_host_build(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a device matrix went through the host builder")

    monkeypatch.setattr(device_matrix, "to_device_layout", no_host_build)
    device = converter("heavy:1024")(csp.csr_matrix(A), np.dtype("float64"))
    assert device.scalars == packed.scalars == {"heavy": 16, "panels": 40}
    for name, array in packed.arrays.items():
        np.testing.assert_array_equal(device.arrays[name].get(), array, err_msg=name)
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, A.shape[1])
    spmv = teaal_loops.compile(cases.SPECS / "merge_path.yaml", layout="heavy:1024",
                               dtype="float64")
    y = spmv(csp.csr_matrix(A), cupy.asarray(x)).get()
    np.testing.assert_allclose(y, A @ x, rtol=1e-12, atol=1e-12)
    B = rng.uniform(-1, 1, (A.shape[1], 32))
    for spec in ("nonzero_split_vec", "group_lanes_vec"):
        spmm = teaal_loops.compile(cases.SPECS / "spmm" / f"{spec}.yaml", layout="heavy:1024",
                                   dtype="float64")
        Z = spmm(csp.csr_matrix(A), cupy.asarray(B)).get()
        np.testing.assert_allclose(Z, A @ B, rtol=1e-12, atol=1e-12, err_msg=spec)


def test_a_device_matrix_split_runs_as_two_launches_that_sum_to_the_product() -> None:
    """split_heavy on the GPU: the light rows under one spec store every row, then the heavy
    rows' pieces (``pieces:1024``, the device builder) under another add into that output
    (bind_dense with accumulate=True; SpMV by the raw launch, which never zeroes)."""
    import cupy
    import cupyx.scipy.sparse as csp

    import teaal_loops

    A = gpu_cases.load(LONG_ROWS)
    light, heavy = teaal_loops.split_heavy(csp.csr_matrix(A), 1024)
    assert isinstance(light, csp.csr_matrix) and isinstance(heavy, csp.csr_matrix)
    assert heavy.nnz + light.nnz == A.nnz and heavy.nnz > 0.8 * A.nnz  # 16 rows of 90%
    rng = np.random.default_rng(4)
    B = rng.uniform(-1, 1, (A.shape[1], 32))
    spmm_light = teaal_loops.compile(cases.SPECS / "spmm" / "group_lanes_vec.yaml",
                                     dtype="float64")
    spmm_heavy = teaal_loops.compile(cases.SPECS / "spmm" / "nonzero_split_vec.yaml",
                                     layout="pieces:1024", dtype="float64")
    Bd = cupy.asarray(B)
    Z = spmm_light(light, Bd)
    both = spmm_heavy.bind_dense(heavy, (Bd,), out=Z, accumulate=True)
    both.launch()
    np.testing.assert_allclose(Z.get(), A @ B, rtol=1e-12, atol=1e-12)
    Z2 = spmm_light(light, Bd)  # launched again, the pieces add again: no zeroing
    both2 = spmm_heavy.bind_dense(heavy, (Bd,), out=Z2, accumulate=True)
    both2.launch()
    both2.launch()
    np.testing.assert_allclose(Z2.get(), A @ B + heavy.get() @ B, rtol=1e-11, atol=1e-11)
    x = rng.uniform(-1, 1, A.shape[1])
    spmv_light = teaal_loops.compile(cases.SPECS / "merge_path.yaml", dtype="float64")
    spmv_heavy = teaal_loops.compile(cases.SPECS / "group_mapped.yaml", layout="pieces:1024",
                                     dtype="float64")
    xd = cupy.asarray(x)
    y = spmv_light(light, xd)
    spmv_heavy.launch(spmv_heavy.prepare(heavy), xd, y)
    np.testing.assert_allclose(y.get(), A @ x, rtol=1e-12, atol=1e-12)
    with pytest.raises(LayoutError, match=r"fewer than 320 \(8 for each of 40 panels\)"):
        spmv_heavy.prepare(csp.csr_matrix(A))


def test_a_device_split_at_a_low_minimum_puts_rows_of_hundreds_in_the_pieces() -> None:
    """``split_heavy(..., min_nnz=64)`` on an R-MAT graph (the split R-MAT's SpMM gains
    from): the 475 rows of 64 nonzeros and more, half the nonzeros, become pieces that the
    device builder takes, and the two launches sum to the product."""
    import cupy
    import cupyx.scipy.sparse as csp

    import teaal_loops

    A = gpu_cases.load("synthetic:rmat:rows=16384,nnz=200000,seed=1")
    light, heavy = teaal_loops.split_heavy(csp.csr_matrix(A), 8192, min_nnz=64)
    lengths = cupy.diff(heavy.indptr)
    assert int((lengths > 0).sum()) == int((np.diff(A.indptr) >= 64).sum()) == 475
    assert int(lengths[lengths > 0].min()) >= 64 and heavy.nnz > 0.5 * A.nnz
    B = cupy.asarray(np.random.default_rng(5).uniform(-1, 1, (A.shape[1], 8)))
    spmm_light = teaal_loops.compile(cases.SPECS / "spmm" / "group_lanes_vec.yaml",
                                     dtype="float64")
    spmm_heavy = teaal_loops.compile(cases.SPECS / "spmm" / "nonzero_split_vec.yaml",
                                     layout="pieces:8192", dtype="float64")
    Z = spmm_light(light, B)
    spmm_heavy.bind_dense(heavy, (B,), out=Z, accumulate=True).launch()
    np.testing.assert_allclose(Z.get(), A @ B.get(), rtol=1e-12, atol=1e-12)


def test_auto_runs_a_large_random_matrix_over_column_panels() -> None:
    """Rule T3 on the GPU: 16M nonzeros at random over 4M columns (x of 32 MiB in float64):
    auto compiles merge-path over two column panels, and its result is right."""
    import cupy
    import cupyx.scipy.sparse as csp

    import teaal_loops
    from teaal_loops.spec import load_spec_string

    rows, cols, per_row = 1 << 20, 1 << 22, 16
    rng = cupy.random.default_rng(5)
    indices = rng.integers(0, cols, rows * per_row, dtype=cupy.int32)
    indptr = cupy.arange(rows + 1, dtype=cupy.int32) * per_row
    values = rng.uniform(-1, 1, rows * per_row)
    A = csp.csr_matrix((values, indices, indptr), shape=(rows, cols))
    spec = load_spec_string(
        'einsum: {declaration: {A: [M, K], B: [K], Z: [M]}, expressions: ["Z[m] = A[m, k] * B[k]"]}\n'
        "x-teaal-loops: {schedule: auto}\n"
    )
    kernel = teaal_loops.compile(spec, dtype="float64")
    x = rng.uniform(-1, 1, cols)
    y = kernel(A, x)
    assert kernel.last_choice.rule == "T3" and kernel.kernel_for(A).layout == "panels:2"
    want = A @ x
    bound = 2 * (per_row + 2) * np.finfo(np.float64).eps * (abs(A) @ abs(x))
    assert bool(cupy.all(cupy.abs(y - want) <= bound))
