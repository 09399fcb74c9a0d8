"""The contiguous dense placement: ``N: [uniform_shape(S)]`` with ``N1`` in space and ``N0`` in
time, so each thread owns ``S`` neighbouring columns ``n = slot * S + step`` and, where a row
of B allows, reads them with 16-byte vector loads (specs/spmm/nonzero_split_vec.yaml,
lanes_over_n_vec.yaml, lanes_over_n_vec_rows.yaml, group_lanes_vec.yaml).

Checked without a GPU: lowering and its refusals, the binding's extents, the slot rule the
simulation and the reference share, the runtime's choice of the vector build, nvcc on every
build, and the kernels run on the CPU (g++ and the CUDA shim) against SciPy and the
simulation's owner of every (atom, n), with scalar and with vector loads.
tests/gpu/test_dense_gpu.py runs the library's specs, these two included, on a GPU.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from teaal_loops.errors import SpecError, TeaalLoopsError
from teaal_loops.ir.dense import dense_slots
from teaal_loops.lowering import lower, simulate
from teaal_loops.runtime import dense_builds
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec, load_spec_string
from teaal_loops.types import MatrixShape
from tests.codegen import host_emulation as emu
from tests.codegen import test_nvcc as nvcc
from tests.codegen import test_spmm_emulation as spmm_emu
from tests.codegen.test_dense_blocked import _source

REPO = Path(__file__).resolve().parents[2]
SPLIT_VEC = REPO / "specs/spmm/nonzero_split_vec.yaml"
LANES_VEC = REPO / "specs/spmm/lanes_over_n_vec.yaml"
GROUP_VEC = REPO / "specs/spmm/group_lanes_vec.yaml"
ROWS_VEC = REPO / "specs/spmm/lanes_over_n_vec_rows.yaml"
SPMM = "einsum:\n  declaration: {A: [M, K], B: [K, N], Z: [M, N]}\n" \
    "  expressions: ['Z[m, n] = A[m, k] * B[k, n]']\n"


def _spmm(space: str, time: str) -> str:
    return SPMM + (
        "mapping:\n  partitioning:\n    Z:\n      N: [uniform_shape(4)]\n"
        f"  loop-order:\n    Z: [M, N1, N0, K]\n  spacetime:\n    Z: {{space: [{space}], "
        f"time: [{time}]}}\n"
    )


def test_n1_in_space_and_n0_in_time_lower_to_a_contiguous_dense_rank() -> None:
    for spec in (SPLIT_VEC, LANES_VEC):
        dense = lower(load_spec(spec)).form.dense
        assert dense is not None and dense.contiguous
        assert (dense.space, dense.time, dense.split) == ("N1", "N0", "N_VEC")
    strided = lower(load_spec(REPO / "specs/spmm/lanes_over_n_tiled.yaml")).form.dense
    assert strided is not None and not strided.contiguous and strided.space == "N0"


def test_both_digits_in_space_are_refused_in_one_located_line() -> None:
    with pytest.raises(SpecError) as err:
        lower(load_spec_string(_spmm("M, N1, N0", "K"), source="both.yaml"))
    line = err.value.cli_line()
    assert "rank N1 is in space with N0 in space too" in line
    assert line.startswith("both.yaml") and len(line.splitlines()) == 1


@pytest.mark.parametrize(("size", "vec", "space", "time"), [
    (32, 4, 8, 4), (30, 4, 8, 4), (3, 4, 1, 3), (128, 8, 16, 8), (1, 2, 1, 1),
])
def test_binding_gives_each_thread_s_neighbouring_columns(
    size: int, vec: int, space: int, time: int
) -> None:
    schedule = lower(load_spec(SPLIT_VEC), params={"N_VEC": vec})
    bound = bind(schedule, MatrixShape(rows=50, cols=40, nnz=300), None, {}, dense_size=size)
    assert (bound.dense_space, bound.dense_time) == (space, time)
    assert bound.params["N_VEC"] == vec
    # every n < size has one slot and one step, and the slots run 0 .. DS - 1
    n = np.arange(size)
    slots = dense_slots(n, bound.dense_space, bound.dense_time, True)
    assert slots.max() == space - 1 and (n - slots * time).max() < time


def test_the_simulation_gives_thread_slot_n_div_s() -> None:
    schedule = lower(load_spec(LANES_VEC))
    A = spmm_emu._matrix()
    bound = bind(schedule, MatrixShape(rows=A.shape[0], cols=A.shape[1], nnz=A.nnz), None, {},
                 dense_size=10)
    B = np.ones((A.shape[1], 10))
    owner = simulate(bound, A, B).owner
    # thread-mapped: row m's worker is m, its slot for n is n // 4 of DS = 3
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    expected = rows[:, None] * 3 + np.arange(10)[None, :] // 4
    np.testing.assert_array_equal(owner, expected)


def test_a_worker_of_rows_owns_its_run_of_rows() -> None:
    """lanes_over_n_vec_rows: row m is worker m // ROWS's, its slot for n is n // N_VEC."""
    schedule = lower(load_spec(ROWS_VEC), params={"ROWS": 3})
    A = spmm_emu._matrix()
    bound = bind(schedule, MatrixShape(rows=A.shape[0], cols=A.shape[1], nnz=A.nnz), None, {},
                 dense_size=10)
    assert (bound.dense_space, bound.dense_time) == (3, 4)
    owner = simulate(bound, A, np.ones((A.shape[1], 10))).owner
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    expected = rows[:, None] // 3 * 3 + np.arange(10)[None, :] // 4
    np.testing.assert_array_equal(owner, expected)


def test_rendered_kernels_index_and_load_contiguously() -> None:
    src = _source(SPLIT_VEC)
    assert "teaal_dense_slot * dense_time + ((long long)teaal_step0 + j)" in src
    assert "#define TEAAL_DENSE_VECTOR 0" in src and "teaal_load_columns(teaal_x" in src
    strided = _source(REPO / "specs/spmm/nonzero_split.yaml")
    assert "TEAAL_DENSE_VECTOR" not in strided
    assert "((long long)teaal_step0 + j) * dense_space + teaal_dense_slot" in strided


def _operand(itemsize: int, shape: tuple[int, int], row_bytes: int, ptr: int,
             col_bytes: int | None = None) -> Any:
    return SimpleNamespace(dtype=np.dtype(f"f{itemsize}"), shape=shape,
                           strides=(row_bytes, itemsize if col_bytes is None else col_bytes),
                           data=SimpleNamespace(ptr=ptr))


def test_vector_stores_need_a_vector_build_and_aligned_row_major_output_rows() -> None:
    """dense_builds.vector_store: Z row-major, rows 16-byte aligned, and a vector build; the option
    is emitted only with the vector build's options and only into SpMM sources."""
    aligned = _operand(4, (9, 32), 128, 4096)
    assert dense_builds.vector_store(4, aligned)
    assert not dense_builds.vector_store(0, aligned)  # no vector build (B misaligned)
    assert not dense_builds.vector_store(4, _operand(4, (9, 32), 4, 4096, 36))  # column-major
    assert not dense_builds.vector_store(4, _operand(4, (9, 32), 132, 4096))  # rows 33 apart
    assert not dense_builds.vector_store(4, _operand(4, (9, 32), 128, 4100))  # base misaligned
    # a thread walking whole rows (thread-mapped) stores by vectors only where rows are short
    limit = dense_builds.THREAD_STORE_MAX_ROW
    assert dense_builds.vector_store(4, aligned, walks_rows=True, longest_row=limit)
    assert not dense_builds.vector_store(4, aligned, walks_rows=True, longest_row=limit + 1)
    assert not dense_builds.vector_store(4, aligned, walks_rows=True)  # longest row unknown
    assert dense_builds.vector_store(4, aligned, walks_rows=False, longest_row=10 * limit)
    source = _source(SPLIT_VEC)
    assert dense_builds.dense_options(source, 8, 4, vector=4, store=True) == \
        VECTOR4 + STORE
    assert dense_builds.dense_options(source, 8, 4, vector=0, store=True) == ()
    sddmm = _source(REPO / "specs/sddmm/thread_per_nonzero.yaml")
    assert "TEAAL_DENSE_VECTOR_STORE" not in sddmm
    assert dense_builds.dense_options(sddmm, 1, 32, vector=1, store=True) == \
        ("-DTEAAL_DENSE_VECTOR=1",)


@pytest.mark.parametrize(("contiguous", "time", "size", "operand", "steps"), [
    (True, 4, 32, _operand(4, (9, 32), 128, 4096), 4),  # float4
    (True, 8, 32, _operand(4, (9, 32), 128, 4096), 8),  # two float4
    (True, 2, 8, _operand(8, (9, 8), 64, 4096), 2),  # double2
    (True, 4, 32, _operand(8, (9, 32), 256, 4096), 4),  # two double2
    (False, 4, 32, _operand(4, (9, 32), 128, 4096), 0),  # strided placement
    (True, 4, 30, _operand(4, (9, 30), 120, 4096), 0),  # N not a multiple: a run passes the end
    (True, 4, 36, _operand(4, (9, 36), 144, 4100), 0),  # misaligned start
    (True, 4, 36, _operand(4, (9, 36), 148, 4096), 0),  # misaligned rows (a padded view)
    (True, 4, 32, _operand(4, (32, 9), 4, 4096, 36), 0),  # column-major
    (True, 2, 32, _operand(4, (9, 32), 128, 4096), 0),  # 8 bytes: no vector
    (True, 1, 32, _operand(4, (9, 32), 128, 4096), 0),
])
def test_the_vector_build_needs_aligned_row_major_runs_of_16_or_32_bytes(
    contiguous: bool, time: int, size: int, operand: Any, steps: int
) -> None:
    assert dense_builds.vector_steps(contiguous, time, size, operand) == steps
    source = _source(SPLIT_VEC)
    options = dense_builds.dense_options(source, 8, time, chunk=32, vector=steps)
    if steps:  # one block of vector loads, workers sharing a warp: 4 atoms ahead too
        assert options == AHEAD4 + ("-DTEAAL_DENSE_VECTOR=1", f"-DTEAAL_DENSE_BLOCK={steps}")
    else:
        assert not any("VECTOR" in o for o in options)


VECTOR4 = ("-DTEAAL_DENSE_VECTOR=1", "-DTEAAL_DENSE_BLOCK=4")
VECTOR2 = ("-DTEAAL_DENSE_VECTOR=1", "-DTEAAL_DENSE_BLOCK=2")
STORE = ("-DTEAAL_DENSE_VECTOR_STORE=1",)  # dense_builds.dense_options(store=True): Z aligned too
AHEAD4 = ("-DTEAAL_ATOMS_AHEAD=4",)  # dense_builds.VECTOR_AHEAD_OPTION: vector launches
UNROLL16 = ("-DTEAAL_UNROLL=16",)  # dense_builds.DEEP_UNROLL_OPTION: group-mapped, small groups
# (case, spec, layout, params, N, build options): float64 kernels (x_data is float64): runs
# of 4 read with two double2 loads, of 2 with one; N not a multiple of N_VEC and runs longer
# than N with scalar loads; ELL (padded atoms) through the layout's accumulate.
RUNS: list[tuple[str, Path, str | None, dict[str, int], int, tuple[str, ...]]] = [
    ("split_n32_vec4", SPLIT_VEC, None, {"NNZ_PER_WORKER": 5}, 32, VECTOR4),
    # the walk 4 atoms ahead over longer chunks: groups no row end splits (added with no
    # test per atom) beside split ones; the last group passes the chunk's end
    ("split_n32_vec4_ahead4_w19", SPLIT_VEC, None, {"NNZ_PER_WORKER": 19}, 32,
     VECTOR4 + AHEAD4),
    ("split_n64_vec4_ahead4_w21", SPLIT_VEC, None, {"NNZ_PER_WORKER": 21}, 64,
     VECTOR4 + AHEAD4),
    ("split_n16_vec2_ahead4_w13", SPLIT_VEC, None, {"NNZ_PER_WORKER": 13, "N_VEC": 2}, 16,
     VECTOR2 + AHEAD4),
    ("split_n8_vec2", SPLIT_VEC, None, {"NNZ_PER_WORKER": 7, "N_VEC": 2}, 8, VECTOR2),
    # the walk 4 atoms ahead, loads not shared: chunks of 10 end in a partial group, rows
    # end inside groups (runs of 4 float32 at N = 32, two threads a worker at N = 8)
    ("split_n32_vec4_ahead4", SPLIT_VEC, None, {"NNZ_PER_WORKER": 10}, 32, VECTOR4 + AHEAD4),
    ("split_n8_vec4_ahead4_store", SPLIT_VEC, None, {"NNZ_PER_WORKER": 10}, 8,
     VECTOR4 + AHEAD4 + STORE),
    ("split_n16_vec2_ahead4", SPLIT_VEC, None, {"NNZ_PER_WORKER": 6, "N_VEC": 2}, 16,
     VECTOR2 + AHEAD4),
    ("split_n128_vec4_ahead4", SPLIT_VEC, None, {"NNZ_PER_WORKER": 10}, 128, VECTOR4 + AHEAD4),
    ("split_n30_scalar", SPLIT_VEC, None, {"NNZ_PER_WORKER": 5}, 30, ()),
    ("split_n3_scalar", SPLIT_VEC, None, {"NNZ_PER_WORKER": 3}, 3, ()),
    ("split_coo_vec4", SPLIT_VEC, "coo", {"NNZ_PER_WORKER": 6}, 16, VECTOR4),
    ("split_ell_scalar", SPLIT_VEC, "ell", {"NNZ_PER_WORKER": 4}, 12, ()),
    ("lanes_n32_vec4", LANES_VEC, None, {}, 32, VECTOR4),
    ("lanes_n10_scalar", LANES_VEC, None, {}, 10, ()),
    ("lanes_ell_scalar", LANES_VEC, "ell", {}, 8, ()),
    # a worker walks ROWS consecutive rows (96 rows: the last run of 5 and of 7 is partial)
    ("rows_n32_vec4", ROWS_VEC, None, {}, 32, VECTOR4),
    ("rows5_n32_vec4_store", ROWS_VEC, None, {"ROWS": 5}, 32, VECTOR4 + STORE),
    ("rows7_n10_scalar", ROWS_VEC, None, {"ROWS": 7}, 10, ()),
    ("rows2_n16_vec2", ROWS_VEC, None, {"ROWS": 2, "N_VEC": 2}, 16, VECTOR2),
    # a row's ROW_LANES lanes reduce by shuffles; rows shorter than the lanes leave some idle
    ("group_n32_vec4", GROUP_VEC, None, {}, 32, VECTOR4),
    ("group_n16_vec2_lanes8", GROUP_VEC, None, {"ROW_LANES": 8, "N_VEC": 2}, 16, VECTOR2),
    ("group_n10_scalar_lanes2", GROUP_VEC, None, {"ROW_LANES": 2}, 10, ()),
    # one lane a row: no reduction, the lane stores its row itself
    ("group_n32_vec4_lanes1", GROUP_VEC, None, {"ROW_LANES": 1}, 32, VECTOR4),
    ("group_n8_vec4_lanes1_store", GROUP_VEC, None, {"ROW_LANES": 1}, 8, VECTOR4 + STORE),
    # 16 loads a lane in flight: rows of 0 to 54 atoms (16 empty) end in 12 to 14 of a step's
    # 16 positions (one lane: full steps and a partial one; two lanes: the partial step past
    # the row's end)
    ("group_n32_vec4_lanes1_unroll16", GROUP_VEC, None, {"ROW_LANES": 1}, 32,
     VECTOR4 + UNROLL16),
    ("group_n16_vec2_lanes2_unroll16_store", GROUP_VEC, None, {"ROW_LANES": 2, "N_VEC": 2}, 16,
     VECTOR2 + UNROLL16 + STORE),
    ("group_n10_scalar_lanes1_unroll16", GROUP_VEC, None, {"ROW_LANES": 1}, 10, UNROLL16),
    # outputs by 16-byte stores: a row's TB outputs, stored whole (chunks of 5 cross rows, so
    # work-oriented also adds split rows atomically beside the stores)
    ("lanes_n32_vec4_store", LANES_VEC, None, {}, 32, VECTOR4 + STORE),
    ("group_n16_vec2_store", GROUP_VEC, None, {"ROW_LANES": 8, "N_VEC": 2}, 16, VECTOR2 + STORE),
    ("split_n32_vec4_store", SPLIT_VEC, None, {"NNZ_PER_WORKER": 5}, 32, VECTOR4 + STORE),
    ("split_n32_vec4_ahead4_w19_store", SPLIT_VEC, None, {"NNZ_PER_WORKER": 19}, 32,
     VECTOR4 + AHEAD4 + STORE),
    ("split_coo_vec4_store", SPLIT_VEC, "coo", {"NNZ_PER_WORKER": 6}, 16, VECTOR4 + STORE),
]


@pytest.mark.skipif(emu.CXX is None, reason="no C++ compiler (g++/clang++) found")
@pytest.mark.parametrize("case", [r[0] for r in RUNS])
def test_contiguous_kernels_on_the_cpu(case: str) -> None:
    """Values against SciPy and the owner of every (atom, n) against the simulation."""
    from teaal_loops.matrix import synthetic

    _, spec, layout, params, width, options = next(r for r in RUNS if r[0] == case)
    A = synthetic("rmat", rows=96, nnz=700, seed=5)
    schedule = spmm_emu._schedule((spec, layout) if layout else spec, params)
    bound = spmm_emu._run_and_compare(schedule, A, width, options)
    assert bound.dense_time == min(params.get("N_VEC", 4), width)


@pytest.mark.skipif(nvcc.NVCC is None, reason="nvcc not found (CUDA toolkit not installed)")
def test_contiguous_kernels_compile_in_every_build(tmp_path: Path) -> None:
    jobs: list[tuple[Path, str, tuple[str, ...]]] = []
    for spec in (SPLIT_VEC, LANES_VEC, GROUP_VEC, ROWS_VEC):
        for dtype in ("f32", "f64"):
            for layout in (None, "coo", "ell"):
                if layout == "coo" and spec != SPLIT_VEC:
                    continue
                try:
                    source = _source(spec, dtype, layout=layout)
                except TeaalLoopsError:
                    continue
                name = f"{spec.stem}.{layout or 'csr'}.{dtype}"
                for tag, defines in (("plain", ()), ("trace", ("-DTEAAL_TRACE=1",)),
                                     ("v4", VECTOR4), ("v2", VECTOR2),
                                     ("v8", ("-DTEAAL_DENSE_VECTOR=1",
                                             "-DTEAAL_DENSE_BLOCK=8", "-DTEAAL_TRACE=1")),
                                     ("v4a4", VECTOR4 + AHEAD4),
                                     ("v4u16", VECTOR4 + UNROLL16),
                                     ("v2u16t", VECTOR2 + UNROLL16 + STORE + ("-DTEAAL_TRACE=1",)),
                                     ("v2a4t", VECTOR2 + AHEAD4 + STORE + ("-DTEAAL_TRACE=1",)),
                                     ("v4st", VECTOR4 + STORE),
                                     ("v4a4t", VECTOR4 + AHEAD4 + ("-DTEAAL_TRACE=1",))):
                    if "ATOMS" in str(defines) and "TEAAL_ATOMS_AHEAD" not in source:
                        continue  # a walk with no loads ahead (thread-mapped, ELL)
                    if "UNROLL" in str(defines) and "TEAAL_UNROLL" not in source:
                        continue  # no group-mapped loop of loads a lane
                    path = tmp_path / f"{name}.{tag}.cu"
                    path.write_text(source)
                    jobs.append((path, "sm_90", defines))
    assert len(jobs) >= 40
    nvcc._compile_all(jobs)
