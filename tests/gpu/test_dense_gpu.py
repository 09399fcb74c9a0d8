"""SpMM, SDDMM and the transposed forms on the GPU: values against SciPy in float64 within a
Wilkinson-style bound, and the trace build's owner of every (atom, dense index) against the
schedule's rule (the SpMV owner of the atom, the dense rank's slot between worker and lanes:
``thread = (atom_owner // G * DS + n % DS) * G + atom_owner % G``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops import pipeline
from teaal_loops.layouts import tile_view
from teaal_loops.lowering import owners
from teaal_loops.lowering.simulate import atom_owners
from teaal_loops.matrix import synthetic
from teaal_loops.runtime import dense_builds
from teaal_loops.schedules import bind
from teaal_loops.types import DeviceInfo
from tests.conftest import corpus_dir

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
LOOPS = corpus_dir() / "teaal-specs" / "loops"
COMPILER = corpus_dir() / "teaal-specs" / "teaal-compiler"

SPMM_SPECS: list[tuple[str, Path, dict[str, int]]] = [
    ("lanes_over_n", REPO / "specs/spmm/lanes_over_n.yaml", {}),
    ("lanes_over_n_tiled", REPO / "specs/spmm/lanes_over_n_tiled.yaml", {"N_TILE": 4}),
    ("group_lanes_over_k", REPO / "specs/spmm/group_lanes_over_k.yaml", {"G": 8}),
    ("nonzero_split", REPO / "specs/spmm/nonzero_split.yaml", {}),
    # DS = 3 does not divide a block's 128 threads; chunks of 5 cross rows and blocks
    ("nonzero_split_small", REPO / "specs/spmm/nonzero_split.yaml",
     {"NNZ_PER_WORKER": 5, "N_LANES": 3}),
    # contiguous runs of columns: at N = 8 the float32 runs are read by vector loads (one
    # float4; N_VEC = 8: two), at 1 and 33 one by one
    ("nonzero_split_vec", REPO / "specs/spmm/nonzero_split_vec.yaml", {}),
    ("nonzero_split_vec8", REPO / "specs/spmm/nonzero_split_vec.yaml",
     {"NNZ_PER_WORKER": 5, "N_VEC": 8}),
    ("lanes_over_n_vec", REPO / "specs/spmm/lanes_over_n_vec.yaml", {}),
    # a worker walks 3 consecutive rows (the last run partial on every matrix below)
    ("lanes_over_n_vec_rows", REPO / "specs/spmm/lanes_over_n_vec_rows.yaml", {"ROWS": 3}),
    ("group_lanes_vec", REPO / "specs/spmm/group_lanes_vec.yaml", {}),
    ("group_lanes_vec8", REPO / "specs/spmm/group_lanes_vec.yaml", {"ROW_LANES": 8, "N_VEC": 8}),
    ("group_lanes_vec1", REPO / "specs/spmm/group_lanes_vec.yaml", {"ROW_LANES": 1}),
    ("loops_thread", LOOPS / "spmm_thread_mapped__cell08_0.yaml",
     {"NUM_TILES": 64, "NUM_THREADS": 16}),
    ("loops_group", LOOPS / "spmm_group_mapped__cell08_0.yaml",
     {"NUM_TILES": 64, "GRID_SIZE": 8, "BLOCK_SIZE": 4}),
    ("loops_work", LOOPS / "spmm_work_oriented__cell07_0.yaml", {"WORK_PER_THREAD": 5}),
    ("ver2_thread", LOOPS / "ver2__spmm_thread_mapped__cell08_0.yaml", {"BLOCK_SIZE": 32}),
    ("teaal_spmm_transposed", COMPILER / "spmm.yaml", {}),
]
SDDMM_SPECS: list[tuple[str, Path, dict[str, int]]] = [
    ("thread_per_nonzero", REPO / "specs/sddmm/thread_per_nonzero.yaml", {}),
    ("teaal_sddmm", COMPILER / "sddmm.yaml", {}),
]


def _matrices() -> dict[str, sp.csr_matrix]:
    out = {
        "uniform": synthetic("uniform", rows=300, cols=257, nnz=3000, seed=1),
        "rmat": synthetic("rmat", rows=512, nnz=6000, seed=2),
        "empty_rows": sp.random(200, 150, density=0.01, format="csr", random_state=3),
    }
    west = corpus_dir() / "matrices" / "west0067.mtx.gz"
    if west.exists():
        import scipy.io

        out["west0067"] = sp.csr_matrix(scipy.io.mmread(str(west)))
    return out


MATRICES = _matrices()


def _need(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} absent: set TEAAL_LOOPS_CORPUS to the shared corpus")


def _bound(absolute: np.ndarray[Any, Any], terms: int, dtype: str) -> np.ndarray[Any, Any]:
    eps = np.finfo(np.dtype(dtype)).eps / 2
    gamma = terms * eps / max(1 - terms * eps, 1e-3)
    return gamma * absolute + np.finfo(np.dtype(dtype)).tiny


def _expected_owner(kernel: Any, op: Any, size: int) -> np.ndarray[Any, Any]:
    """``op``: the matrix the layout holds (A, or A^T for a transposed spec)."""
    view = tile_view(kernel.layout, op)
    bound = bind(kernel.schedule, view.shape, DeviceInfo.h100(), kernel.params,
                 dense_size=size)
    atom = atom_owners(bound, view.tile_ptr)
    g, ds = bound.group_size, bound.dense_space
    n = np.arange(size, dtype=np.int64)
    dense = kernel.schedule.form.dense
    # the slot of n: n mod DS, or n div DT where a thread owns DT neighbouring columns
    slot = n // bound.dense_time if dense is not None and dense.contiguous else n % ds
    expected = ((atom[:, None] // g) * ds + slot[None, :]) * g + atom[:, None] % g
    # the rule written out here is the simulation's (atoms, D) owners too
    np.testing.assert_array_equal(owners(bound, view.tile_ptr), expected)
    return expected


@pytest.mark.parametrize("width", [1, 8, 33])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("matrix", sorted(MATRICES))
@pytest.mark.parametrize("case", [c[0] for c in SPMM_SPECS])
def test_spmm(case: str, matrix: str, dtype: str, width: int) -> None:
    import cupy

    _, spec, params = next(c for c in SPMM_SPECS if c[0] == case)
    _need(spec)
    kernel = pipeline.compile(spec, dtype=dtype, params=params)
    A = MATRICES[matrix]
    op = A.T.tocsr() if kernel.schedule.form.transposed else A
    rng = np.random.default_rng(width)
    B = rng.uniform(-1, 1, (op.shape[1], width)).astype(dtype).astype(np.float64)
    op = op.astype(dtype).astype(np.float64)
    Z = kernel(A, cupy.asarray(B, dtype=dtype)).get()
    want = op @ B
    terms = int(np.diff(op.indptr).max()) + 1 if op.nnz else 1
    assert np.all(np.abs(Z - want) <= _bound(abs(op) @ np.abs(B), terms, dtype))
    # Fortran-ordered and NumPy inputs give the same values (read through strides / uploaded)
    Zf = kernel(A, cupy.asfortranarray(cupy.asarray(B, dtype=dtype))).get()
    if not kernel.accumulates:  # atomics may add in another order
        np.testing.assert_array_equal(Zf, Z)
    else:
        assert np.all(np.abs(Zf - want) <= _bound(abs(op) @ np.abs(B), terms, dtype))
    owner = kernel.trace_dense(A, (cupy.asarray(B, dtype=dtype),)).get()
    np.testing.assert_array_equal(owner, _expected_owner(kernel, op, width))


@pytest.mark.parametrize("width", [1, 32, 37])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("matrix", sorted(MATRICES))
@pytest.mark.parametrize("case", [c[0] for c in SDDMM_SPECS])
def test_sddmm(case: str, matrix: str, dtype: str, width: int) -> None:
    import cupy

    _, spec, params = next(c for c in SDDMM_SPECS if c[0] == case)
    _need(spec)
    kernel = pipeline.compile(spec, dtype=dtype, params=params)
    C = MATRICES[matrix]
    C.sort_indices()
    rng = np.random.default_rng(width)
    # the kernel's inputs, rounded to its dtype, are the reference's inputs too
    U = rng.uniform(-1, 1, (C.shape[0], width)).astype(dtype).astype(np.float64)
    V = rng.uniform(-1, 1, (width, C.shape[1])).astype(dtype).astype(np.float64)
    C = C.astype(dtype).astype(np.float64)
    Z = kernel(C, cupy.asarray(U, dtype=dtype), cupy.asarray(V, dtype=dtype))
    got = Z.get().tocsr()
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    want = C.data * np.einsum("ij,ji->i", U[rows], V[:, C.indices])
    absolute = np.abs(C.data) * np.einsum("ij,ji->i", np.abs(U[rows]), np.abs(V[:, C.indices]))
    got.sort_indices()
    np.testing.assert_array_equal(got.indices, C.indices)
    assert np.all(np.abs(got.data - want) <= _bound(absolute, width + 1, dtype))
    owner = kernel.trace_dense(C, (cupy.asarray(U, dtype=dtype), cupy.asarray(V, dtype=dtype)))
    np.testing.assert_array_equal(
        owner.get(), _expected_owner(kernel, C, width)
    )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_contiguous_runs_are_read_by_vector_loads_where_b_allows(dtype: str) -> None:
    """At N = 32 the vector build runs for a C-ordered B and not for a view whose rows are
    not 16-byte aligned, and writes Z by 16-byte stores where Z's rows are aligned too; all
    three builds give the same bits (the same sums in the same order: a thread-mapped spec,
    whose rows have one owner)."""
    import cupy

    kernel = pipeline.compile(REPO / "specs/spmm/lanes_over_n_vec.yaml", dtype=dtype)
    # rows of at most 9 nonzeros: thread-mapped stores by vectors only where rows are short
    A = sp.diags([np.arange(1.0, 301.0 - abs(d)) for d in range(-4, 5)], list(range(-4, 5)),
                 shape=(300, 300), format="csr")
    rng = np.random.default_rng(4)
    wide = cupy.asarray(rng.uniform(-1, 1, (A.shape[1], 33)), dtype=dtype)
    B = cupy.ascontiguousarray(wide[:, 1:])
    aligned = kernel.bind_dense(A, (B,))
    unaligned = kernel.bind_dense(A, (wide[:, 1:],))  # rows 33 elements apart
    wide_out = cupy.zeros((A.shape[0], 33), dtype=dtype)
    loads_only = kernel.bind_dense(A, (B,), wide_out[:, 1:])  # Z's rows not 16-byte aligned
    prepared = kernel.prepared_for(A)
    # the vector build, its outputs written by 16-byte stores
    assert aligned._fn is kernel.function(prepared, dense=(8, 4, 4, True))
    assert loads_only._fn is kernel.function(prepared, dense=(8, 4, 4, False))
    assert unaligned._fn is kernel.function(prepared, dense=(8, 4, 0, False))
    assert len({id(aligned._fn), id(loads_only._fn), id(unaligned._fn)}) == 3
    aligned.launch()
    unaligned.launch()
    loads_only.launch()
    np.testing.assert_array_equal(aligned.output.get(), unaligned.output.get())
    np.testing.assert_array_equal(aligned.output.get(), loads_only.output.get())
    assert not wide_out[:, 0].any()  # the stores stay inside Z
    # rows past dense_builds.THREAD_STORE_MAX_ROW: vector loads, element stores
    long_rows = MATRICES["rmat"]
    assert int(np.diff(long_rows.indptr).max()) > dense_builds.THREAD_STORE_MAX_ROW
    B2 = cupy.asarray(rng.uniform(-1, 1, (long_rows.shape[1], 32)), dtype=dtype)
    assert kernel.bind_dense(long_rows, (B2,))._fn is \
        kernel.function(kernel.prepared_for(long_rows), dense=(8, 4, 4, False))
    want = A.astype(np.float64) @ B.get().astype(np.float64)
    np.testing.assert_allclose(aligned.output.get(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sddmm_dot_products_read_by_vector_loads_give_the_same_bits(dtype: str) -> None:
    """thread_per_nonzero's factors, U row-major and B stored as B^T (the spec's order),
    run along K with unit stride: the vector build reads them with 16-byte loads. A U whose
    rows are not 16-byte aligned takes the scalar build; both give the same bits."""
    import cupy

    kernel = pipeline.compile(REPO / "specs/sddmm/thread_per_nonzero.yaml", dtype=dtype)
    C = MATRICES["rmat"]
    rng = np.random.default_rng(5)
    wide = cupy.asarray(rng.uniform(-1, 1, (C.shape[0], 33)), dtype=dtype)
    U = cupy.ascontiguousarray(wide[:, 1:])
    # B in the spec's storage order, B^T row-major: a Fortran-ordered (K, N) array
    B = cupy.asfortranarray(cupy.asarray(rng.uniform(-1, 1, (32, C.shape[1])), dtype=dtype))
    aligned = kernel.bind_dense(C, (U, B))
    unaligned = kernel.bind_dense(C, (wide[:, 1:], B))  # rows 33 elements apart
    prepared = kernel.prepared_for(C)
    assert aligned._fn is kernel.function(prepared, dense=(1, 32, 1, False))  # vector build
    assert unaligned._fn is kernel.function(prepared, dense=(1, 32, 0, False))
    assert aligned._fn is not unaligned._fn
    # B row-major (the call's natural order) runs K with stride N: the scalar build
    assert kernel.bind_dense(C, (U, cupy.ascontiguousarray(B)))._fn is unaligned._fn
    aligned.launch()
    unaligned.launch()
    np.testing.assert_array_equal(aligned.output.get(), unaligned.output.get())


def test_dense_operand_of_the_wrong_shape_is_refused_naming_it() -> None:
    import cupy

    from teaal_loops.errors import MatrixError

    kernel = pipeline.compile(REPO / "specs/spmm/lanes_over_n.yaml")
    A = MATRICES["uniform"]
    with pytest.raises(MatrixError, match="operand B"):
        kernel(A, cupy.zeros((A.shape[1] + 1, 4), dtype=np.float32))
    with pytest.raises(MatrixError, match="complex"):
        kernel(A, cupy.zeros((A.shape[1], 4), dtype=np.complex64))
    with pytest.raises(MatrixError, match="size 0"):
        kernel(A, cupy.zeros((A.shape[1], 0), dtype=np.float32))


def test_transposed_spmv_computes_a_transpose_times_x() -> None:
    import cupy

    text = (
        "einsum:\n  declaration: {A: [K, M], B: [K], Z: [M]}\n"
        "  expressions: ['Z[m] = A[k, m] * B[k]']\n"
    )
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    kernel = pipeline.compile(f.name)
    A = MATRICES["uniform"]
    x = np.random.default_rng(0).uniform(-1, 1, A.shape[0]).astype(np.float32)
    y = kernel(A, cupy.asarray(x)).get()
    want = A.T @ x.astype(np.float64)
    assert np.allclose(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["lanes_over_n", "nonzero_split", "thread_per_nonzero"])
def test_a_bound_dense_launch_repeats_reads_new_inputs_and_captures(case: str) -> None:
    """bind_dense checks once; launch() re-zeroes an accumulating output (no double count),
    reads inputs written into the bound arrays, and replays inside a CUDA graph."""
    import cupy

    from teaal_loops.bench.cusparse.choice import capture

    spec = REPO / ("specs/sddmm" if case == "thread_per_nonzero" else "specs/spmm") / (
        f"{case}.yaml")
    kernel = pipeline.compile(spec, dtype="float64")
    A = MATRICES["rmat"]
    rng = np.random.default_rng(5)
    if kernel.form == "spmm":
        operands = (cupy.asarray(rng.uniform(-1, 1, (A.shape[1], 9))),)
        out = cupy.empty((A.shape[0], 9))

        def want() -> Any:
            return A @ operands[0].get()
    else:
        C = A.copy()
        C.sort_indices()
        A = C
        operands = (cupy.asarray(rng.uniform(-1, 1, (A.shape[0], 5))),
                    cupy.asarray(rng.uniform(-1, 1, (5, A.shape[1]))))
        out = cupy.empty(A.nnz)
        rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))

        def want() -> Any:
            u, v = operands[0].get(), operands[1].get()
            return A.data * np.einsum("ij,ji->i", u[rows], v[:, A.indices])
    bound = kernel.bind_dense(A, operands, out)
    assert bound.output is out
    for _ in range(2):  # twice: an accumulating output is zeroed again, not added to
        bound.launch()
        np.testing.assert_allclose(out.get(), want(), rtol=1e-12, atol=1e-12)
    operands[0][...] *= -2  # a new input written into the bound array
    graph = capture(cupy, bound.launch)
    out.fill(np.nan)
    graph.launch()
    np.testing.assert_allclose(out.get(), want(), rtol=1e-12, atol=1e-12)
