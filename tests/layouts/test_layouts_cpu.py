"""Layouts on the CPU: selection from the TeAAL format section, tile views, kernel arguments,
the padding guard (library and command line), conversions and the generated files."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from teaal_loops.cli import main
from teaal_loops.codegen import make_config
from teaal_loops.errors import DeviceError, LayoutError
from teaal_loops.layouts import canonical_layout, convert, get_layout, known_layouts, tile_view
from teaal_loops.lowering import lower
from teaal_loops.matrix import read_matrix_market
from teaal_loops.runtime.device_matrix import host_arguments
from teaal_loops.spec import load_spec, load_spec_string
from tests.layouts import cases

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "specs"
MATRICES = cases.matrices()
ALL_LAYOUTS = (
    "csr", "csc", "coo", "ell", "dia", "bcsr:2x2", "bcsr:4x4", "bcsr:3x2", "panels:2", "panels:3"
)

# --------------------------------------------------------------------------------------------
# Selection: the format section, --layout, canonical names


@pytest.mark.parametrize("spec", sorted(SPECS.glob("layouts/*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_layout_spec_selects_its_layout_through_its_format(spec: Path) -> None:
    schedule = lower(load_spec(str(spec)))
    assert schedule.layout == spec.parent.name.replace("_", ":")
    assert schedule.kind == spec.stem
    combine = schedule.combine.value
    own = {"thread_mapped": "store", "group_mapped": "group_reduce"}.get(spec.stem, "atomic")
    assert combine == ("atomic" if schedule.layout == "csc" else own)


SPEC_HEAD = """einsum:
  declaration: {A: [M, K], B: [K], Z: [M]}
  expressions: ["Z[m] = A[m, k] * B[k]"]
mapping:
  rank-order: {A: [%s], B: [K], Z: [M]}
  partitioning:
    Z: {%s: [uniform_shape(T)]}
  loop-order: {Z: [%s1, %s0, %s]}
  spacetime: {Z: {space: [%s0], time: [%s1, %s]}}
format:
  A:
%s
"""


def _spec(fmt: str, *, column_major: bool = False) -> Any:
    tile, atom = ("K", "M") if column_major else ("M", "K")
    order = "K, M" if column_major else "M, K"
    text = SPEC_HEAD % (order, tile, tile, tile, atom, tile, tile, atom, fmt)
    return load_spec_string(text, source="inline.yaml")


@pytest.mark.parametrize(
    ("fmt", "layout"),
    [
        ("    CSR: {rank-order: [M, K], M: {format: U}, K: {format: C}}", "csr"),
        ("    anything: {rank-order: [M, K], M: {format: U}, K: {format: C}}", "csr"),
        ("    anything: {rank-order: [M, K], M: {format: C}, K: {format: C}}", "coo"),
        ("    anything: {rank-order: [MK], MK: {format: C}}", "coo"),
        ("    ELL: {rank-order: [M, K]}", "ell"),
        ("    dia: {rank-order: [M, K]}", "dia"),
        ("    blocked: {rank-order: [M1, K1, M0, K0], M1: {format: U}, K1: {format: C}}", "bcsr:2x2"),
        ("    BCSR_4x2: {rank-order: [M1, K1, M0, K0]}", "bcsr:4x2"),
        ("    bcsr4: {rank-order: [M, K]}", "bcsr:4x4"),
        ("    BCSR-3x5: {rank-order: [M, K]}", "bcsr:3x5"),
    ],
)
def test_format_section_picks_the_layout(fmt: str, layout: str) -> None:
    assert lower(_spec(fmt)).layout == layout


def test_a_column_major_format_picks_csc_and_tiles_columns() -> None:
    schedule = lower(_spec("    f: {rank-order: [K, M], K: {format: U}, M: {format: C}}",
                           column_major=True))
    assert (schedule.layout, schedule.tile_rank, schedule.combine.value) == ("csc", "K", "atomic")


def test_a_format_that_maps_to_no_layout_lists_the_supported_ones() -> None:
    spec = _spec("    odd: {rank-order: [K, M], K: {format: C}, M: {format: U}}")
    with pytest.raises(LayoutError) as err:
        lower(spec)
    text = err.value.cli_line()
    assert "format odd of A" in text and "maps to no layout" in text
    for name in ("csr: rank-order [M, K]; M: U, K: C", "csc: rank-order [K, M]", "ell:", "dia:",
                 "bcsr:", "coo:"):
        assert name in text
    assert "inline.yaml" in text  # where


def test_layout_argument_overrides_the_format() -> None:
    spec = load_spec(str(SPECS / "layouts/ell/thread_mapped.yaml"))
    assert lower(spec, layout="BCSR:4").layout == "bcsr:4x4"
    assert lower(spec, layout="coo").layout == "coo"


@pytest.mark.parametrize(
    ("given", "canonical"),
    [("CSR", "csr"), ("bcsr", "bcsr:2x2"), ("bcsr:4", "bcsr:4x4"), ("BCSR:2X8", "bcsr:2x8"),
     (" ell ", "ell")],
)
def test_canonical_layout_names(given: str, canonical: str) -> None:
    assert canonical_layout(given) == canonical


@pytest.mark.parametrize(
    ("bad", "message"),
    [("hyb", "unknown layout 'hyb'; supported layouts: bcsr, coo, csc, csr, dia, ell"),
     ("ell:4", "layout ell takes no option"),
     ("bcsr:0x2", "must have 1 <= R, C"),
     ("bcsr:32x32", "R\\*C <= 256"),
     ("bcsr:4y4", "must be RxC")],
)
def test_bad_layout_names_are_refused_by_name(bad: str, message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        canonical_layout(bad)


def test_every_layout_supports_thread_mapped_and_work_oriented() -> None:
    for name in known_layouts():
        kinds = get_layout(name).schedules
        assert {"thread_mapped", "work_oriented"} <= kinds
    assert "merge_path" in get_layout("ell").schedules


def test_a_schedule_lowered_for_another_layout_is_refused() -> None:
    csr_schedule = lower(load_spec(str(SPECS / "thread_mapped.yaml")))
    with pytest.raises(LayoutError, match="lower the spec with layout='csc'"):
        make_config(csr_schedule, layout="csc")
    merge = lower(load_spec(str(SPECS / "merge_path.yaml")))
    with pytest.raises(LayoutError, match="supports thread_mapped, work_oriented; not merge_path"):
        make_config(merge, layout="bcsr:4x4")


# --------------------------------------------------------------------------------------------
# Tile views


@pytest.mark.parametrize("matrix", sorted(MATRICES))
@pytest.mark.parametrize("layout", ALL_LAYOUTS)
def test_entries_rebuild_the_matrix_and_atoms_partition_into_tiles(layout: str, matrix: str) -> None:
    A = MATRICES[matrix]
    host = cases.host_layout_of_name(layout, A)
    view = tile_view(layout, host)
    rebuilt = sp.coo_matrix(
        (view.entries.val, (view.entries.row, view.entries.col)), shape=A.shape
    ).toarray()
    np.testing.assert_array_equal(rebuilt, A.toarray())
    assert np.all(np.diff(view.tile_ptr) >= 0) and view.tile_ptr[0] == 0
    assert np.all((view.entries.atom >= 0) & (view.entries.atom < view.num_atoms))
    tile_of_entry = np.searchsorted(view.tile_ptr, view.entries.atom, side="right") - 1
    name = layout.split(":")[0]
    if name == "csc":
        np.testing.assert_array_equal(tile_of_entry, view.entries.col)  # tiles are columns
        assert view.scatter
    elif name == "bcsr":
        R = int(layout.split(":")[1].split("x")[0])
        np.testing.assert_array_equal(tile_of_entry, view.entries.row // R)  # block rows
    elif name == "panels":
        # tile p * rows + m: row m's nonzeros in panel p, whose columns are p's slice of K
        P = int(layout.split(":")[1])
        width = max(-(-A.shape[1] // P), 1)
        np.testing.assert_array_equal(tile_of_entry % max(A.shape[0], 1), view.entries.row)
        np.testing.assert_array_equal(tile_of_entry // max(A.shape[0], 1),
                                      view.entries.col // width)
        assert view.num_tiles == P * A.shape[0] and view.stacked
    else:
        np.testing.assert_array_equal(tile_of_entry, view.entries.row)  # tiles are rows
    rows, cols = A.shape
    expected_atoms = {
        "ell": rows * int(np.diff(A.indptr).max(initial=0)),
        "dia": rows * len(np.unique(A.tocoo().col - A.tocoo().row)),
        "csr": A.nnz, "csc": A.nnz, "coo": A.nnz, "panels": A.nnz,
    }
    if name in expected_atoms:
        assert view.num_atoms == expected_atoms[name]
    assert view.shape.rows == view.num_tiles and view.shape.nnz == view.num_atoms


def test_ell_padding_and_dia_outside_slots_have_no_entries() -> None:
    A = sp.csr_matrix(np.array([[1.0, 2.0, 0.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]]))
    ell = tile_view("ell", A)  # width 2: atoms (0,0) (0,1) (1,0) (1,1) (2,0) (2,1)
    assert ell.num_atoms == 6
    np.testing.assert_array_equal(ell.entries.atom, [0, 1, 2])
    dia = tile_view("dia", A)  # diagonals 0 and 1: atom r*2 + d
    np.testing.assert_array_equal(dia.tile_ptr, [0, 2, 4, 6])
    np.testing.assert_array_equal(dia.entries.atom, [0, 1, 3])  # (0,0) (0,1) and (1,2)
    np.testing.assert_array_equal(dia.entries.col, [0, 1, 2])


# --------------------------------------------------------------------------------------------
# Kernel arguments (what the GPU receives)


@pytest.mark.parametrize("layout", ALL_LAYOUTS[1:])
def test_host_arguments_have_the_registry_types(layout: str) -> None:
    A = MATRICES["wide"]
    args = host_arguments(layout, A, np.dtype("float32"))
    entry = get_layout(layout)
    types = {"offset_t": np.int32, "index_t": np.int32, "value_t": np.float32}
    for p in entry.params:
        if p.is_pointer:
            assert args.arrays[p.name].dtype == types[p.scalar_type], p.name
            assert args.arrays[p.name].flags.c_contiguous
        else:
            assert p.name in ("rows", "cols", "nnz") or p.name in args.scalars
    assert args.tiles == tile_view(layout, A).shape
    assert host_arguments(layout, A, np.dtype("float64"), 64).arrays[
        next(p.name for p in entry.params if p.is_pointer)
    ].dtype.kind in "if"


def test_ell_in_row_order_is_uploaded_slot_major() -> None:
    A = MATRICES["wide"]
    by_rows = convert(A, "ell", order="row")
    args = host_arguments("ell", by_rows, np.dtype("float64"))
    np.testing.assert_array_equal(args.arrays["columns"], convert(A, "ell").columns)


def test_a_malformed_user_built_layout_is_refused() -> None:
    from teaal_loops.errors import MatrixError

    ell = convert(MATRICES["wide"], "ell")
    ell.columns[3] = 999  # outside the 70 columns
    with pytest.raises(MatrixError, match="ell matrix: a column index lies outside"):
        host_arguments("ell", ell, np.dtype("float64"))
    with pytest.raises(MatrixError, match="blocks are 2x2, the kernel's 4x4"):
        host_arguments("bcsr:4x4", convert(MATRICES["wide"], "bcsr"), np.dtype("float64"))


# --------------------------------------------------------------------------------------------
# The padding guard: library, runtime and command line


def test_padding_over_the_limit_is_refused_before_anything_is_allocated() -> None:
    A = MATRICES["skewed"]  # one row of 140 among 57 rows of at most 5
    for layout in ("ell", "dia"):
        with pytest.raises(LayoutError, match="SKIP_TOO_LARGE") as err:
            host_arguments(layout, A, np.dtype("float32"))
        assert "\n" not in err.value.cli_line()
        assert "the limit is 20x" in err.value.cli_line()
    # built by the user without the limit, it is accepted as is
    ell = convert(A, "ell", padding_limit=None)
    assert host_arguments("ell", ell, np.dtype("float32")).tiles.nnz == 57 * 140


def test_a_layout_larger_than_free_device_memory_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from teaal_loops.runtime import device_matrix as runtime

    class NoCupy:
        @staticmethod
        def asarray(a: Any) -> Any:  # pragma: no cover - must not be reached
            raise AssertionError("uploaded although it does not fit")

    monkeypatch.setattr(runtime, "cupy_module", lambda: NoCupy)
    monkeypatch.setattr(runtime, "free_device_bytes", lambda: 1000)
    with pytest.raises(DeviceError, match="SKIP_TOO_LARGE: the ell layout of this matrix needs"):
        runtime.to_device_layout("ell", MATRICES["wide"], np.dtype("float32"))


SKEWED = "longrows:rows=3000,nnz=60000,seed=4"


@pytest.mark.parametrize("layout", ["ell", "dia"])
def test_explain_reports_excess_padding_in_one_line(layout: str, capsys: pytest.CaptureFixture[str]) -> None:
    spec = SPECS / "layouts" / layout / "thread_mapped.yaml"
    assert main(["explain", str(spec), "--synthetic", SKEWED]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "SKIP_TOO_LARGE" in err and f"the {layout} layout" in err


def test_run_reports_excess_padding_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a GPU machine the runtime reaches the conversion; here CuPy is faked up to it."""
    import teaal_loops.runtime as runtime
    from teaal_loops.runtime import backend

    monkeypatch.setattr(runtime, "cupy_module", lambda: object())
    monkeypatch.setattr(backend, "cupy_module", lambda: object())
    spec = SPECS / "thread_mapped.yaml"
    assert main(["run", str(spec), "--layout", "ell", "--synthetic", SKEWED]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "SKIP_TOO_LARGE" in err


# --------------------------------------------------------------------------------------------
# Conversions: Matrix Market (general, symmetric, pattern; gzip) into every layout


def _mtx_gz(tmp_path: Path, A: Any, name: str, **kw: Any) -> Path:
    buf = io.BytesIO()
    scipy.io.mmwrite(buf, A, **kw)
    path = tmp_path / name
    path.write_bytes(gzip.compress(buf.getvalue()))
    return path


@pytest.mark.parametrize("layout", ALL_LAYOUTS)
def test_matrix_market_files_convert_to_every_layout(tmp_path: Path, layout: str) -> None:
    rng = np.random.default_rng(2)
    upper = sp.random(30, 30, density=0.1, random_state=rng, format="coo")
    symmetric = (upper + upper.T).tocoo()
    pattern = sp.random(20, 35, density=0.1, random_state=rng, format="coo")
    pattern.data[:] = 1.0
    files = {
        "general": (_mtx_gz(tmp_path, MATRICES["wide"], "g.mtx.gz"), MATRICES["wide"]),
        "symmetric": (_mtx_gz(tmp_path, symmetric, "s.mtx.gz", symmetry="symmetric"), symmetric),
        "pattern": (_mtx_gz(tmp_path, pattern, "p.mtx.gz", field="pattern"), pattern),
    }
    for path, expected in files.values():
        A = read_matrix_market(path)
        view = tile_view(layout, A)
        rebuilt = sp.coo_matrix(
            (view.entries.val, (view.entries.row, view.entries.col)), shape=A.shape
        ).toarray()
        np.testing.assert_allclose(rebuilt, expected.toarray())


# --------------------------------------------------------------------------------------------
# generated/


def test_generated_holds_every_layout_spec_in_both_dtypes() -> None:
    present = {p.name for p in (REPO / "generated").glob("*.cu")}
    for spec in SPECS.glob("layouts/*/*.yaml"):
        for dtype in ("f32", "f64"):
            name = f"{spec.stem}.{spec.parent.name}.{dtype}.cu"
            assert name in present, name
            head = (REPO / "generated" / name).read_text().splitlines()[:12]
            assert any(line.startswith(f"// layout:     {canonical_layout(spec.parent.name.replace('_', ':'))} (") for line in head)


def test_the_padding_limit_is_a_setting_of_the_kernel_and_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The refusal names the settings that lift it, and they reach the layout's builder."""
    A = MATRICES["skewed"]
    with pytest.raises(LayoutError) as err:
        host_arguments("ell", A, np.dtype("float32"))
    assert "--padding-limit none" in err.value.message and "padding_limit=None" in err.value.message
    assert host_arguments("ell", A, np.dtype("float32"), build={"padding_limit": None}).tiles.nnz
    assert host_arguments("csr", A, np.dtype("float32"), build={"padding_limit": 2.0}).tiles.nnz
    from teaal_loops.cli.common import padding_limit

    assert padding_limit("none") is None and padding_limit("50") == 50.0
    for bad in ("0", "-1", "inf", "nan", "lots"):
        with pytest.raises(Exception, match="expected a"):
            padding_limit(bad)
    with pytest.raises(SystemExit):
        main(["run", str(REPO / "specs" / "thread_mapped.yaml"), "--synthetic",
              "uniform:rows=5,nnz=5", "--padding-limit", "nan"])
    assert "--padding-limit" in capsys.readouterr().err
