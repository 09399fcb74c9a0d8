"""The column-panel layout (``panels:P``): its build, its option, its TeAAL format, the checks
of a host layout built by hand, and how the output is combined (stacked tiles add)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.codegen import make_config
from teaal_loops.errors import LayoutError, MatrixError
from teaal_loops.layouts import (
    canonical_layout,
    convert,
    tile_view,
)
from teaal_loops.layouts.panels import PanelsLayout, panel_width
from teaal_loops.lowering import explain_text, lower, simulate
from teaal_loops.runtime.device_matrix import host_arguments
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec
from tests.layouts import cases

MATRICES = cases.matrices()


def _uniform(rows: int, cols: int, seed: int) -> sp.csr_matrix:
    return sp.random(rows, cols, density=0.05, format="csr", random_state=seed)


@pytest.mark.parametrize("panels", [1, 2, 3, 7])
def test_tiles_are_each_panels_rows_in_panel_order_with_columns_ascending(panels: int) -> None:
    A = _uniform(40, 101, panels)
    host = convert(A, f"panels:{panels}")
    width = panel_width(101, panels)
    ptr = host.tile_ptr()
    assert len(ptr) == panels * 40 + 1 and ptr[-1] == A.nnz
    for t in range(panels * 40):
        p, m = divmod(t, 40)
        cols = host.indices[ptr[t]:ptr[t + 1]]
        row = A[m].toarray().ravel()
        want = np.flatnonzero(row)
        want = want[(want >= p * width) & (want < (p + 1) * width)]
        np.testing.assert_array_equal(cols, want)
        np.testing.assert_array_equal(host.data[ptr[t]:ptr[t + 1]], row[want])
    np.testing.assert_array_equal(host.to_csr().toarray(), A.toarray())


def test_more_panels_than_columns_leaves_the_extra_panels_empty() -> None:
    A = MATRICES["single_row"][:, :2]
    host = convert(A, "panels:5")
    assert list(np.diff(host.tile_ptr())) == [1, 1, 0, 0, 0]


@pytest.mark.parametrize(
    ("given", "canonical"), [("panels", "panels:2"), ("PANELS:3", "panels:3"), ("panels: 8", "panels:8")]
)
def test_the_option_is_the_panel_count(given: str, canonical: str) -> None:
    assert canonical_layout(given) == canonical


@pytest.mark.parametrize(
    ("bad", "message"),
    [("panels:0", "1 to 64"), ("panels:65", "1 to 64"), ("panels:2x2", "number of column panels"),
     ("panels:-1", "number of column panels")],
)
def test_a_bad_panel_count_is_refused_by_name(bad: str, message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        canonical_layout(bad)


SPEC = """einsum:
  declaration: {A: [M, K], B: [K], Z: [M]}
  expressions: ["Z[m] = A[m, k] * B[k]"]
mapping:
  rank-order: {A: [M, K], B: [K], Z: [M]}
  partitioning:
    Z: {M: [uniform_shape(T)]}
  loop-order: {Z: [M1, M0, K]}
  spacetime: {Z: {space: [M0], time: [M1, K]}}
format:
  A:
%s
"""


@pytest.mark.parametrize(
    ("fmt", "layout"),
    [
        ("    PANELS_4: {rank-order: [K1, M, K0]}", "panels:4"),
        ("    stacked: {rank-order: [K1, M, K0], K1: {format: U}, M: {format: U}, "
         "K0: {format: C}}", "panels:2"),
    ],
)
def test_a_k1_m_k0_format_picks_the_panels(fmt: str, layout: str, tmp_path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC % fmt)
    assert lower(load_spec(str(path))).layout == layout


def test_a_host_layout_with_a_nonzero_outside_its_panel_is_refused() -> None:
    A = _uniform(20, 30, 1)
    good = convert(A, "panels:3")
    host_arguments("panels:3", good, np.dtype("float64"), 32)  # accepted as built
    bad = PanelsLayout(good.shape, good.nnz, 3, good.indptr, good.indices[::-1].copy(),
                       good.data)
    with pytest.raises(MatrixError, match="outside its tile's panel"):
        host_arguments("panels:3", bad, np.dtype("float64"), 32)
    with pytest.raises(MatrixError, match="3 panels, the kernel's 2"):
        host_arguments("panels:2", good, np.dtype("float64"), 32)


@pytest.mark.parametrize("spec", ["thread_mapped", "group_mapped", "work_oriented", "merge_path"])
def test_every_schedule_zeroes_the_output_and_counts_every_tile_as_an_atomic(spec: str) -> None:
    schedule = lower(load_spec(str(cases.SPECS / f"{spec}.yaml")), layout="panels:3")
    A = MATRICES["skewed"]
    view = tile_view("panels:3", A)
    bound = bind(schedule, view.shape)
    assert make_config(schedule, dtype="float64", bound=bound).zeroes_output(bound)
    x = np.random.default_rng(2).uniform(-1, 1, A.shape[1])
    sim = simulate(bound, convert(A, "panels:3"), x)
    np.testing.assert_allclose(sim.y, A @ x, rtol=1e-12, atol=1e-12)
    # whole tiles add once each, split tiles once a piece: at least one atomic a tile
    assert sim.stats.atomics >= view.num_tiles - sim.stats.split_rows
    text = explain_text(schedule)
    assert "added atomically into its row; the output is zeroed first" in text


def test_the_device_builder_gives_the_host_builders_arrays_even_from_unsorted_columns() -> None:
    from teaal_loops.layouts.panels import device_arrays

    A = _uniform(50, 77, 4)
    host = convert(A, "panels:3")
    shuffled = A.copy()
    rng = np.random.default_rng(0)
    for m in range(50):  # columns of each row out of order, as cupyx may hold them
        lo, hi = shuffled.indptr[m], shuffled.indptr[m + 1]
        perm = lo + rng.permutation(hi - lo)
        shuffled.indices[lo:hi] = shuffled.indices[perm]
        shuffled.data[lo:hi] = shuffled.data[perm]
    built = device_arrays(np, shuffled.indptr, shuffled.indices, shuffled.data, A.shape, "3")
    np.testing.assert_array_equal(built["indptr"], host.indptr)
    ptr = host.tile_ptr()
    for t in range(3 * 50):  # each tile holds the same nonzeros, in the input's order
        got = dict(zip(built["indices"][ptr[t]:ptr[t + 1]], built["values"][ptr[t]:ptr[t + 1]],
                       strict=True))
        want = dict(zip(host.indices[ptr[t]:ptr[t + 1]], host.data[ptr[t]:ptr[t + 1]],
                        strict=True))
        assert got == want
