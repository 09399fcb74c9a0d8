"""SDDMM with K0 in space (issue #13): lowering, refusals, binding, rendering and nvcc.

``K: [uniform_shape(S)]`` with ``K0`` in space and ``K1`` in time: the S threads of one
(worker, atom) each sum every S-th k and reduce with shuffles; thread k0 = 0 stores. S is a
power of two <= 32 compiled into the kernel, S * G at most a warp. The kernels' values and
owners on the CPU are in test_sddmm_lanes_emulation.py.
"""

from __future__ import annotations

import concurrent.futures
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from teaal_loops.cli import main
from teaal_loops.codegen import make_config, render
from teaal_loops.codegen.config import KernelConfig
from teaal_loops.errors import ParameterError, TeaalLoopsError
from teaal_loops.ir.dense import default_reduce_lanes, lane_tree_sum, reduce_lanes
from teaal_loops.ir.model import Combine, GpuLevel
from teaal_loops.lowering import lower
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec, load_spec_string
from teaal_loops.types import MatrixShape
from tests.codegen.sddmm_lanes_specs import LANES_SPEC, lanes_schedule, lanes_spec_text

NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
)
SHAPE = MatrixShape(rows=100, cols=80, nnz=900)


# ---- lowering and binding ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["thread_mapped", "group_mapped"])
def test_k0_in_space_lowers_to_a_dense_slot_and_stays_a_store(kind: str) -> None:
    schedule = lanes_schedule(kind, {"S": 4})
    assert schedule.kind == kind and schedule.combine is Combine.STORE
    dense = schedule.form.dense
    assert dense is not None and dense.reduce
    assert (dense.space, dense.time, dense.split) == ("K0", "K1", "S")
    levels = {r.name: r.level for r in schedule.ranks}
    assert levels["K0"] is GpuLevel.DENSE and levels["K1"] is GpuLevel.LOOP
    assert schedule.param_roles["S"] == "dense_lanes"


@pytest.mark.parametrize(
    ("kind", "params", "lanes", "group"),
    [
        ("thread_mapped", {}, 32, 1),
        ("thread_mapped", {"S": 8}, 8, 1),
        ("group_mapped", {}, 1, 32),  # G = 32 (a warp) leaves S = 1
        ("group_mapped", {"G": 4}, 8, 4),
        ("group_mapped", {"G": 2, "S": 16}, 16, 2),
        ("group_mapped", {"G": 64}, 1, 64),  # a block group: no K lanes
    ],
)
def test_binding_gives_each_worker_s_threads(
    kind: str, params: dict[str, int], lanes: int, group: int
) -> None:
    schedule = lanes_schedule(kind, params)
    bound = bind(schedule, SHAPE, None, params, dense_size=37)
    assert (bound.group_size, bound.dense_space) == (group, lanes)
    assert bound.dense_time == -(-37 // lanes)
    assert bound.threads == bound.workers * lanes * group
    tpb = bound.launch.threads_per_block
    assert bound.launch.blocks == -(-bound.threads // tpb)
    assert reduce_lanes(schedule, group) == lanes
    if "S" not in params:
        assert lanes == default_reduce_lanes(group)


def _refusal(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
             *args: str) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    assert main(["generate", str(path), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("size", [3, 6, 64])
def test_a_literal_s_that_is_not_a_power_of_two_up_to_32_is_refused_at_its_value(
    size: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = lanes_spec_text("thread_mapped", split=f"uniform_shape({size})")
    err = _refusal(text, tmp_path, capsys, "--param", "T=2")
    line = text.splitlines().index(f"      K: [uniform_shape({size})]") + 1
    assert err.startswith(f"{tmp_path / 'spec.yaml'}:{line}:")
    assert f"K: [uniform_shape({size})] with K0 in space" in err and "power of two <= 32" in err


def test_k_unsplit_in_space_is_refused_saying_how_to_split_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = lanes_spec_text("thread_mapped").replace("      K: [uniform_shape(S)]\n", "")
    text = text.replace("N, K1, K0", "N, K").replace("M0, K0", "M0, K").replace(
        "M1, N, K1", "M1, N")
    err = _refusal(text, tmp_path, capsys)
    assert "rank K is in space, but K is summed per nonzero of C: split it" in err
    assert "spacetime.Z.space" in err


def test_k1_in_space_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = lanes_spec_text("thread_mapped", space="M0, K1").replace("M1, N, K1", "M1, N, K0")
    assert "rank K1 is in space" in _refusal(text, tmp_path, capsys)


@pytest.mark.parametrize("flat", ["uniform_occupancy(C.W)", "x_merge_path(C.I)"])
def test_flat_schedules_with_k0_in_space_are_refused(
    flat: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = lanes_spec_text("thread_mapped").replace(
        "      M: [uniform_shape(T)]\n", f"      (M, N): [flatten()]\n      MN: [{flat}]\n"
    ).replace("M1, M0, N, K1, K0", "MN1, MN0, K1, K0").replace("M0, K0", "MN1, K0").replace(
        "M1, N, K1", "MN0, K1")
    err = _refusal(text, tmp_path, capsys)
    assert "rank K0 (dense) is in space on a schedule that gives each thread a chunk" in err


def test_s_times_g_past_a_warp_is_refused_at_binding() -> None:
    schedule = lanes_schedule("group_mapped", {"G": 8, "S": 8})
    with pytest.raises(ParameterError, match="8 threads over K x 8 lanes a group = 64") as err:
        bind(schedule, SHAPE, None, {"G": 8, "S": 8})
    assert err.value.key_path == "mapping.partitioning.Z.K"


@pytest.mark.parametrize("value", [12, 0, 64])
def test_a_bad_s_parameter_is_refused_at_binding(value: int) -> None:
    spec = load_spec_string(lanes_spec_text("thread_mapped"), source="lanes.yaml")
    with pytest.raises(TeaalLoopsError) as err:
        bind(lower(spec, params={"S": value}), SHAPE, None, {"S": value})
    assert "S" in str(err.value)


def test_s_bound_only_at_binding_differs_from_the_compiled_one_and_is_refused() -> None:
    schedule = lanes_schedule("thread_mapped")  # S unbound: 32 compiled in
    with pytest.raises(ParameterError, match="compiled into the kernel as 32"):
        bind(schedule, SHAPE, None, {"S": 8})
    assert bind(schedule, SHAPE, None, {"S": 32}).dense_space == 32


def test_the_library_spec_is_a_warp_per_row() -> None:
    schedule = lower(load_spec(LANES_SPEC))
    bound = bind(schedule, SHAPE, None, None, dense_size=32)
    assert schedule.kind == "group_mapped"
    assert (bound.group_size, bound.dense_space, bound.workers) == (4, 8, SHAPE.rows)
    assert bound.threads == 32 * SHAPE.rows


def test_lane_tree_sum_adds_in_the_kernels_order() -> None:
    p = np.array([[1e8, 1.0, -1e8, 1.0]], dtype=np.float32)
    # (p0 + p2) + (p1 + p3) = 0 + 2; a sequential sum would give 1 + 1e8 rounding to 1e8 ...
    assert lane_tree_sum(p)[0] == np.float32(2.0)
    q = np.arange(8, dtype=np.float64)[None, :] * 10 ** np.arange(8)[None, :]
    expected = ((q[0, 0] + q[0, 4]) + (q[0, 2] + q[0, 6])) + ((q[0, 1] + q[0, 5]) + (q[0, 3] + q[0, 7]))
    assert lane_tree_sum(q)[0] == expected
    assert lane_tree_sum(np.ones((3, 1)))[0] == 1.0


# ---- rendering --------------------------------------------------------------------------------

RENDER_CASES = [
    ("thread_mapped", {}), ("thread_mapped", {"S": 2}), ("thread_mapped", {"S": 16}),
    ("group_mapped", {"G": 4}), ("group_mapped", {"G": 2, "S": 16}),
    ("group_mapped", {"G": 16, "S": 2}), ("group_mapped", {"G": 1, "S": 32}),
]


def _lanes_config(kind: str, params: dict[str, int], dtype: str = "f32", bits: int = 32,
                  layout: str = "csr") -> KernelConfig:
    schedule = lanes_schedule(kind, {"T": 3, **params} if kind == "thread_mapped" else params)
    return make_config(schedule, dtype=dtype, layout=layout, index_bits=bits)


@pytest.mark.parametrize(("kind", "params"), RENDER_CASES)
def test_the_compiled_s_is_the_bound_one(kind: str, params: dict[str, int]) -> None:
    cfg = _lanes_config(kind, params)
    source = render(cfg)
    bound = bind(cfg.schedule, SHAPE, None, None, dense_size=8)
    lanes = int(re.search(r"#define TEAAL_K_LANES (\d+)", source).group(1))  # type: ignore[union-attr]
    assert lanes == bound.dense_space and cfg.group_size == bound.group_size
    g = cfg.group_size
    pattern = int(re.search(r"#define TEAAL_K_SEGMENT 0x([0-9a-f]+)u", source).group(1), 16)  # type: ignore[union-attr]
    assert pattern == sum(1 << (j * g) for j in range(lanes))
    body = source.split("// ---- Schedule:", 1)[1]
    assert "teaal_k_sum(" in body and "if (k0 == 0) y[" in body
    assert "atomicAdd" not in body and "__syncthreads" not in body
    assert f"__shfl_down_sync(mask, v, o{f' * {g}' if g > 1 else ''}, TEAAL_K_LANES" in source


def test_s_of_one_renders_the_plain_kernel() -> None:
    """Group-mapped with G = 32 leaves S = 1: the kernel is the one without K0 in space."""
    lanes = render(_lanes_config("group_mapped", {}))
    assert "TEAAL_K_LANES" not in lanes and "__shfl" not in lanes
    assert "y[a] = A.atom_val((offset_t)a) * F.dot(" in lanes


@pytest.mark.parametrize(("kind", "params"), [("thread_mapped", {"S": 2**61}),
                                               ("thread_mapped", {"S": 48}),
                                               ("group_mapped", {"G": 8, "S": 8})])
def test_a_bad_lane_count_is_refused_before_any_source_is_rendered(
    kind: str, params: dict[str, int]
) -> None:
    """generate binds nothing, so make_config itself refuses S not a power of two <= 32, or
    S * G past a warp, in one located line (the template's static_assert stays a backstop)."""
    with pytest.raises(ParameterError, match="S = ") as err:
        _lanes_config(kind, params)
    assert err.value.key_path is not None and "\n" not in err.value.cli_line()


# ---- nvcc -------------------------------------------------------------------------------------


def _nvcc(source: Path, *defines: str) -> tuple[str, int, str]:
    out = source.with_suffix(f"{''.join(defines).replace('-D', '.')}.o")
    proc = subprocess.run(
        [str(NVCC), "-arch=sm_90", "-c", *defines, "-o", str(out), str(source)],
        capture_output=True, text=True,
    )
    return f"{source.name} {' '.join(defines)}", proc.returncode, proc.stderr


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed)")
def test_every_lanes_kernel_compiles_with_nvcc(tmp_path: Path) -> None:
    """f32 and f64, trace builds (f64 and the library spec), 64-bit offsets, COO."""
    configs = [
        (f"{kind}{''.join(f'.{k}{v}' for k, v in p.items())}.{dtype}.i{bits}.{layout}",
         _lanes_config(kind, p, dtype, bits, layout))
        for kind, p in RENDER_CASES[:5]
        for dtype, bits, layout in (("f32", 32, "csr"), ("f64", 32, "csr"), ("f32", 64, "csr"))
    ]
    configs.append(("tm.coo", _lanes_config("thread_mapped", {"S": 8}, layout="coo")))
    library = lower(load_spec(LANES_SPEC))
    configs.append(("library", make_config(library)))
    jobs: list[tuple[Path, tuple[str, ...]]] = []
    for name, cfg in configs:
        path = tmp_path / f"{name}.cu"
        path.write_text(render(cfg))
        jobs.append((path, ()))
        if cfg.dtype == "float64" or name == "library":
            jobs.append((path, ("-DTEAAL_TRACE=1",)))
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: _nvcc(job[0], *job[1]), jobs))
    good = results
    failures = [f"{name}: exit {code}\n{e}" for name, code, e in good if code != 0]
    assert not failures, "\n".join(failures)
    warnings = [f"{name}:\n{e}" for name, code, e in good if "warning" in e.lower()]
    assert not warnings, "\n".join(warnings)
