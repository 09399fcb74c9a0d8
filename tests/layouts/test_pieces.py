"""The heavy rows alone in column panels (``pieces:W``) and the split that makes them
(``teaal_loops.split_heavy``): the split's two matrices, the layout's build and its refusals,
the checks of a host layout built by hand, and its kernels on the CPU adding into an output
that already holds the light rows' launch (SpMV and SpMM), against SciPy and the simulation's
owners."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import teaal_loops
from teaal_loops.codegen import make_config, render
from teaal_loops.errors import LayoutError, MatrixError
from teaal_loops.layouts import canonical_layout, convert, get_layout, known_layouts, tile_view
from teaal_loops.layouts.pieces import PiecesLayout, device_arrays
from teaal_loops.lowering import explain_text, lower, simulate
from teaal_loops.runtime import dense_builds
from teaal_loops.runtime.device_matrix import host_arguments
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec
from tests.codegen import host_emulation as emu
from tests.codegen import test_spmm_emulation as spmm_emu
from tests.layouts import cases
from tests.layouts import emulation as layout_emu

ROWS, COLS, WIDTH, MIN_NNZ = *cases.HEAVY_ROWS_SHAPE, 32, 20  # heavy from max(20, 8 * 10 panels)
PIECES_FROM = 80  # the layout's own floor: 8 nonzeros for each of 10 panels
HEAVY, LIGHT_LONGEST = cases.HEAVY_ROW_LENGTHS, cases.LIGHT_LONGEST


def _matrix(seed: int = 5) -> sp.csr_matrix:
    return cases.heavy_rows_matrix(seed)


def _split(A: sp.csr_matrix) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    return teaal_loops.split_heavy(A, WIDTH, min_nnz=MIN_NNZ)


def _host(heavy: sp.csr_matrix) -> PiecesLayout:
    return convert(heavy, f"pieces:{WIDTH}")


def test_the_split_keeps_light_rows_in_one_matrix_and_heavy_rows_in_the_other() -> None:
    A = _matrix()
    light, heavy = _split(A)
    assert light.shape == heavy.shape == A.shape
    np.testing.assert_array_equal((light + heavy).toarray(), A.toarray())
    lengths = np.diff(A.indptr)
    for r in range(ROWS):
        mine, other = (heavy, light) if r in HEAVY else (light, heavy)
        np.testing.assert_array_equal(mine.indices[mine.indptr[r]:mine.indptr[r + 1]],
                                      A.indices[A.indptr[r]:A.indptr[r + 1]])
        assert other.indptr[r + 1] == other.indptr[r]  # the row is empty in the other
    assert light.nnz + heavy.nnz == A.nnz == int(lengths.sum())
    # no heavy row at the default minimum (4,096): everything is light
    light0, heavy0 = teaal_loops.split_heavy(A, WIDTH)
    assert (light0.nnz, heavy0.nnz) == (A.nnz, 0)


@pytest.mark.parametrize(("options", "message"), [
    ({"width": 16}, "32 to 16777216"), ({"width": "2x2"}, "panel width in columns"),
    ({"min_nnz": 0}, "min_nnz"), ({"min_nnz": True}, "min_nnz"), ({"min_nnz": 2.5}, "min_nnz"),
])
def test_a_bad_split_is_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        teaal_loops.split_heavy(_matrix(), **{"width": WIDTH, **options})


def test_tiles_are_each_panels_pieces_with_columns_in_their_panel() -> None:
    A = _matrix()
    _, heavy = _split(A)
    host = _host(heavy)
    panels, rows = 10, sorted(HEAVY)
    np.testing.assert_array_equal(host.heavy_rows, rows)
    ptr = host.tile_ptr()
    assert len(ptr) == panels * len(rows) + 1 and ptr[-1] == heavy.nnz
    for p in range(panels):
        for h, row in enumerate(rows):
            t = p * len(rows) + h
            dense = A[row].toarray().ravel()
            want = np.flatnonzero(dense)
            want = want[(want >= p * WIDTH) & (want < (p + 1) * WIDTH)]
            np.testing.assert_array_equal(host.indices[ptr[t]:ptr[t + 1]], want)
            np.testing.assert_array_equal(host.data[ptr[t]:ptr[t + 1]], dense[want])
    np.testing.assert_array_equal(host.to_csr().toarray(), heavy.toarray())


def test_a_row_too_short_for_its_pieces_is_refused_by_row() -> None:
    """The layout holds the heavy rows alone, each with 8 nonzeros a panel at least (its tiles
    then stay within an eighth of the nonzeros): building a shorter row's pieces would drop
    it, and a product missing a row is a wrong answer, so the row is named and refused."""
    A = _matrix()
    lengths = np.diff(A.indptr)
    first = next(r for r in range(ROWS) if 0 < lengths[r] < PIECES_FROM)
    with pytest.raises(LayoutError, match=f"row {first} has {lengths[first]} nonzeros, fewer "
                                          f"than {PIECES_FROM} \\(8 for each of 10 panels\\)"):
        convert(A, f"pieces:{WIDTH}")
    with pytest.raises(LayoutError, match="unknown option.*min_nnz|min_nnz.*unknown"):
        convert(_split(A)[1], f"pieces:{WIDTH}", min_nnz=91)  # the split chooses the rows
    empty = convert(sp.csr_matrix((ROWS, COLS)), f"pieces:{WIDTH}")
    assert (len(empty.tile_ptr()), len(empty.heavy_rows)) == (1, 0)  # no rows: no tiles


def test_the_split_chooses_the_heavy_rows_and_the_layout_takes_them() -> None:
    """A low ``min_nnz`` (R-MAT's SpMM gains from 64) puts rows far under the default's 4,096
    in the pieces; the layout takes every one with 8 nonzeros a panel. In panels of 150
    columns (2 panels, a floor of 16) and from 20 nonzeros, row 25 (79) is heavy too."""
    A = _matrix()
    light, heavy = teaal_loops.split_heavy(A, 150, min_nnz=MIN_NNZ)
    want = sorted([*HEAVY, 25])
    np.testing.assert_array_equal(np.flatnonzero(np.diff(heavy.indptr)), want)
    host = convert(heavy, "pieces:150")
    np.testing.assert_array_equal(host.heavy_rows, want)
    assert len(host.tile_ptr()) == 2 * len(want) + 1
    np.testing.assert_array_equal(host.to_csr().toarray(), heavy.toarray())
    np.testing.assert_array_equal((light + heavy).toarray(), A.toarray())


@pytest.mark.parametrize(("given", "canonical"),
                         [("pieces", "pieces:4096"), ("PIECES:1024", "pieces:1024")])
def test_the_option_is_the_panel_width(given: str, canonical: str) -> None:
    assert canonical_layout(given) == canonical


def _replace(host: PiecesLayout, **changes: Any) -> PiecesLayout:
    fields = {"width": host.width, "heavy_rows": host.heavy_rows, "indptr": host.indptr,
              "indices": host.indices, "data": host.data}
    fields.update(changes)
    return PiecesLayout(host.shape, host.nnz, **fields)


def test_a_host_layout_that_breaks_the_rules_is_refused() -> None:
    good = _host(_split(_matrix())[1])
    name = f"pieces:{WIDTH}"
    host_arguments(name, good, np.dtype("float64"), 32)  # accepted as built
    swapped = good.indices.copy()
    ptr = good.tile_ptr()
    a, b = ptr[0], ptr[3]  # panel 0's first piece and panel 1's first piece swap a column
    swapped[a], swapped[b] = swapped[b], swapped[a]
    for bad, message in [
        (_replace(good, heavy_rows=good.heavy_rows[::-1].copy()), "ascending order"),
        (_replace(good, heavy_rows=np.array([3, 17, 40])), "ascending order"),
        (_replace(good, indices=swapped), "outside its piece's panel"),
        (_replace(good, indptr=good.indptr[:-1]), "tile offsets"),
    ]:
        with pytest.raises(MatrixError, match=message):
            host_arguments(name, bad, np.dtype("float64"), 32)
    with pytest.raises(MatrixError, match="panels of 32 columns, the kernel's 64"):
        host_arguments("pieces:64", good, np.dtype("float64"), 32)


def test_the_device_builder_gives_the_host_builders_arrays_and_refuses_light_rows() -> None:
    A = sp.random(30, 9000, density=0.02, format="csr", random_state=2).tolil()
    A[4, :5000] = 1.0  # 5,000 nonzeros: heavy at the default minimum
    A[7, :] = 0.0
    A[7, :3] = 2.0  # too short for pieces of 9 panels (the other rows have about 180)
    light, heavy = teaal_loops.split_heavy(A.tocsr(), 1024)
    row4 = A.tocsr()[4].nnz  # 5,000 and the random ones past them
    assert heavy.nnz == row4 and light.nnz == A.nnz - row4
    packed = host_arguments("pieces:1024", convert(heavy, "pieces:1024"), np.dtype("float64"))
    built = device_arrays(np, heavy.indptr, heavy.indices, heavy.data, heavy.shape, "1024")
    assert (built["heavy"], built["panels"]) == (1, 9) == (packed.scalars["heavy"],
                                                           packed.scalars["panels"])
    for name, array in packed.arrays.items():
        np.testing.assert_array_equal(built[name], array, err_msg=name)
    with pytest.raises(LayoutError, match="fewer than 72 \\(8 for each of 9 panels\\)"):
        device_arrays(np, A.tocsr().indptr, A.tocsr().indices, A.tocsr().data, A.shape, "1024")


def test_every_tile_adds_so_only_such_layouts_may_accumulate() -> None:
    adding = {n for n in known_layouts() if get_layout(n).adds_every_tile}
    assert adding == {"csc", "panels", "pieces"}  # heavy's light rows and CSR's rows store


def test_accumulate_is_refused_over_a_layout_that_stores_rows(tmp_path: Path) -> None:
    """Refused before anything touches a GPU: a storing kernel would overwrite the output."""
    kernel = teaal_loops.compile(str(cases.SPECS / "spmm/lanes_over_n_vec.yaml"))
    A = _matrix()
    B = np.zeros((COLS, 8))
    with pytest.raises(MatrixError, match="layout csr stores rows, which would overwrite"):
        kernel.bind_dense(A, (B,), out=np.zeros((ROWS, 8)), accumulate=True)
    with pytest.raises(MatrixError, match="pass it as out="):
        kernel.bind_dense(A, (B,), accumulate=True)


def test_explain_says_every_tile_adds() -> None:
    schedule = lower(load_spec(str(cases.SPECS / "merge_path.yaml")), layout="pieces:32")
    text = explain_text(schedule)
    assert "heavy rows' pieces panel by panel share output rows" in text
    assert "added atomically into its row" in text


# --------------------------------------------------------------------------------------------
# The kernels on the CPU (g++ and the CUDA shim of tests/codegen): the light rows' output
# (A_light @ x, heavy rows 0) is what y holds before the launch; the kernel adds the pieces.

SPMV_CASES = [("thread_mapped", {}), ("group_mapped", {"BLOCK_SIZE": 4}),
              ("work_oriented", {"WORK_PER_THREAD": 7}), ("merge_path", {"ITEMS_PER_THREAD": 5})]


@pytest.mark.skipif(layout_emu.CXX is None, reason="no C++ compiler (g++/clang++) found")
@pytest.mark.parametrize(("spec", "params"), SPMV_CASES)
def test_spmv_kernels_add_the_pieces_into_the_light_rows_output(spec: str, params: dict) -> None:
    schedule = lower(load_spec(str(cases.SPECS / f"{spec}.yaml")), params=params,
                     layout=f"pieces:{WIDTH}")
    A = _matrix()
    light, heavy = _split(A)
    host = _host(heavy)
    view = tile_view(schedule.layout, host)
    assert view.adding_from == 0  # every tile adds
    bound = bind(schedule, view.shape)
    cfg = make_config(schedule, dtype="float64", bound=bound)
    assert cfg.zeroes_output(bound)  # alone, the runtime zeroes y first
    args = host_arguments(schedule.layout, host, np.dtype("float64"))
    x = np.random.default_rng(9).uniform(-1, 1, COLS)
    result = layout_emu.run(cfg, bound, args, x, sanitize=spec == "merge_path",
                            start=light @ x)
    np.testing.assert_allclose(result.y, A @ x, rtol=1e-12, atol=1e-12)
    sim = simulate(bound, host, x)
    np.testing.assert_array_equal(result.owner, sim.owner)
    np.testing.assert_allclose(sim.y, heavy @ x, rtol=1e-12, atol=1e-12)
    assert sim.stats.atomics >= view.num_tiles - sim.stats.split_rows


SPMM_SPECS = ["nonzero_split_vec", "group_lanes_vec", "lanes_over_n_vec", "nonzero_split"]


@pytest.mark.skipif(emu.CXX is None, reason="no C++ compiler (g++/clang++) found")
@pytest.mark.parametrize("spec", SPMM_SPECS)
def test_spmm_kernels_add_the_pieces_into_the_light_rows_output(spec: str) -> None:
    """Through the layout's add_columns (a float4 atomic in the vector store build)."""
    params = {"nonzero_split_vec": {"NNZ_PER_WORKER": 6}, "group_lanes_vec": {"ROW_LANES": 32},
              "nonzero_split": {"NNZ_PER_WORKER": 5}}.get(spec, {})
    schedule = lower(load_spec(str(cases.SPECS / f"spmm/{spec}.yaml")), params=params,
                     layout=f"pieces:{WIDTH}")
    A = _matrix()
    light, heavy = _split(A)
    host = _host(heavy)
    width = 8
    bound = bind(schedule, tile_view(schedule.layout, host).shape, None, {}, dense_size=width)
    source = render(make_config(schedule, dtype="float64", bound=bound))
    assert "A.store_columns(teaal_y" in source or "A.add_columns(teaal_y" in source
    options = dense_builds.dense_options(source, bound.dense_space, bound.dense_time,
                                         chunk=bound.work_per_thread)
    B = np.random.default_rng(width).uniform(-1, 1, (COLS, width))  # the runner's B
    spmm_emu._run_and_compare(schedule, heavy, width, options, held=host, start=light @ B)
