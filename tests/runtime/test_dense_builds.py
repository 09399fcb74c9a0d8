"""Dense launches get the builds their geometry calls for (dense_builds.dense_options): blocks of one
step for register-blocked SpMM kernels whose threads take one dense step
(dense_builds.SINGLE_STEP_OPTION), atoms loaded ahead for work-oriented SpMM whose workers share a
warp and take one step (dense_builds.ATOMS_AHEAD_OPTION), 4 atoms ahead in vector launches of at
most a warp a worker (dense_builds.VECTOR_AHEAD_OPTION). Without a GPU, a stand-in
CuPy (conftest.RecordingCupy) records the compile options, so the tests see which build each launch
asks for."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from teaal_loops import pipeline
from teaal_loops.runtime import backend, dense_builds
from tests.runtime.conftest import RecordingCupy

SPECS = Path(__file__).resolve().parents[2] / "specs"


def _prepared(kernel: Any, chunk: int = 32, mean: int = 4, rows: int = 100, group: int = 1,
              longest: int = 0) -> Any:
    """The fields Kernel.function reads, for the kernel's nominal configuration (``chunk``:
    the bound atoms per worker of work-oriented; ``group``: lanes a row of group-mapped; a
    matrix of ``rows`` rows of ``mean`` atoms, the longest ``longest``)."""
    return types.SimpleNamespace(
        source=kernel.source, options=(), config=kernel._nominal, _functions={},
        bound=types.SimpleNamespace(
            work_per_thread=chunk, group_size=group,
            matrix=types.SimpleNamespace(rows=rows, nnz=rows * mean,
                                         max_row=longest or mean)))


@pytest.mark.parametrize("spec", ["spmm/lanes_over_n.yaml", "spmm/group_lanes_over_k.yaml"])
def test_a_blocked_kernel_builds_single_step_launches_apart(fake: RecordingCupy, spec: str) -> None:
    kernel = pipeline.compile(SPECS / spec)
    prepared = _prepared(kernel)
    assert dense_builds.dense_options(prepared.source, 32, 1) == (dense_builds.SINGLE_STEP_OPTION,)
    blocked = kernel.function(prepared, dense=(32, 2, 0, False))
    single = kernel.function(prepared, dense=(32, 1, 0, False))
    assert dense_builds.SINGLE_STEP_OPTION not in blocked.options
    assert dense_builds.SINGLE_STEP_OPTION in single.options
    assert dense_builds.ATOMS_AHEAD_OPTION not in kernel.function(prepared, dense=(8, 1, 0, False)).options
    assert kernel.function(prepared, dense=(32, 1, 0, False)) is single  # built once
    traced = kernel.function(prepared, trace=True, dense=(32, 1, 0, False))
    assert {backend.TRACE_OPTION, dense_builds.SINGLE_STEP_OPTION} <= set(traced.options)
    assert len(fake.compiled) == 3


@pytest.mark.parametrize(("layout", "ahead"), [(None, True), ("coo", True), ("ell", False),
                                               ("bcsr:2x2", False)])
def test_work_oriented_spmm_loads_ahead_where_workers_share_a_warp(
    fake: RecordingCupy, layout: str | None, ahead: bool
) -> None:
    """Only for layouts whose atoms are nonzeros (the others' sources have no such walk), and
    only for one dense step of fewer than 32 threads a worker."""
    kernel = pipeline.compile(SPECS / "spmm/nonzero_split.yaml", layout=layout)
    prepared = _prepared(kernel)
    shared = kernel.function(prepared, dense=(8, 1, 0, False)).options
    assert (dense_builds.ATOMS_AHEAD_OPTION in shared) == ahead
    assert dense_builds.SINGLE_STEP_OPTION in shared  # work-oriented SpMM is register-blocked too
    for space, time in ((32, 1), (8, 2), (31, 4)):
        options = kernel.function(prepared, dense=(space, time, 0, False)).options
        assert dense_builds.ATOMS_AHEAD_OPTION not in options
    # a chunk of one group has nothing to load ahead of
    one_group = kernel.function(_prepared(kernel, dense_builds.ATOMS_AHEAD), dense=(8, 1, 0, False)).options
    assert dense_builds.ATOMS_AHEAD_OPTION not in one_group
    assert dense_builds.SINGLE_STEP_OPTION in one_group


@pytest.mark.parametrize(
    ("space", "time", "vector", "chunk", "mean", "four_ahead"), [
        (8, 4, 4, 32, 4, True),  # N = 32, runs of 4 float32: 8 threads a worker, short rows
        (8, 4, 4, 32, 17, True),  # ... rows longer than half a chunk
        (16, 4, 4, 32, 16, True),  # N = 64
        (8, 2, 2, 32, 4, True),  # runs of 2 float64
        (32, 4, 4, 32, 4, True),  # one worker a warp, rows of an eighth of a chunk
        (32, 4, 4, 24, 16, True),  # ... rows over half a chunk
        (64, 4, 4, 32, 4, False),  # a worker of two warps: not measured
        (4, 4, 4, 32, 4, True),  # fewer threads than a group's atoms
        (8, 4, 0, 32, 4, False),  # no vector build (misaligned B)
        (8, 4, 4, 8, 4, True),  # a chunk of two groups of 4
        (8, 4, 4, 4, 1, False),  # a chunk of one group of 4
        (8, 8, 4, 32, 4, False),  # two blocks of vector loads
    ])
def test_vector_spmm_loads_4_atoms_ahead(
    fake: RecordingCupy, space: int, time: int, vector: int, chunk: int, mean: int,
    four_ahead: bool,
) -> None:
    """4 atoms ahead in vector launches of one block of steps, at most a warp a worker and
    chunks of more than one group, whatever the rows' lengths; the plain vector build
    elsewhere."""
    kernel = pipeline.compile(SPECS / "spmm/nonzero_split_vec.yaml")
    prepared = _prepared(kernel, chunk, mean)
    options = kernel.function(prepared, dense=(space, time, vector, False)).options
    assert (dense_builds.VECTOR_AHEAD_OPTION in options) == four_ahead
    assert sum(o.startswith("-DTEAAL_ATOMS_AHEAD=") for o in options) == int(four_ahead)
    if four_ahead:
        assert f"-DTEAAL_DENSE_BLOCK={vector}" in options
    # SDDMM's and the thread-mapped sources have no such walk
    lanes = pipeline.compile(SPECS / "spmm/lanes_over_n_vec.yaml")
    assert dense_builds.dense_options(_prepared(lanes).source, space, time, chunk=chunk,
                                      vector=vector) == \
        dense_builds.dense_options(_prepared(lanes).source, space, time, vector=vector)


@pytest.mark.parametrize("spec", ["thread_mapped.yaml", "sddmm/lanes_over_k.yaml"])
def test_other_kernels_have_one_build(fake: RecordingCupy, spec: str) -> None:
    kernel = pipeline.compile(SPECS / spec)
    prepared = _prepared(kernel)
    assert dense_builds.dense_options(prepared.source, 8, 1) == ()
    assert kernel.function(prepared, dense=(8, 1, 0, False)) is kernel.function(prepared)
    assert fake.compiled == [backend.COMPILE_OPTIONS]


def test_dense_launches_pass_their_geometry_to_the_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernel = pipeline.compile(SPECS / "spmm/lanes_over_n_tiled.yaml")
    asked: list[Any] = []
    monkeypatch.setattr(kernel, "function", lambda p, trace=False, dense=None,
                        threads=0: asked.append(dense))
    monkeypatch.setattr("teaal_loops.runtime.kernel.trailing_arguments", lambda *a: ())
    prepared = types.SimpleNamespace(
        bound=types.SimpleNamespace(index_bits=32, matrix=types.SimpleNamespace(max_row=4)),
        no_owner=None, leading_args=())
    call = types.SimpleNamespace(size=64, arrays=(None,))
    for time in (1, 2, 5):
        kernel._dense_function(prepared, call, None, None, 32, time)
    # a strided placement never asks for vector loads (whatever B is)
    assert asked == [(32, 1, 0, False), (32, 2, 0, False), (32, 5, 0, False)]


def test_a_vector_launch_asks_for_vector_stores_where_z_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernel = pipeline.compile(SPECS / "spmm/nonzero_split_vec.yaml")
    asked: list[Any] = []
    monkeypatch.setattr(kernel, "function", lambda p, trace=False, dense=None,
                        threads=0: asked.append(dense))
    monkeypatch.setattr("teaal_loops.runtime.kernel.trailing_arguments", lambda *a: ())
    prepared = types.SimpleNamespace(
        bound=types.SimpleNamespace(index_bits=32, matrix=types.SimpleNamespace(max_row=500)),
        no_owner=None, leading_args=())
    B = types.SimpleNamespace(dtype=np.dtype("f4"), strides=(128, 4), nbytes=4096,
                              data=types.SimpleNamespace(ptr=4096))
    Z = types.SimpleNamespace(dtype=np.dtype("f4"), strides=(128, 4),
                              data=types.SimpleNamespace(ptr=8192))  # rows 16-byte aligned
    kernel._dense_function(prepared, types.SimpleNamespace(size=32, arrays=(B,)), Z, None,
                           8, 4)
    kernel._dense_function(prepared, types.SimpleNamespace(size=32, arrays=(B,)), None, None,
                           8, 4)
    kernel._dense_function(prepared, types.SimpleNamespace(size=30, arrays=(B,)), Z, None,
                           8, 4)
    # the vector build stores by vectors where Z allows; a launch with no vector loads
    # stores element by element
    assert asked == [(8, 4, 4, True), (8, 4, 4, False), (8, 4, 0, False)]


H100 = types.SimpleNamespace(sm_count=132, max_threads_per_sm=2048, l2_bytes=50 << 20)
FULL = 132 * 2048  # threads resident on it at once


@pytest.mark.parametrize(("group", "mean", "longest", "threads", "deep"), [
    (1, 42, 95, FULL // 16, True),  # bcsstk13 N = 32, one lane a row: a small launch
    (2, 42, 95, FULL // 2, True),  # two lanes, half the device
    (2, 42, 95, FULL, True),  # a full launch of rows of 21 atoms a lane
    (2, 30, 62, int(0.6 * FULL), True),  # at the fill's limit
    (2, 30, 62, int(0.6 * FULL) + 128, False),  # past it, rows of 15 a lane
    (1, 4, 18, FULL // 8, True),  # short rows, but a lane's longest is 18 atoms
    (1, 4, 6, FULL // 8, False),  # every row shorter than 8 atoms
    (1, 6, 12, FULL, False),  # delaunay_n15 N = 32: a full launch of short rows
    (1, 68, 141, 4 * FULL, True),  # bcsstk33 N = 128: long rows, whatever the fill
    (1, 13, 562, 3 * FULL, True),  # cit-HepTh N = 128: a long tail, whatever the fill
    (2, 10, 1383, FULL, True),  # email-Enron N = 32: the tail is 691 atoms a lane
    (2, 10, 127, FULL, False),  # ... not 63: a full launch of short rows keeps 4
    (1, 10, 64, FULL, True),  # four steps of 16 in the longest row
    (1, 10, 63, FULL, False),
    (4, 42, 95, FULL // 8, False),  # four lanes a row: the partial step's loads cost more
    (8, 400, 800, FULL // 8, False),
    (2, 42, 95, 0, True),  # an unknown launch: long rows decide alone
    (2, 10, 95, 0, False),  # ... and nothing else does
    (0, 42, 95, FULL // 8, False),  # no group
])
def test_group_mapped_spmm_issues_16_loads_a_lane_in_small_launches_of_small_groups(
    monkeypatch: pytest.MonkeyPatch, group: int, mean: int, longest: int, threads: int,
    deep: bool,
) -> None:
    """dense_builds.deep_unroll: 16 loads a lane (TEAAL_UNROLL) for groups of one or two
    lanes where a lane's longest row is at least 8 atoms and the launch fills at most 0.6 of
    the device, or a lane's mean row is at least 16 atoms, or its longest row at least 64
    atoms, in float32; the source's 4 elsewhere."""
    monkeypatch.setattr(backend, "device_info", lambda: H100)
    assert dense_builds.deep_unroll(group, mean, longest, threads) == deep
    kernel = pipeline.compile(SPECS / "spmm/group_lanes_vec.yaml")
    options = dense_builds.dense_options(kernel.source, 8, 4, vector=4, mean_atoms=mean,
                                         group=group, longest=longest, threads=threads,
                                         value_bytes=4)
    assert (dense_builds.DEEP_UNROLL_OPTION in options) == deep
    # float64's loads take twice the registers: it lost there, so it keeps the source's 4
    assert dense_builds.DEEP_UNROLL_OPTION not in dense_builds.dense_options(
        kernel.source, 8, 4, vector=4, mean_atoms=mean, group=group, longest=longest,
        threads=threads, value_bytes=8)
    assert "-DTEAAL_DENSE_VECTOR=1" in options  # the other rules still apply
    # a source without the loop (work-oriented, thread-mapped) never gets the option
    for other in ("spmm/nonzero_split_vec.yaml", "spmm/lanes_over_n_vec.yaml"):
        source = pipeline.compile(SPECS / other).source
        assert dense_builds.DEEP_UNROLL_OPTION not in dense_builds.dense_options(
            source, 8, 4, vector=4, mean_atoms=mean, group=group, longest=longest,
            threads=threads, value_bytes=4)


def test_a_group_mapped_launch_passes_its_group_longest_row_and_size_to_the_build(
    fake: RecordingCupy, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(backend, "device_info", lambda: H100)
    kernel = pipeline.compile(SPECS / "spmm/group_lanes_vec.yaml", params={"ROW_LANES": 1})
    small = kernel.function(_prepared(kernel, mean=4, group=1, longest=18),
                            dense=(8, 4, 4, False), threads=FULL // 8).options
    full = kernel.function(_prepared(kernel, mean=4, group=1, longest=18),
                           dense=(8, 4, 4, False), threads=FULL).options
    assert dense_builds.DEEP_UNROLL_OPTION in small
    assert dense_builds.DEEP_UNROLL_OPTION not in full
    assert fake.compiled[-2:] == [small, full]  # two builds, each with its own options
    wide = pipeline.compile(SPECS / "spmm/group_lanes_vec.yaml", dtype="float64",
                            params={"ROW_LANES": 1})
    assert dense_builds.DEEP_UNROLL_OPTION not in wide.function(
        _prepared(wide, mean=4, group=1, longest=18), dense=(8, 2, 2, False),
        threads=FULL // 8).options


@pytest.mark.parametrize(("spec", "group", "bytes_"), [
    ("spmm/group_lanes_vec.yaml", 1, True),  # one lane a row: fewer registers, 0.95x geomean
    ("spmm/group_lanes_vec.yaml", 2, False),  # 2 to 16 lanes: the loads of B serialised
    ("spmm/group_lanes_vec.yaml", 4, False),
    ("spmm/group_lanes_vec.yaml", 16, False),
    ("spmm/group_lanes_over_k.yaml", 32, True),  # a warp a row: 0.98x geomean
    ("spmm/group_lanes_over_k.yaml", 64, True),
    ("spmm/group_lanes_over_k.yaml", 0, False),  # an unknown group
    ("spmm/lanes_over_n_vec.yaml", 1, False),  # thread-mapped lost with them (1.08x)
    ("spmm/nonzero_split_vec.yaml", 1, False),  # the walk ahead addresses B so already
])
def test_group_mapped_launches_of_one_lane_or_a_warp_a_row_read_b_by_byte_strides(
    spec: str, group: int, bytes_: bool,
) -> None:
    """dense_builds.BYTE_STRIDES_OPTION: group-mapped SpMM of one lane, or 32 and more, a row
    reads B through 32-bit byte strides; every other launch through 64-bit element strides."""
    source = pipeline.compile(SPECS / spec).source
    assert "TEAAL_BYTE_STRIDES" in source
    options = dense_builds.dense_options(source, 8, 4, vector=4, group=group)
    assert (dense_builds.BYTE_STRIDES_OPTION in options) == bytes_
    # the other rules still apply: the vector build wherever the source has it
    assert ("-DTEAAL_DENSE_VECTOR=1" in options) == ("TEAAL_DENSE_VECTOR" in source)
