"""Register blocking over the dense rank's time steps (thread-mapped, group-mapped and
work-oriented SpMM), and work-oriented's walk with atoms loaded ahead.

A thread walks its atoms once for up to TEAAL_DENSE_BLOCK of its dense steps. Checked here
without a GPU: the rendered sources (blocked where they should be, untouched elsewhere), nvcc
on every layout, group size and block size, and the kernels run on the CPU (g++ and the CUDA
shim) against SciPy and the simulation's owner of every (atom, n) for dense_time 1 .. 7, so
the last block holds dead steps. tests/gpu/test_dense_blocked_gpu.py repeats the runs on a GPU.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from teaal_loops.codegen import make_config, render
from teaal_loops.layouts import get_layout, known_layouts
from teaal_loops.lowering import lower
from teaal_loops.spec import load_spec, load_spec_string
from tests.codegen import hand_schedules as hs
from tests.codegen import host_emulation as emu
from tests.codegen import test_nvcc as nvcc
from tests.codegen import test_spmm_emulation as spmm_emu

REPO = Path(__file__).resolve().parents[2]
BLOCKED_CALL = "teaal_body(TeaalBlock<TEAAL_DENSE_BLOCK>{}, teaal_step);"
SINGLE_CALL = "teaal_body(TeaalBlock<1>{}, teaal_step);"
SPMM = "einsum:\n  declaration: {A: [M, K], B: [K, N], Z: [M, N]}\n" \
    "  expressions: ['Z[m, n] = A[m, k] * B[k, n]']\n"
# thread-mapped with N0 in space and N1 in time (lanes_over_n_tiled), any layout's tiling
THREAD_TILED = SPMM + (
    "mapping:\n  partitioning:\n    Z:\n      N: [uniform_shape(N_TILE)]\n"
    "  loop-order:\n    Z: [M, N1, N0, K]\n  spacetime:\n    Z: {space: [M, N0], time: [N1, K]}\n"
)
# thread-mapped over CSC's columns (a scattering layout) with all of N in time
THREAD_COLUMNS_N_TIME = SPMM + (
    "mapping:\n  rank-order:\n    A: [K, M]\n  partitioning:\n    Z:\n"
    "      K: [uniform_shape(T)]\n  loop-order:\n    Z: [K1, K0, N, M]\n"
    "  spacetime:\n    Z: {space: [K0], time: [K1, N, M]}\n"
)


def _source(spec: Any, dtype: str = "f32", layout: str | None = None, **params: int) -> str:
    parsed = load_spec_string(spec) if isinstance(spec, str) else load_spec(spec)
    schedule = lower(parsed, params=params or None, layout=layout)
    return render(make_config(schedule, dtype=dtype))


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize(("spec", "params"), [
    (REPO / "specs/spmm/lanes_over_n.yaml", {}),
    (REPO / "specs/spmm/lanes_over_n_tiled.yaml", {}),
    (REPO / "specs/spmm/group_lanes_over_k.yaml", {}),
    (REPO / "specs/spmm/group_lanes_over_k.yaml", {"G": 64}),
])
def test_thread_and_group_mapped_spmm_walk_atoms_once_per_block(
    spec: Path, params: dict[str, int], dtype: str
) -> None:
    src = _source(spec, dtype, **params)
    assert "#define TEAAL_DENSE_BLOCK 4" in src
    assert BLOCKED_CALL in src and SINGLE_CALL in src
    # CSR: the atom's value and column are loaded once, outside the loop over the block
    if "group" in spec.stem:  # each step's loads first, then its products fused into the sums
        loads = re.findall(r"weight\[u\] = A\.atom_val\(([^)]*)\);", src)
        assert "teaal_load_columns(teaal_x, A.atom_col(" in src and "column[u]);" in src
        assert "sum[j] = teaal_fma(weight[u], column[u][j], sum[j]);" in src
    else:
        loads = re.findall(r"const value_t v = A\.atom_val\(([^)]*)\);", src)
        assert "teaal_load_columns(teaal_x, c, column);" in src  # one element of B per step
    assert loads and all("j" not in at for at in loads)
    assert "for (int j = 0; j < TB; ++j) b[j] = __ldg(x[j] + c);" in src
    assert "teaal_live[j]" in src  # stores and trace guarded per step
    assert "for (offset_t step = 0; step < dense_time; ++step)" not in src


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_work_oriented_spmm_walks_its_chunk_once_per_block(dtype: str) -> None:
    """No block barrier: each warp finds its rows by two lanes' searches and shuffles, which
    every lane reaches (the whole warp leaves before them when it has no atoms, a thread past
    the last worker only after them) outside the blocked body; each atom's value and column
    are loaded once for the block's columns, and the walk with atoms loaded ahead is there
    for the runtime's build option, the plain walk by default."""
    src = _source(REPO / "specs/spmm/nonzero_split.yaml", dtype)
    assert "#define TEAAL_DENSE_BLOCK 4" in src and BLOCKED_CALL in src and SINGLE_CALL in src
    kernel = src.split("Schedule: work-oriented")[1]
    assert "__syncthreads()" not in kernel and "__shared__" not in kernel
    warp_leaves = kernel.index("if (warp_first >= (long long)atoms) return;")
    worker_leaves = kernel.index("if (tid >= workers) return;")
    shuffles = [m.start() for m in re.finditer(r"__shfl_sync\(0xffffffffu, found", kernel)]
    assert len(shuffles) == 2
    assert warp_leaves < min(shuffles) and max(shuffles) < worker_leaves
    assert worker_leaves < kernel.index("auto teaal_body")
    # SpMV keeps the block's rows staged in shared memory (a warp walks 32 chunks there)
    spmv = _source(REPO / "specs/work_oriented.yaml", dtype).split("Schedule: work-oriented")[1]
    assert "__syncthreads()" in spmv and "__shfl_sync" not in spmv
    assert "#ifndef TEAAL_ATOMS_AHEAD\n#define TEAAL_ATOMS_AHEAD 1\n" in src
    assert "#if TEAAL_ATOMS_AHEAD > 1" in kernel
    assert "teaal_load_columns(teaal_x, c, column);" in kernel
    # the walk ahead: rows of B by a 32-bit byte stride, from each column's kept address
    assert "teaal_load_row(cols, (long long)c[u] * row_bytes, b[u]);" in kernel
    assert "const int row_bytes = teaal_x[0].row_bytes();" in kernel
    assert "teaal_keep(cols[j]);" in kernel
    assert "for (offset_t step = 0; step < dense_time; ++step)" not in src
    # SpMM reads atoms through L1; SpMV streams them
    assert "return __ldg(p);" in src
    assert "return __ldcs(p);" in _source(REPO / "specs/work_oriented.yaml", dtype)


def test_work_oriented_spmm_on_other_layouts_has_no_walk_ahead() -> None:
    ell = _source(REPO / "specs/spmm/nonzero_split.yaml", layout="ell")
    assert "TEAAL_ATOMS_AHEAD" not in ell
    assert "if (teaal_live[j]) A.accumulate(acc[j], row, a, teaal_x[j], teaal_y[j]);" in ell


@pytest.mark.parametrize("spec", [
    *sorted((REPO / "specs").glob("*.yaml")),  # SpMV, every schedule
    *sorted((REPO / "specs/sddmm").glob("*.yaml")),
])
def test_spmv_and_sddmm_are_not_blocked(spec: Path) -> None:
    for dtype in ("f32", "f64"):
        src = _source(spec, dtype)
        assert "TEAAL_DENSE_BLOCK" not in src and "teaal_body" not in src
        assert "teaal_live" not in src


@pytest.mark.parametrize("variant", sorted(hs.all_variants()))
def test_hand_built_spmv_schedules_are_not_blocked(variant: str) -> None:
    src = render(make_config(hs.all_variants()[variant], dtype="f64"))
    assert "TEAAL_DENSE_BLOCK" not in src and "teaal_live" not in src


def test_merge_path_spmm_keeps_its_loop_over_n() -> None:
    src = _source(spmm_emu.MERGE_PATH_SPMM, I=4)
    assert "TEAAL_DENSE_BLOCK" not in src
    assert "for (offset_t step = 0; step < dense_time; ++step)" in src


def test_layouts_without_nonzero_atoms_accumulate_per_step() -> None:
    """ELL pads and BCSR spans rows: the body calls the layout's accumulate for every step
    (nvcc merges its __ldg loads); CSC's accumulate adds to y itself, so only live steps."""
    ell = _source(THREAD_TILED, layout="ell")
    assert "A.accumulate(acc[j], m, a, teaal_x[j], teaal_y[j]);" in ell
    assert "atom_val" not in ell.split("Schedule: thread-mapped")[1]
    csc = _source(THREAD_COLUMNS_N_TIME, layout="csc")
    assert "if (teaal_live[j]) A.accumulate(acc[j], m, a, teaal_x[j], teaal_y[j]);" in csc


@pytest.mark.skipif(nvcc.NVCC is None, reason="nvcc not found (CUDA toolkit not installed)")
def test_blocked_kernels_compile_on_every_layout_group_size_and_block(tmp_path: Path) -> None:
    """Every SpMM layout of thread-mapped (N split and N in time), group-mapped with G = 1, 4,
    32 and 64 (a block group: TB shared-memory rows of warp sums), f32 and f64, the trace build,
    and blocks of 1, 3 (dense_time no multiple of it) and 8 steps."""
    jobs: list[tuple[Path, str, tuple[str, ...]]] = []

    def add(name: str, source: str, *defines: str) -> None:
        path = tmp_path / f"{name}.cu"
        path.write_text(source)
        jobs.append((path, "sm_90", defines))

    for layout in known_layouts():
        definition = get_layout(layout)
        if "spmm" not in definition.forms or "thread_mapped" not in definition.schedules:
            continue
        spec = THREAD_COLUMNS_N_TIME if definition.scatters else THREAD_TILED
        safe = layout.replace(":", "_")
        add(f"thread.{safe}.f32", _source(spec, "f32", layout=layout))
        add(f"thread.{safe}.f64", _source(spec, "f64", layout=layout), "-DTEAAL_TRACE=1")
    group = REPO / "specs/spmm/group_lanes_over_k.yaml"
    for g in (1, 4, 32, 64):
        add(f"group.g{g}.f32", _source(group, "f32", G=g))
        add(f"group.g{g}.f64", _source(group, "f64", G=g), "-DTEAAL_TRACE=1")
        # the runtime's build of B with 32-bit byte strides (dense_builds.BYTE_STRIDES_OPTION)
        add(f"group.g{g}.f64.bytes", _source(group, "f64", G=g), "-DTEAAL_BYTE_STRIDES=1",
            "-DTEAAL_TRACE=1")
    tiled = _source(REPO / "specs/spmm/lanes_over_n_tiled.yaml", "f64")
    for block in (1, 3, 8):
        add(f"tiled.b{block}", tiled, f"-DTEAAL_DENSE_BLOCK={block}", "-DTEAAL_TRACE=1")
        add(f"group.b{block}", _source(group, "f32", G=64), f"-DTEAAL_DENSE_BLOCK={block}")
    split = REPO / "specs/spmm/nonzero_split.yaml"
    for layout in known_layouts():
        definition = get_layout(layout)
        if "spmm" not in definition.forms or definition.scatters or \
                "work_oriented" not in definition.schedules:
            continue
        safe = layout.replace(":", "_")
        for dtype in ("f32", "f64"):
            source = _source(split, dtype, layout=layout)
            add(f"split.{safe}.{dtype}", source, "-DTEAAL_TRACE=1")
            add(f"split.{safe}.{dtype}.one", source, "-DTEAAL_DENSE_BLOCK=1")
            if "TEAAL_ATOMS_AHEAD" in source:
                add(f"split.{safe}.{dtype}.ahead", source, "-DTEAAL_DENSE_BLOCK=1",
                    "-DTEAAL_ATOMS_AHEAD=8")
                add(f"split.{safe}.{dtype}.ahead4", source, "-DTEAAL_ATOMS_AHEAD=3",
                    "-DTEAAL_TRACE=1")
    assert len(jobs) >= 30
    nvcc._compile_all(jobs)


# (spec, params, N): dense_time = ceil(N / min(N_TILE, N)) runs 1 .. 7 and group-mapped's N in
# time runs dense_time = N; with blocks of 4 the last block holds 1, 2 or 3 dead steps, and N
# not a multiple of N_TILE leaves some slots a dead last step the others have live.
TILED = REPO / "specs/spmm/lanes_over_n_tiled.yaml"
GROUP = REPO / "specs/spmm/group_lanes_over_k.yaml"
RUNS: list[tuple[str, Path, dict[str, int], int, int]] = [
    ("tiled_n1", TILED, {"N_TILE": 1}, 1, 1),
    ("tiled_n3_dt3", TILED, {"N_TILE": 1}, 3, 3),
    ("tiled_n3_dt2", TILED, {"N_TILE": 2}, 3, 2),
    ("tiled_n8_dt4", TILED, {"N_TILE": 2}, 8, 4),
    ("tiled_n8_dt3", TILED, {"N_TILE": 3}, 8, 3),
    ("tiled_n33_dt5", TILED, {"N_TILE": 7}, 33, 5),
    ("tiled_n33_dt7", TILED, {"N_TILE": 5}, 33, 7),
    ("tiled_n33_dt1", TILED, {"N_TILE": 64}, 33, 1),
    ("group_g4_n3", GROUP, {"G": 4}, 3, 3),
    ("group_g4_n7", GROUP, {"G": 4}, 7, 7),
    ("group_g1_n5", GROUP, {"G": 1}, 5, 5),
    ("group_g64_n6", GROUP, {"G": 64}, 6, 6),
]


SPLIT = REPO / "specs/spmm/nonzero_split.yaml"
# (case, layout, params, N, dense_time, build options): work-oriented SpMM blocked with dead
# steps, and the walk with atoms loaded ahead: chunks of 5 and 11 atoms (groups of 8 end
# inside a chunk, rows end inside groups and span several), blocks of one and of 3 steps.
SPLIT_RUNS: list[tuple[str, str | None, dict[str, int], int, int, tuple[str, ...]]] = [
    ("split_dt5", None, {"NNZ_PER_WORKER": 4, "N_LANES": 2}, 9, 5, ()),
    ("split_dt3_ell", "ell", {"NNZ_PER_WORKER": 4, "N_LANES": 2}, 5, 3, ()),
    ("split_dt2_bcsr", "bcsr:2x2", {"NNZ_PER_WORKER": 2, "N_LANES": 3}, 5, 2, ()),
    ("split_ahead_w5", None, {"NNZ_PER_WORKER": 5, "N_LANES": 4}, 3, 1,
     ("-DTEAAL_DENSE_BLOCK=1", "-DTEAAL_ATOMS_AHEAD=8")),
    ("split_ahead_w11", None, {"NNZ_PER_WORKER": 11, "N_LANES": 8}, 8, 1,
     ("-DTEAAL_DENSE_BLOCK=1", "-DTEAAL_ATOMS_AHEAD=8")),
    ("split_ahead_coo", "coo", {"NNZ_PER_WORKER": 6, "N_LANES": 2}, 2, 1,
     ("-DTEAAL_DENSE_BLOCK=1", "-DTEAAL_ATOMS_AHEAD=4")),
    ("split_ahead_blocked", None, {"NNZ_PER_WORKER": 7, "N_LANES": 2}, 7, 4,
     ("-DTEAAL_ATOMS_AHEAD=3",)),
    # one worker a warp, groups of 8 (chunks of 37: rows end inside and between groups);
    # 4 lanes over blocks of 2 steps, groups of 4
    ("split_ahead_ds32", None, {"NNZ_PER_WORKER": 37, "N_LANES": 32}, 32, 1,
     ("-DTEAAL_DENSE_BLOCK=1", "-DTEAAL_ATOMS_AHEAD=8")),
    ("split_ahead_blocked_dt2", None, {"NNZ_PER_WORKER": 9, "N_LANES": 4}, 8, 2,
     ("-DTEAAL_DENSE_BLOCK=2", "-DTEAAL_ATOMS_AHEAD=4")),
]


@pytest.mark.skipif(emu.CXX is None, reason="no C++ compiler (g++/clang++) found")
@pytest.mark.parametrize("case", [r[0] for r in SPLIT_RUNS])
def test_work_oriented_spmm_kernel_on_the_cpu(case: str) -> None:
    """Values against SciPy and the owner of every (atom, n) against the simulation, on a
    matrix of many blocks whose rows cross chunks and blocks."""
    from teaal_loops.matrix import synthetic

    _, layout, params, width, dense_time, options = next(r for r in SPLIT_RUNS if r[0] == case)
    A = synthetic("rmat", rows=256, nnz=2500, seed=2)
    bound = spmm_emu._run_and_compare(spmm_emu._schedule((SPLIT, layout) if layout else SPLIT,
                                                         params), A, width, options or None)
    assert bound.dense_time == dense_time
    assert bound.launch.blocks > 4


@pytest.mark.skipif(emu.CXX is None, reason="no C++ compiler (g++/clang++) found")
@pytest.mark.parametrize("case", [r[0] for r in RUNS])
def test_blocked_kernel_on_the_cpu(case: str) -> None:
    _, spec, params, width, dense_time = next(r for r in RUNS if r[0] == case)
    bound = spmm_emu._run_and_compare(spmm_emu._schedule(spec, params), spmm_emu._matrix(),
                                      width)
    assert bound.dense_time == dense_time


def test_group_mapped_float64_spmv_walks_two_steps_through_l1() -> None:
    """float64 SpMV (group-mapped only) keeps two steps of loads in flight and reads its atoms
    through L1; float32 SpMV keeps four streaming steps, SpMM and the other schedules their
    own loads, whatever the dtype."""
    f64 = _source(REPO / "specs/group_mapped.yaml", "f64")
    f32 = _source(REPO / "specs/group_mapped.yaml", "f32")
    assert "#define TEAAL_UNROLL 2\n" in f64 and "return __ldg(p);" in f64
    assert "#define TEAAL_UNROLL 4\n" in f32 and "return __ldcs(p);" in f32
    for spec in ("thread_mapped", "merge_path", "work_oriented"):
        assert "return __ldcs(p);" in _source(REPO / f"specs/{spec}.yaml", "f64")
    spmm = _source(REPO / "specs/spmm/group_lanes_vec.yaml", "f64")
    assert "#define TEAAL_UNROLL 4\n" in spmm and "return __ldg(p);" in spmm
