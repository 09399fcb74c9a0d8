"""Heavy rows in column panels (``heavy:W``): its build, its option, the checks of a host layout
built by hand, how the output is combined (a light row stored, a heavy row's pieces added),
and its kernels run on the CPU (SpMV and SpMM) against SciPy and the simulation's owners."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.codegen import make_config, render
from teaal_loops.errors import LayoutError, MatrixError
from teaal_loops.layouts import canonical_layout, convert, get_layout, register, tile_view
from teaal_loops.layouts.heavy import HeavyLayout, device_arrays, mask_words
from teaal_loops.lowering import explain_text, lower, simulate
from teaal_loops.matrix.heavy_rows import HEAVY_MIN_NNZ, PIECE_MIN, heavy_threshold
from teaal_loops.runtime import dense_builds
from teaal_loops.runtime.device_matrix import host_arguments
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec
from tests.codegen import host_emulation as emu
from tests.codegen import test_spmm_emulation as spmm_emu
from tests.layouts import cases
from tests.layouts import emulation as layout_emu

ROWS, COLS, WIDTH = *cases.HEAVY_ROWS_SHAPE, 32  # heavy from max(20, 8 * 10 panels)
HEAVY, LIGHT_LONGEST = cases.HEAVY_ROW_LENGTHS, cases.LIGHT_LONGEST


def _matrix(seed: int = 5) -> sp.csr_matrix:
    return cases.heavy_rows_matrix(seed)


def _host(A: sp.csr_matrix, width: int = WIDTH) -> HeavyLayout:
    return convert(A, f"heavy:{width}", min_nnz=20)


def test_tiles_are_the_rows_then_each_panels_pieces_with_columns_in_their_panel() -> None:
    A = _matrix()
    host = _host(A)
    panels, heavy = 10, sorted(HEAVY)
    np.testing.assert_array_equal(host.heavy_rows, heavy)
    ptr = host.tile_ptr()
    assert len(ptr) == ROWS + panels * len(heavy) + 1 and ptr[-1] == A.nnz
    for t in range(ROWS):  # a light row's tile is its row; a heavy row's is empty
        want = [] if t in HEAVY else A.indices[A.indptr[t]:A.indptr[t + 1]]
        np.testing.assert_array_equal(host.indices[ptr[t]:ptr[t + 1]], want)
    for p in range(panels):
        for h, row in enumerate(heavy):
            t = ROWS + p * len(heavy) + h
            dense = A[row].toarray().ravel()
            want = np.flatnonzero(dense)
            want = want[(want >= p * WIDTH) & (want < (p + 1) * WIDTH)]
            np.testing.assert_array_equal(host.indices[ptr[t]:ptr[t + 1]], want)
            np.testing.assert_array_equal(host.data[ptr[t]:ptr[t + 1]], dense[want])
    np.testing.assert_array_equal(host.to_csr().toarray(), A.toarray())
    flags = np.zeros(ROWS, dtype=bool)
    flags[heavy] = True
    packed = host_arguments("heavy:32", host, np.dtype("float64")).arrays["heavy_mask"]
    bits = np.asarray(packed).view(np.uint32)
    np.testing.assert_array_equal([(bits[r // 32] >> (r % 32)) & 1 for r in range(ROWS)], flags)


def test_a_row_is_heavy_from_the_larger_of_the_minimum_and_eight_nonzeros_a_panel() -> None:
    assert heavy_threshold(10) == HEAVY_MIN_NNZ
    assert heavy_threshold(10_000) == PIECE_MIN * 10_000
    A = _matrix()
    assert len(_host(A).heavy_rows) == 3  # row 25 (79 nonzeros) stays light
    assert len(convert(A, "heavy:32", min_nnz=79).heavy_rows) == 3  # 8 * 10 panels rules
    assert len(convert(A, "heavy:64", min_nnz=79).heavy_rows) == 4  # 5 panels: 40; 79 rules
    assert len(convert(A, "heavy:32").heavy_rows) == 0  # the default minimum, 4096
    light = convert(A, "heavy:32")
    assert light.tile_ptr().tolist() == A.indptr.tolist()  # no heavy row: CSR's tiles


def test_the_mask_words_pack_bits_little_end_first() -> None:
    flags = np.zeros(70, dtype=bool)
    flags[[0, 31, 32, 69]] = True
    words = mask_words(np, flags).view(np.uint32)
    assert words.tolist() == [1 | (1 << 31), 1, 1 << 5]  # rows 0 and 31; 32; 69
    assert mask_words(np, np.zeros(0, dtype=bool)).tolist() == [0]


@pytest.mark.parametrize(
    ("given", "canonical"),
    [("heavy", "heavy:4096"), ("HEAVY:1024", "heavy:1024"), ("heavy: 32", "heavy:32")],
)
def test_the_option_is_the_panel_width(given: str, canonical: str) -> None:
    assert canonical_layout(given) == canonical


@pytest.mark.parametrize(
    ("bad", "message"),
    [("heavy:16", "32 to 16777216"), ("heavy:99999999", "32 to 16777216"),
     ("heavy:2x2", "panel width in columns"), ("heavy:-1", "panel width in columns")],
)
def test_a_bad_panel_width_is_refused_by_name(bad: str, message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        canonical_layout(bad)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_a_bad_minimum_is_refused(bad: Any) -> None:
    with pytest.raises(LayoutError, match="min_nnz"):
        convert(_matrix(), "heavy:32", min_nnz=bad)


def _replace(host: HeavyLayout, **changes: Any) -> HeavyLayout:
    fields = {"width": host.width, "heavy_rows": host.heavy_rows, "indptr": host.indptr,
              "indices": host.indices, "data": host.data}
    fields.update(changes)
    return HeavyLayout(host.shape, host.nnz, **fields)


def test_a_host_layout_that_breaks_the_rules_is_refused() -> None:
    A = _matrix()
    good = _host(A)
    host_arguments("heavy:32", good, np.dtype("float64"), 32)  # accepted as built
    swapped = good.indices.copy()
    ptr = good.tile_ptr()
    first = ROWS  # panel 0's first piece and panel 1's first piece swap a column
    a, b = ptr[first], ptr[first + 3]
    swapped[a], swapped[b] = swapped[b], swapped[a]
    moved = good.indptr.copy()
    moved[4:ROWS + 1] += 1  # row 3 (heavy) now owns the next tile's first nonzero
    cases_ = [
        (_replace(good, heavy_rows=good.heavy_rows[::-1].copy()), "ascending order"),
        (_replace(good, heavy_rows=np.array([3, 17, 40])), "ascending order"),
        (_replace(good, indices=swapped), "outside its piece's panel"),
        (_replace(good, indptr=moved), "a heavy row has a light tile"),
    ]
    for bad, message in cases_:
        with pytest.raises(MatrixError, match=message):
            host_arguments("heavy:32", bad, np.dtype("float64"), 32)
    with pytest.raises(MatrixError, match="panels of 32 columns, the kernel's 64"):
        host_arguments("heavy:64", good, np.dtype("float64"), 32)


def test_a_stacked_layout_may_serve_spmm_but_neither_sddmm_nor_scatter() -> None:
    csr = get_layout("csr")
    for extra in ({"scatters": True}, {"forms": ("spmv", "spmm", "sddmm")}):
        with pytest.raises(LayoutError, match="serves SpMV and SpMM and does not scatter"):
            register("stacked_try", macro_file=csr.macro_file, params=csr.params,
                     build=csr.build, pack=csr.pack, entries=csr.entries, stacked=True,
                     **extra)
    with pytest.raises(LayoutError, match="adding_from belongs to a stacked layout"):
        register("stacked_try", macro_file=csr.macro_file, params=csr.params, build=csr.build,
                 pack=csr.pack, entries=csr.entries, adding_from=lambda host: 0)


def test_the_device_builder_gives_the_host_builders_arrays_and_counts() -> None:
    A = sp.random(30, 9000, density=0.02, format="csr", random_state=2).tolil()
    A[4, :5000] = 1.0  # 5,000 nonzeros: heavy at the default minimum
    A = A.tocsr()
    host = convert(A, "heavy:1024")
    packed = host_arguments("heavy:1024", host, np.dtype("float64"))
    built = device_arrays(np, A.indptr, A.indices, A.data, A.shape, "1024")
    assert (built["heavy"], built["panels"]) == (1, 9) == (packed.scalars["heavy"],
                                                           packed.scalars["panels"])
    for name, array in packed.arrays.items():
        np.testing.assert_array_equal(built[name], array, err_msg=name)


def test_every_array_type_a_layout_may_declare_has_an_upload_type() -> None:
    """The device builder casts each array to its parameter's type by this table (heavy's
    mask, an ``int`` array, once found it missing on the GPU)."""
    from teaal_loops.layouts import known_layouts
    from teaal_loops.layouts.registry import _CTYPES
    from teaal_loops.runtime.device_matrix import kernel_types

    for bits in (32, 64):
        assert set(_CTYPES) <= set(kernel_types(bits, np.dtype("float32")))
    assert kernel_types(32, np.dtype("float64"))["int"] == np.dtype(np.int32)
    declared = {p.scalar_type for name in known_layouts() for p in get_layout(name).params}
    assert declared <= set(_CTYPES)


def test_explain_says_which_tiles_store_and_which_add() -> None:
    schedule = lower(load_spec(str(cases.SPECS / "merge_path.yaml")), layout="heavy:32")
    assert "a row's own tile stores it, the tiles that share a row" in explain_text(schedule)


@pytest.mark.parametrize("spec", ["thread_mapped", "group_mapped", "work_oriented", "merge_path"])
def test_every_schedule_zeroes_the_output_and_counts_the_pieces_as_atomics(spec: str) -> None:
    schedule = lower(load_spec(str(cases.SPECS / f"{spec}.yaml")), layout="heavy:32")
    A = _matrix()
    host = _host(A)
    view = tile_view("heavy:32", host)
    assert view.adding_from == ROWS
    bound = bind(schedule, view.shape)
    assert make_config(schedule, dtype="float64", bound=bound).zeroes_output(bound)
    x = np.random.default_rng(2).uniform(-1, 1, COLS)
    sim = simulate(bound, host, x)
    np.testing.assert_allclose(sim.y, A @ x, rtol=1e-12, atol=1e-12)
    pieces = view.num_tiles - ROWS
    # every whole piece adds once; split tiles add once a part; light rows store
    assert pieces - sim.stats.split_rows <= sim.stats.atomics
    if spec == "thread_mapped":  # one thread a tile: nothing splits, each piece adds once
        assert (sim.stats.split_rows, sim.stats.atomics) == (0, pieces)


# --------------------------------------------------------------------------------------------
# The kernels on the CPU (g++ and the CUDA shim of tests/codegen)

SPMV_CASES = [("thread_mapped", {}), ("group_mapped", {"BLOCK_SIZE": 4}),
              ("work_oriented", {"WORK_PER_THREAD": 7}), ("merge_path", {"ITEMS_PER_THREAD": 5}),
              ("merge_path", {})]


@pytest.mark.skipif(layout_emu.CXX is None, reason="no C++ compiler (g++/clang++) found")
@pytest.mark.parametrize(("spec", "params"), SPMV_CASES)
def test_spmv_kernels_store_light_rows_and_add_pieces_on_the_cpu(spec: str, params: dict) -> None:
    schedule = lower(load_spec(str(cases.SPECS / f"{spec}.yaml")), params=params,
                     layout="heavy:32")
    A = _matrix()
    host = _host(A)
    view = tile_view("heavy:32", host)
    bound = bind(schedule, view.shape)
    cfg = make_config(schedule, dtype="float64", bound=bound)
    args = host_arguments("heavy:32", host, np.dtype("float64"))
    x = np.random.default_rng(9).uniform(-1, 1, COLS)
    result = layout_emu.run(cfg, bound, args, x, sanitize=spec == "merge_path" and not params)
    np.testing.assert_allclose(result.y, A @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(result.owner, simulate(bound, host, x).owner)


SPMM_SPECS = ["nonzero_split_vec", "group_lanes_vec", "lanes_over_n_vec", "nonzero_split"]


VECTOR_STORES = ("-DTEAAL_DENSE_VECTOR=1", "-DTEAAL_DENSE_BLOCK=4", "-DTEAAL_DENSE_VECTOR_STORE=1")


# every spec in its scalar build; those whose threads own runs of N_VEC columns in the vector
# store build too (nonzero_split puts N0 in space: a thread has no run of columns to store)
SPMM_BUILDS = [(spec, False) for spec in SPMM_SPECS] + [
    (spec, True) for spec in SPMM_SPECS if spec != "nonzero_split"]


@pytest.mark.skipif(emu.CXX is None, reason="no C++ compiler (g++/clang++) found")
@pytest.mark.parametrize(("spec", "vector"), SPMM_BUILDS,
                         ids=[f"{s}-{'vector' if v else 'scalar'}" for s, v in SPMM_BUILDS])
def test_spmm_kernels_store_light_rows_and_add_pieces_on_the_cpu(spec: str, vector: bool) -> None:
    """Through the layout's store_columns: a light row's TB outputs stored (by 16-byte stores
    in the vector store build, as the runtime builds row-major aligned outputs), a piece's
    added, a heavy row's empty tile storing nothing."""
    params = {"nonzero_split_vec": {"NNZ_PER_WORKER": 6}, "group_lanes_vec": {"ROW_LANES": 2},
              "nonzero_split": {"NNZ_PER_WORKER": 5}}.get(spec, {})
    schedule = lower(load_spec(str(cases.SPECS / f"spmm/{spec}.yaml")), params=params,
                     layout="heavy:32")
    A = _matrix()
    host = _host(A)
    width = 8
    bound = bind(schedule, tile_view("heavy:32", host).shape, None, {}, dense_size=width)
    source = render(make_config(schedule, dtype="float64", bound=bound))
    assert "A.store_columns(teaal_y" in source  # through the layout, not a plain store
    options = dense_builds.dense_options(source, bound.dense_space, bound.dense_time,
                                         chunk=bound.work_per_thread)
    if vector:
        options = tuple(o for o in options if "DENSE_BLOCK" not in o) + VECTOR_STORES
    # values against SciPy, the owner of every (atom, n) against the simulation, Z zeroed
    spmm_emu._run_and_compare(schedule, A, width, options, held=host)
