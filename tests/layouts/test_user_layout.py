"""A layout added from user code (tests/layouts/user_dense.py), without editing the package:
it lowers, generates, converts, simulates and runs (CPU emulation) like a built-in one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops import layouts
from teaal_loops.cli import main
from teaal_loops.codegen import make_config, render
from teaal_loops.errors import LayoutError
from teaal_loops.layouts import convert, tile_view
from teaal_loops.lowering import lower, simulate
from teaal_loops.runtime.device_matrix import host_arguments
from teaal_loops.runtime.kernel import schedule_arguments
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec
from tests.codegen import host_emulation as cemu
from tests.layouts import emulation as emu
from tests.layouts import user_dense

pytestmark = pytest.mark.usefixtures("clean_registries")
SPECS = Path(__file__).resolve().parents[2] / "specs"


def test_a_registered_layout_runs_every_schedule_it_declares(tmp_path: Path) -> None:
    if emu.CXX is None:
        pytest.skip("no C++ compiler (g++/clang++) found")
    user_dense.install(tmp_path)
    assert layouts.available()[user_dense.NAME] == (
        "group_mapped", "merge_path", "thread_mapped", "work_oriented"
    )
    rng = np.random.default_rng(5)
    A = sp.random(37, 11, density=0.3, format="csr", random_state=rng)
    x = rng.uniform(-1, 1, size=11)
    for spec, params in (
        ("thread_mapped.yaml", {"NUM_TILES": 12, "NUM_THREADS": 4}),
        ("group_mapped.yaml", {}),
        ("work_oriented.yaml", {"WORK_PER_THREAD": 5}),
        ("merge_path.yaml", {"ITEMS_PER_THREAD": 7}),
    ):
        schedule = lower(load_spec(str(SPECS / spec)), params=params, layout="dense_rows")
        assert schedule.layout == user_dense.NAME
        view = tile_view(schedule.layout, A)
        bound = bind(schedule, view.shape)
        assert bound.matrix.nnz == 37 * 11  # atoms are cells
        args = host_arguments(schedule.layout, A, np.dtype("float64"), bound.index_bits)
        cfg = make_config(schedule, dtype="float64", bound=bound)
        assert "dense row-major storage (a user-defined layout)" in render(cfg)
        result = emu.run(cfg, bound, args, x)
        sim = simulate(bound, A, x)
        np.testing.assert_array_equal(result.owner, sim.owner, err_msg=spec)
        np.testing.assert_allclose(result.y, A @ x, rtol=1e-12, atol=1e-12, err_msg=spec)


def test_the_command_line_generates_a_registered_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user_dense.install(tmp_path / "templates")
    assert main(["generate", str(SPECS / "merge_path.yaml"), "--layout", "dense_rows",
                 "-o", str(tmp_path)]) == 0
    source = (tmp_path / "merge_path.dense_rows.f32.cu").read_text()
    assert "// ---- Layout: dense rows (user-defined) ----" in source
    assert isinstance(convert(sp.eye(3, format="csr"), "dense_rows"), user_dense.DenseRows)


def test_registration_checks_everything_before_registering(tmp_path: Path) -> None:
    good = dict(
        macro_file=user_dense.MACRO_FILE, template_dir=tmp_path,
        params=(layouts.KernelParam("rows", "index_t"), layouts.KernelParam("nnz", "offset_t")),
        build=user_dense.build, pack=user_dense.pack, entries=user_dense.entries,
    )
    with pytest.raises(LayoutError, match="not found under"):
        layouts.register("mine", **good)  # type: ignore[arg-type]
    user_dense.install(tmp_path)  # writes the macro file
    with pytest.raises(LayoutError, match="is built in"):
        layouts.register("ell", **good)  # type: ignore[arg-type]
    with pytest.raises(LayoutError, match="unknown schedule 'warp_mapped'"):
        layouts.register("mine", schedules=("warp_mapped",), **good)  # type: ignore[arg-type]
    with pytest.raises(LayoutError, match="taken by schedules"):
        layouts.register("mine", **{**good, "params": (layouts.KernelParam("y", "value_t*"),)})  # type: ignore[arg-type]
    with pytest.raises(LayoutError, match="merge-path needs kernel arguments 'rows'"):
        layouts.register("mine", schedules=("merge_path",),
                         **{**good, "params": (layouts.KernelParam("cols", "index_t"),)})  # type: ignore[arg-type]
    with pytest.raises(LayoutError, match="already registered"):
        user_dense.install(tmp_path)
    assert "mine" not in layouts.available()  # nothing half-registered


def test_plugins_from_entry_points_are_loaded_on_demand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed package's entry point registers its layout the first time the name is
    asked for (here the entry point list is faked; the mechanism is importlib.metadata's)."""
    import importlib.metadata

    from teaal_loops.layouts import get_layout as layout_semantics

    class FakeEntryPoint:
        name, value = "dense", "user_dense:install"

        def load(self) -> object:
            return lambda: user_dense.install(tmp_path)

    from teaal_loops.layouts import registry

    monkeypatch.setattr(registry, "_plugins_loaded", False)
    monkeypatch.setattr(
        importlib.metadata, "entry_points",
        lambda group: [FakeEntryPoint()] if group == layouts.ENTRY_POINT_GROUP else [],
    )
    assert layout_semantics("dense_rows").name == "dense_rows"


def test_a_registered_layout_serving_spmm_runs_it(tmp_path: Path) -> None:
    """forms=("spmv", "spmm"): the same macros, through XVec/YVec, compute A @ B."""
    if cemu.CXX is None:
        pytest.skip("no C++ compiler (g++/clang++) found")
    user_dense.install(tmp_path)
    assert "spmm" in layouts.get_layout(user_dense.NAME).forms
    rng = np.random.default_rng(6)
    A = sp.random(13, 9, density=0.4, format="csr", random_state=rng)
    B = rng.uniform(-1, 1, size=(9, 3))
    schedule = lower(load_spec(str(SPECS / "spmm" / "lanes_over_n.yaml")), layout="dense_rows")
    bound = bind(schedule, tile_view(schedule.layout, A).shape, dense_size=3)
    args = host_arguments(schedule.layout, A, np.dtype("float64"), bound.index_bits)
    cfg = make_config(schedule, dtype="float64", bound=bound)
    scalars = {"rows": 13, "cols": 9, "nnz": bound.matrix.nnz, **args.scalars,
               **schedule_arguments(bound), "dense_n": 3,
               "dense_space": bound.dense_space, "dense_time": bound.dense_time,
               "x_stride_k": 3, "x_stride_n": 1, "y_stride_m": 3, "y_stride_n": 1}
    arrays = {**args.arrays, "x_data": B, "y_data": np.full((13, 3), np.nan),
              "owner": np.full(bound.matrix.nnz * 3, -1, np.int32)}
    result = cemu.execute(cemu.build(cfg), cfg, bound, arrays, scalars, rows=13 * 3,
                          atoms=bound.matrix.nnz * 3)
    np.testing.assert_allclose(result.y.reshape(13, 3), A @ B, rtol=1e-12, atol=1e-12)
    sim = simulate(bound, A, B)
    np.testing.assert_array_equal(result.owner.reshape(-1, 3), sim.owner)
