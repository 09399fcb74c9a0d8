"""Rendering: determinism, headers, types, structural checks, registry, strict templates."""

from __future__ import annotations

import jinja2
import pytest

from teaal_loops import layouts
from teaal_loops.codegen import make_config, render, template_dir
from teaal_loops.codegen.render import environment
from teaal_loops.errors import LayoutError, ParameterError
from teaal_loops.layouts import get_layout, known_layouts
from teaal_loops.lowering import lower
from teaal_loops.schedules import bind, definitions
from teaal_loops.spec import load_spec
from teaal_loops.types import MatrixShape
from tests.codegen import hand_schedules as hs
from tests.conftest import REPO

VARIANTS = hs.all_variants()


@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_render_is_deterministic(name: str, dtype: str) -> None:
    first = render(make_config(VARIANTS[name], dtype=dtype))
    environment.cache_clear()  # a fresh Environment must give byte-identical text
    second = render(make_config(hs.all_variants()[name], dtype=dtype))
    assert first == second


def test_header_names_spec_schedule_layout_dtype_and_parameters() -> None:
    s = hs.thread_mapped(params={"NUM_TILES": None, "NUM_THREADS": 4096})
    src = render(make_config(s, dtype="f64"))
    header = src.split("#ifndef")[0]
    assert "spec:       test_thread_mapped" in header
    assert "schedule:   thread_mapped" in header
    assert "layout:     csr" in header
    assert "dtype:      float64" in header
    assert "NUM_THREADS = 4096" in header
    assert "NUM_TILES = from the matrix and device at launch" in header
    assert all(line.startswith("//") for line in header.strip().splitlines())


@pytest.mark.parametrize(
    ("dtype", "ctype"), [("f32", "float"), ("float32", "float"), ("f64", "double")]
)
def test_value_type_follows_dtype(dtype: str, ctype: str) -> None:
    src = render(make_config(hs.merge_path(), dtype=dtype))
    assert f"typedef {ctype} value_t;" in src


@pytest.mark.parametrize(("bits", "ctype"), [(32, "int"), (64, "long long")])
def test_offset_type_follows_index_width(bits: int, ctype: str) -> None:
    src = render(make_config(hs.work_oriented(), index_bits=bits))
    assert f"typedef {ctype} offset_t;" in src
    assert "typedef int index_t;" in src  # columns stay 32-bit either way


@pytest.mark.parametrize(
    ("rows", "nnz", "bits"),
    [(10, 2**31 - 1 - 10, 32), (11, 2**31 - 1 - 10, 64), (1, 2**31, 64), (2**20, 2**24, 32)],
)
def test_index_width_selected_from_size_without_allocating(rows: int, nnz: int, bits: int) -> None:
    for schedule in (hs.merge_path(), hs.work_oriented(), hs.thread_mapped(), hs.group_mapped()):
        bound = bind(schedule, MatrixShape(rows=rows, cols=rows, nnz=nnz))
        cfg = make_config(schedule, bound=bound)
        assert cfg.index_bits == bits
        expected = "long long" if bits == 64 else "int"
        assert f"typedef {expected} offset_t;" in render(cfg)


def test_runtime_converter_refuses_too_narrow_offsets() -> None:
    from teaal_loops.runtime.device_matrix import _choose_bits

    assert _choose_bits(5, 2**31, None) == 64
    assert _choose_bits(5, 100, None) == 32
    assert _choose_bits(5, 100, 64) == 64
    with pytest.raises(LayoutError, match="64-bit"):
        _choose_bits(5, 2**31, 32)


def test_signature_lists_every_kernel_parameter_in_order() -> None:
    cfg = make_config(hs.thread_mapped())
    src = render(cfg)
    params = cfg.kernel_params()
    signature = src[src.index(cfg.kernel_name) :]
    ends = [("," if p is not params[-1] else "") + "  //" for p in params]
    positions = [signature.index(f" {p.name}{end}") for p, end in zip(params, ends, strict=True)]
    assert positions == sorted(positions)
    names = [p.name for p in cfg.kernel_params()]
    assert names[:6] == ["rows", "cols", "nnz", "indptr", "indices", "values"]
    assert names[-3:] == ["x", "y", "owner"]
    assert {"S2", "S1", "E2", "E1", "E0", "workers"} <= set(names)


def test_group_size_is_compiled_in_and_block_groups_use_shared_memory() -> None:
    warp = render(make_config(hs.group_mapped(32)))
    block = render(make_config(hs.group_mapped(256)))
    sub = render(make_config(hs.group_mapped(8)))
    assert "#define TEAAL_GROUP_SIZE 32" in warp and "__shared__" not in warp
    assert "__shfl_down_sync" in warp
    assert "#define TEAAL_GROUP_SIZE 256" in block and "__shared__" in block
    assert "#define TEAAL_BLOCK_THREADS 256" in block  # G > block_threads: the block is the group
    assert "<< (threadIdx.x % 32 / TEAAL_GROUP_SIZE * TEAAL_GROUP_SIZE)" in sub  # sub-warp mask


@pytest.mark.parametrize("g", [0, 3, 48, 2048])
def test_bad_group_size_is_a_parameter_error(g: int) -> None:
    s = hs.group_mapped(g)
    with pytest.raises(ParameterError, match="group size"):
        make_config(s)


def test_group_size_must_divide_the_block() -> None:
    with pytest.raises(ParameterError, match="divide"):
        make_config(hs.group_mapped(64, block_threads=96))


def test_bad_block_threads_is_a_parameter_error() -> None:
    with pytest.raises(ParameterError, match="block_threads"):
        make_config(hs.thread_mapped(block_threads=100))


def test_unknown_layout_lists_supported_ones() -> None:
    with pytest.raises(LayoutError, match="supported layouts: .*csr"):
        make_config(hs.thread_mapped(), layout="hyb")


def test_unknown_dtype_is_refused() -> None:
    with pytest.raises(ParameterError, match="f32 or f64"):
        make_config(hs.thread_mapped(), dtype="int8")


def test_templates_are_strict_about_undefined_variables() -> None:
    with pytest.raises(jinja2.UndefinedError):
        environment().from_string("{{ not_defined }}").render()
    assert environment().undefined is jinja2.StrictUndefined


def test_registry_files_exist_for_every_schedule_and_layout() -> None:
    root = template_dir()
    assert {"thread_mapped", "group_mapped", "work_oriented", "merge_path"} <= {
        d.kind for d in definitions()
    }
    for definition in definitions():
        assert (root / definition.template).is_file()
    for name in known_layouts():
        assert (root / get_layout(name).macro_file).is_file()


@pytest.mark.usefixtures("clean_layouts")
def test_a_new_layout_plugs_in_through_the_registry_alone() -> None:
    """Schedules reach the layout only through its definition and its macro file."""
    csr = get_layout("csr")
    layouts.register(
        "csr_alias",
        macro_file=csr.macro_file,
        description="the CSR macros under another name",
        params=csr.params,
        build=csr.build,
        pack=csr.pack,
        entries=csr.entries,
        schedules=csr.schedules,
    )
    for schedule in VARIANTS.values():
        src = render(make_config(schedule, layout="csr_alias"))
        assert "layout:     csr_alias (the CSR macros under another name)" in src
    for definition in definitions():  # no schedule template names a concrete layout
        text = (template_dir() / definition.template).read_text()
        assert "csr" not in text.lower()


@pytest.fixture
def clean_layouts(monkeypatch: pytest.MonkeyPatch):
    from teaal_loops.codegen import clear_caches
    from teaal_loops.layouts import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    yield
    clear_caches()


@pytest.mark.parametrize("layout", ["csr", "coo", "ell"])
def test_nonzero_split_holds_no_barrier_inside_the_loop_over_n(layout: str) -> None:
    """Threads of one warp leave the loop over N at different steps (N not a multiple of
    DS): the warp's shuffles must come before it (the blocked body, a lambda run per block of
    steps), with no block barrier anywhere, the warp's atom range from its workers
    (thread / DS), and each thread's row search run once, outside it."""
    schedule = lower(load_spec(REPO / "specs/spmm/nonzero_split.yaml"), layout=layout)
    src = render(make_config(schedule, dtype="f32"))
    body = src.split("__global__")[1]
    head, loop = body.split("auto teaal_body = [&](auto teaal_block, offset_t teaal_step0) {")
    assert "__syncthreads" not in body
    assert head.count("__shfl_sync(") == 2 and "__shfl_sync(0xffffffffu, found" not in loop
    assert "first_worker = warp_thread / dense_space" in head
    assert "last_worker = (warp_thread + 31) / dense_space" in head
    assert "teaal_row_of(bounds" in head and "teaal_row_of(" not in loop


@pytest.mark.parametrize(("layout", "barrier"), [("csr", False), ("ell", True), ("dia", True)])
def test_merge_path_stages_nonzero_atoms_beside_the_row_bounds(layout: str, barrier: bool) -> None:
    """Where a layout's atoms are its nonzeros (CSR), a contribution needs no row: its loads go
    out with the row bounds', no barrier between (one memory round trip less a launch; small
    graphs are latency-bound). ELL and DIA find each slot's row in the staged bounds first."""
    src = render(make_config(hs.merge_path(), layout=layout))
    staged = src.split("// 2. Row bounds")[1].split("// 4. This thread's chunk")[0]
    bounds, products = staged.split("// 3. Contributions")
    assert ("__syncthreads()" in bounds) is barrier
    assert ("teaal_tile_row(" in products) is barrier
    assert products.count("__syncthreads()") == 1  # the walk reads every contribution
