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
from teaal_loops.ir.dense import default_reduce_lanes, lane_tree_sum, reduce_lanes, run_length
from teaal_loops.ir.model import Combine, GpuLevel
from teaal_loops.lowering import lower, simulate
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


def test_merge_path_with_k0_in_space_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = lanes_spec_text("work_oriented").replace("uniform_occupancy(C.W)",
                                                    "x_merge_path(C.I)")
    err = _refusal(text, tmp_path, capsys)
    assert "rank K0 (dense) is in space on merge-path" in err


def test_work_oriented_sddmm_takes_k_threads_a_chunk() -> None:
    schedule = lanes_schedule("work_oriented", {"W": 4, "S": 8})
    bound = bind(schedule, SHAPE, None, {"W": 4, "S": 8})
    assert bound.dense_space == 8 and bound.workers == 900 // 4
    assert bound.launch.total_threads >= 900 // 4 * 8


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


# ---- K split twice: runs of R neighbouring k a thread --------------------------------------

RUNS_SPEC = LANES_SPEC.with_name("lanes_over_k_runs.yaml")


def test_k_split_twice_lowers_to_threads_summing_runs() -> None:
    schedule = lower(load_spec(RUNS_SPEC))
    dense = schedule.form.dense
    assert dense is not None
    assert (dense.space, dense.time, dense.split, dense.run) == ("K1", "K2", "K_STEP", "K_RUN")
    levels = {r.name: r.level for r in schedule.ranks if r.name.startswith("K")}
    assert levels == {"K2": GpuLevel.LOOP, "K1": GpuLevel.DENSE, "K0": GpuLevel.LOOP}
    assert run_length(schedule) == 4 and reduce_lanes(schedule, 4) == 8
    bound = bind(schedule, SHAPE, None, {}, dense_size=128)
    assert bound.dense_space == 8 and bound.params.get("K_STEP", 32) == 32  # the step, not S
    assert schedule.combine is Combine.STORE
    # the thread of every (atom, k): (k div R) mod S among the atom's 8
    owner = simulate(bound, _sparse(), np.zeros((100, 128)), np.zeros((128, 80))).owner
    k = np.arange(128)
    first = owner[0] - owner[0, 0]
    assert np.array_equal(first // 4 % 8, (k // 4 % 8))  # G = 4 lanes between slots


def _sparse() -> object:
    import scipy.sparse as sp

    return sp.random(100, 80, density=0.1, format="csr", random_state=3)


def _runs_text(space: str = "M, K1, N0", time: str = "N1, K2, K0",
               split: str = "uniform_shape(P), uniform_shape(R)") -> str:
    text = lanes_spec_text("group_mapped_runs", space=space).replace(
        "time: [N1, K2, K0]", f"time: [{time}]")
    return text.replace("uniform_shape(P), uniform_shape(R)", split)


@pytest.mark.parametrize(("space", "time"), [
    ("M, K0, N0", "N1, K2, K1"),  # the run in space
    ("M, K2, N0", "N1, K1, K0"),  # the step in space
])
def test_runs_need_k1_in_space_and_k2_k0_in_time(
    space: str, time: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refusal(_runs_text(space, time), tmp_path, capsys, "--param", "P=32",
                   "--param", "R=4")
    assert "put K1 in space and K2 and K0 in time" in err and "spacetime" in err


@pytest.mark.parametrize(("split", "message"), [
    ("uniform_shape(30), uniform_shape(4)", "tiles of 4 do not nest in tiles of 30"),
    ("uniform_shape(192), uniform_shape(4)", "192 / 4, must be a whole power of two"),
    ("uniform_shape(32), uniform_shape(4), uniform_shape(2)", "it takes one uniform_shape(S)"),
])
def test_bad_literal_runs_are_refused_at_the_split(
    split: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _runs_text(split=split)
    if split.count("uniform_shape") == 3:  # a fourth final rank, K3, in time
        text = text.replace("K2, K1, K0]", "K3, K2, K1, K0]").replace(
            "N1, K2, K0]", "N1, K3, K2, K0]")
    err = _refusal(text, tmp_path, capsys)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.strip().startswith("K: ["))
    assert err.startswith(f"{tmp_path / 'spec.yaml'}:{line}:") and message in err


@pytest.mark.parametrize(("params", "message"), [
    ({"G": 4, "P": 24, "R": 4}, "24 / 4, must be a whole power of two"),
    ({"G": 8, "P": 64, "R": 4}, "16 threads over K x 8 lanes a group = 128"),
])
def test_bad_run_parameters_are_refused_at_binding(params: dict[str, int],
                                                   message: str) -> None:
    schedule = lanes_schedule("group_mapped_runs", params)
    with pytest.raises(ParameterError, match=re.escape(message)):
        bind(schedule, SHAPE, None, params)


def test_spmm_takes_one_split_of_its_dense_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (RUNS_SPEC.parents[1] / "spmm/nonzero_split_vec.yaml").read_text().replace(
        "N: [uniform_shape(N_VEC)]", "N: [uniform_shape(8), uniform_shape(4)]").replace(
        "Z: [MK1, N1, N0, MK0]", "Z: [MK1, N2, N1, N0, MK0]").replace(
        "time: [N0, MK0]", "time: [N2, N0, MK0]")
    err = _refusal(text, tmp_path, capsys)
    assert "it takes one uniform_shape(S)" in err and "summed" not in err


def test_runs_read_by_vector_loads_only_where_whole_runs_of_16_bytes_are_aligned() -> None:
    from types import SimpleNamespace

    from teaal_loops.runtime import dense_builds

    def arr(shape: tuple[int, int], strides: tuple[int, int], itemsize: int = 4) -> object:
        return SimpleNamespace(dtype=np.dtype(f"f{itemsize}"), shape=shape, strides=strides,
                               data=SimpleNamespace(ptr=4096))

    u, v_t = arr((9, 32), (128, 4)), arr((32, 9), (4, 128))
    assert dense_builds.sampled_vector(u, v_t, run=4) == 1  # 16-byte runs
    assert dense_builds.sampled_vector(arr((9, 36), (144, 4)), arr((36, 9), (4, 144)), run=8) == 0
    assert dense_builds.sampled_vector(u, v_t, run=2) == 0  # 8-byte runs
    assert dense_builds.sampled_vector(arr((9, 32), (256, 8), 8), arr((32, 9), (8, 256), 8),
                                  run=2) == 1  # one double2 a run
    source = render(make_config(lower(load_spec(RUNS_SPEC))))
    assert dense_builds.dense_options(source, 8, 4, vector=1) == ("-DTEAAL_DENSE_VECTOR=1",)


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed)")
def test_every_runs_kernel_compiles_with_nvcc(tmp_path: Path) -> None:
    """The library spec in f32 and f64, plain, vector and trace builds; a thread-mapped runs
    kernel with runs of 3 (no vector loads); work-oriented with runs and with every S-th k."""
    library = lower(load_spec(RUNS_SPEC))
    configs = [(f"runs.{d}", make_config(library, dtype=d)) for d in ("f32", "f64")]
    configs.append(("tm_runs", make_config(lanes_schedule(
        "thread_mapped_runs", {"P": 24, "R": 3, "T": 2}))))
    for dtype in ("f32", "f64"):
        configs.append((f"wo_runs.{dtype}", make_config(lanes_schedule(
            "work_oriented_runs", {"W": 1, "P": 32, "R": 4}), dtype=dtype)))
    configs.append(("wo_s8", make_config(lanes_schedule("work_oriented", {"W": 2, "S": 8}))))
    jobs = []
    for name, cfg in configs:
        path = tmp_path / f"{name}.cu"
        path.write_text(render(cfg))
        for defines in ((), ("-DTEAAL_DENSE_VECTOR=1",), ("-DTEAAL_TRACE=1",
                                                          "-DTEAAL_DENSE_VECTOR=1")):
            jobs.append((path, defines))
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: _nvcc(job[0], *job[1]), jobs))
    failures = [f"{name}: exit {code}\n{e}" for name, code, e in results if code != 0]
    assert not failures, "\n".join(failures)
    assert not [e for _, _, e in results if "warning" in e.lower()]
