"""The builds a dense launch (SpMM, SDDMM) asks for: which ``-D`` options its geometry and its
operands call for.

A template writes each walk once; some of its variants are chosen at compile time by macros
(blocks of one dense step, atoms loaded ahead, 16-byte loads and stores, loads in flight a
lane). None of them changes which thread owns which (atom, dense index) or the order of any
sum: they change how the same walk is issued. The rules here pick them per launch from what
the runtime knows (threads a worker along the dense rank, steps, the bound chunk, the
matrix's mean and longest tile, the launch's size, alignment); :func:`dense_options` is asked
at every dense launch, and its result cached. Each rule's comment gives the measurements it
rests on (BENCHMARKS.md has the runs).
"""

from __future__ import annotations

import functools
from typing import Any

from teaal_loops.runtime import backend

# A register-blocked SpMM kernel walks its atoms once per block of TEAAL_DENSE_BLOCK dense
# steps (4 in the source). A launch whose threads take one step never runs a full block, but
# the blocked path still sizes the kernel's registers (lanes_over_n: 64 against 32, half the
# occupancy, 0.6-0.75x the unblocked kernel's speed on the H100): such launches use a build
# with blocks of one.
DENSE_BLOCK_MACRO = "TEAAL_DENSE_BLOCK"
SINGLE_STEP_OPTION = f"-D{DENSE_BLOCK_MACRO}=1"
# Work-oriented SpMM over nonzero atoms can load TEAAL_ATOMS_AHEAD atoms ahead of its walk
# over rows (1 in the source: the plain walk). Where several workers share a warp (DS < 32),
# take one dense step and have chunks longer than one group of 8, loading 8 ahead ran up to
# 1.7x faster on the H100 (power-law graphs, whose rows end at different atoms, so the plain
# walk's unrolled loads stop early and diverge), 0.8-0.9x on banded and R-MAT matrices. With
# one worker a warp, or blocks of several steps, it was slower on most matrices; with chunks
# of 8 it was slower on every large matrix and 1-2 us faster on small ones (BENCHMARKS.md).
ATOMS_AHEAD_MACRO = "TEAAL_ATOMS_AHEAD"
ATOMS_AHEAD = 8
ATOMS_AHEAD_OPTION = f"-D{ATOMS_AHEAD_MACRO}={ATOMS_AHEAD}"
# Vector launches (one block of 16-byte runs) of at most a warp a worker load 4 atoms ahead:
# a worker's threads then have 4 gathers of B in flight whatever rows the atoms fall in, where
# the plain walk's unrolled loads stop at every row's end; a group of 4 that no row end splits
# is added with no test per atom (templates/schedules/work_oriented.cu.j2). On the H100
# (benchmarks/probes/pipeline_probe.py, BENCHMARKS.md; 26 corpus matrices and three 2^20-row
# classes at N = 8, 32 and 128, chunks of 12 to 64 atoms, best chunk each) it beat the two
# builds it replaced:
# - at N = 32 (8 threads a worker), the walk whose loads a worker's threads shared by shuffles
#   (built before where chunks spanned two rows and B sat in half the L2): faster or equal in
#   26 of 29 cases, 0.85 to 1.02x its time (email-Enron 22.7 -> 19.2 us, soc-Slashdot0902
#   38.7 -> 35.1, R-MAT 604.7 -> 526.3; the losses: rgg_n_2_15_s0 1.02x, cage8 and uniform
#   within 1%);
# - at N = 128 (one worker a warp), the plain walk (built before where a mean row was over
#   half a chunk): faster in 28 of 29, 0.83 to 1.04x its time (email-Enron 57.4 -> 47.7 us;
#   the loss: ca-AstroPh-cc1, 37.5 -> 39.1).
# Loading 8 ahead instead lost at N = 32 on the larger graphs (email-Enron 19.2 -> 21.9 us,
# R-MAT 526.3 -> 583.8) and won up to 5% on small matrices (rgg_n_2_15_s0, west0067).
# Earlier measurements, without the untested groups: 0.73 to 0.99x the plain walk's time at
# N = 32 in float32 (ego-Twitter 88.2 -> 69.1 us at 64 atoms), 0.45 to 1.01x at N = 8
# (email-Enron 18.7 -> 12.4 at 12, long rows 539.7 -> 465.7 at 32) and 0.69 to 1.06x at N = 32
# in float64 (it lost on R-MAT alone).
VECTOR_AHEAD = 4
VECTOR_AHEAD_OPTION = f"-D{ATOMS_AHEAD_MACRO}={VECTOR_AHEAD}"
WARP_THREADS = 32  # a worker of more threads (two warps and up) keeps the plain walk: not measured
# A contiguous dense placement (N1 in space, N0 in time: a thread's DT elements of a row of B
# are neighbours) reads them with 16-byte loads where :func:`vector_steps` allows: built with
# TEAAL_DENSE_VECTOR = 1 and blocks of DT steps (templates/common/dense.cuh.j2). SDDMM whose
# threads sum all of K reads both factors so where :func:`sampled_vector` allows.
DENSE_VECTOR_MACRO = "TEAAL_DENSE_VECTOR"
VECTOR_STORE_MACRO = "TEAAL_DENSE_VECTOR_STORE"  # SpMM: the outputs too (dense_options)
VECTOR_BYTES = (16, 32)  # one or two 16-byte loads a nonzero
# Group-mapped SpMM issues TEAAL_UNROLL loads a lane before it sums them (4 in the source): the
# lane's walk of a row is a chain of round trips to memory, one a step. Where the launch is small
# (kernels of 5 to 40 us), that chain is the time. On the H100 (float32, the corpus's FEM and
# small matrices at N = 8, 32 and 128) 16 loads a lane won 22 of 24 cases against 4, at 0.53 to
# 1.07x the time, where a group is one or two lanes and either a lane's longest row is 8 atoms or
# more and the launch fills at most 0.6 of the device's threads, or rows are long (16 atoms a
# lane or more on average, whatever the fill) (bcsstk13 N = 32, two lanes: 11.4 -> 7.7 us,
# against cuSPARSE's 7.2; bcsstk33 N = 128, one lane: 36.8 -> 27.9, against 37.0; the losses:
# 1138_bus N = 128, two lanes, up to 1.09x in a second run, where one lane is faster). Outputs
# are the same to the bit. Elsewhere 4 stayed ahead: with groups of 4 or 8 lanes the last,
# partial step's loads past the row's end cost more than the round trips saved (cage8 N = 128, 8
# lanes: 10.2 -> 23.5 us), and in full launches of short rows the registers cost occupancy
# (delaunay_n15 N = 32, one lane: 9.5 -> 10.2); in float64, whose loads take twice the registers,
# it lost on most of the same matrices (cage8 N = 8, one lane: 7.9 -> 9.8 us; bcsstk33 N = 128:
# 66.2 -> 71.5), so float32 alone is built so. 32 loads, and a partial step whose loads past the
# end are skipped by a branch instead of reloading the step's first atom, were slower still
# (BENCHMARKS.md).
# A row of 64 atoms a lane or more (four steps of 16) also takes 16 loads, whatever the fill: on
# the H100 (benchmarks/probes/lean_probe.py, PMODE=unroll: 4 against 16 loads, 26 corpus and
# 2^20-row matrices, one and two lanes, N = 8, 32 and 128, 138 launches) it changed 37
# launches, all on graphs with long rows, at 0.27 to 1.30x the time, geomean 0.43
# (email-Enron N = 32, one lane: 233.8 -> 63.9 us; cit-HepTh N = 128: 96.7 -> 38.6; rmat-s20
# N = 32, two lanes: 5,354 -> 2,283). The one loss: pubmed N = 128, two lanes (24.3 -> 31.6 us;
# its mean row is 4.5 atoms). Meshes of short rows keep 4 in full launches (rgg_n_2_15_s0
# N = 128, two lanes: 35.3 against 58.6 us).
UNROLL_MACRO = "TEAAL_UNROLL"
DEEP_UNROLL = 16
DEEP_UNROLL_OPTION = f"-D{UNROLL_MACRO}={DEEP_UNROLL}"
DEEP_UNROLL_MAX_GROUP = 2  # lanes a group
DEEP_UNROLL_MIN_LONGEST = 8  # atoms of the longest row a lane
DEEP_UNROLL_MAX_FILL = 0.6  # the launch's threads over the device's resident threads
DEEP_UNROLL_MIN_MEAN = 16  # atoms of a mean row a lane, at any fill
DEEP_UNROLL_MIN_TAIL = 64  # atoms of the longest row a lane, at any fill
DEEP_UNROLL_VALUE_BYTES = 4  # float32
# Group-mapped SpMM of one lane a row, or of a warp and more, is built with B's strides in 32-bit
# bytes (TEAAL_BYTE_STRIDES, templates/common/dense.cuh.j2): ptxas then fits it in fewer
# registers. On the H100 (benchmarks/probes/lean_probe.py, 12 small and mid-sized matrices and a
# 2^20-row class, N = 8, 32 and 128; BENCHMARKS.md) group_lanes_vec at ROW_LANES = 1 took 0.86 to
# 1.05x the time, geomean 0.951 (ca-AstroPh-cc1 N = 128 40.0 -> 35.2 us, bcsstk13 N = 128 10.3
# -> 9.8), and group_lanes_over_k (32 lanes) 0.82 to 1.00x, geomean 0.945 (luxembourg_osm). With
# 2 to 16 lanes the fewer registers serialised the loads of B: ROW_LANES = 4 took up to 1.56x the
# time, 16 up to 1.95x at N = 8; and thread-mapped kernels lost (lanes_over_n_vec geomean 1.08).
# A second run over the 26 corpus matrices and uniform-r20 (81 cases) gave geomeans of 0.946
# (ROW_LANES = 1), 0.978 (32 lanes), 1.025 / 1.143 / 1.063 / 1.001 (2 / 4 / 8 / 16 lanes).
# On power-law graphs ROW_LANES = 1 also lost (email-Enron 1.07x, R-MAT 1.08x at N = 8, longrows
# 1.26x at N = 128), where the suites never pick it (3 to 26 times slower than the walk ahead).
BYTE_STRIDES_OPTION = "-DTEAAL_BYTE_STRIDES=1"


def dense_options(source: str, space: int, time: int, chunk: int = 0,
                  vector: int = 0, mean_atoms: float = 0.0, store: bool = False, *,
                  group: int = 0, longest: int = 0, threads: int = 0,
                  value_bytes: int = 0) -> tuple[str, ...]:
    """The build options of a dense launch whose workers have ``space`` threads along the
    dense rank, take ``time`` steps and (work-oriented) walk chunks of ``chunk`` atoms:
    :data:`SINGLE_STEP_OPTION` for one step of a register-blocked kernel,
    :data:`ATOMS_AHEAD_OPTION` for one step of workers sharing a warp, with chunks of more
    than one group, where the kernel can load ahead; with ``vector`` (:func:`vector_steps`:
    the steps one vector load reads), blocks of that many steps read by vector loads (SDDMM,
    :func:`sampled_vector`: 1, its dot products read so), and, for a vector launch of one
    block of steps, at most a warp a worker and chunks of more than 4 atoms,
    :data:`VECTOR_AHEAD_OPTION`.
    ``store`` (SpMM, :func:`vector_store`): a vector launch whose outputs take 16-byte stores
    too. ``group`` (group-mapped: lanes a row), the matrix's ``mean_atoms`` a tile and its
    ``longest`` tile's atoms, the launch's ``threads`` and the bytes of a value:
    :func:`deep_unroll`; a group-mapped launch of one lane or a warp and more a row:
    :data:`BYTE_STRIDES_OPTION`. Asked at every dense launch, so remembered."""
    one_vector = vector > 1 and time == vector
    ahead = 0
    if time == 1 and space < WARP_THREADS and chunk > ATOMS_AHEAD:
        ahead = ATOMS_AHEAD
    elif one_vector and chunk > VECTOR_AHEAD and space <= WARP_THREADS:
        ahead = VECTOR_AHEAD
    unroll = value_bytes == DEEP_UNROLL_VALUE_BYTES and deep_unroll(group, mean_atoms, longest,
                                                                      threads)
    byte_strides = group == 1 or group >= WARP_THREADS
    return _dense_options(source, time == 1, ahead, vector, store, unroll, byte_strides)


def deep_unroll(group: int, mean_atoms: float, longest: int, threads: int) -> bool:
    """Whether a group-mapped SpMM launch of ``threads`` threads, groups of ``group`` lanes a
    row, on a matrix whose tiles hold ``mean_atoms`` atoms and at most ``longest``, issues
    :data:`DEEP_UNROLL` loads a lane (float32 only: :func:`dense_options` checks the value's
    bytes; the measurements are in the comment above :data:`UNROLL_MACRO`). False for an
    unknown group (0) and, unless rows are long, for an unknown launch (``threads`` 0)."""
    if not 0 < group <= DEEP_UNROLL_MAX_GROUP:
        return False
    if mean_atoms >= DEEP_UNROLL_MIN_MEAN * group or longest >= DEEP_UNROLL_MIN_TAIL * group:
        return True
    if threads <= 0 or longest < DEEP_UNROLL_MIN_LONGEST * group:
        return False
    info = backend.device_info()
    return threads <= DEEP_UNROLL_MAX_FILL * info.sm_count * info.max_threads_per_sm


@functools.lru_cache(maxsize=128)
def _dense_options(source: str, one_step: bool, ahead: int, vector: int,
                   store: bool = False, unroll: bool = False,
                   byte_strides: bool = False) -> tuple[str, ...]:
    # (a string caches its hash: a hit costs no scan of the source; ahead: atoms, 0 none)
    options: tuple[str, ...] = ()
    if one_step and DENSE_BLOCK_MACRO in source:
        options += (SINGLE_STEP_OPTION,)
    if ahead and ATOMS_AHEAD_MACRO in source:
        options += (f"-D{ATOMS_AHEAD_MACRO}={ahead}",)
    if vector and DENSE_VECTOR_MACRO in source:
        options += (f"-D{DENSE_VECTOR_MACRO}=1",)
        if vector > 1 and DENSE_BLOCK_MACRO in source:  # SpMM: blocks of the vector's steps
            options += (f"-D{DENSE_BLOCK_MACRO}={vector}",)
            if store and VECTOR_STORE_MACRO in source:
                options += (f"-D{VECTOR_STORE_MACRO}=1",)
    if UNROLL_MACRO in source:  # group-mapped sources alone have the loop
        if unroll:
            options += (DEEP_UNROLL_OPTION,)
        if byte_strides:
            options += (BYTE_STRIDES_OPTION,)
    return options


def sampled_vector(u: Any, v: Any, run: int = 1) -> int:
    """1 where SDDMM's factors U[M, K] and V[K, N] (CuPy arrays) both run along K with unit
    stride and every row of U and column of V starts 16-byte aligned, so that a thread's dot
    product (or, ``run`` > 1, its runs of ``run`` neighbouring k: K a multiple of ``run``, a
    run a multiple of 16 bytes) can read them with 16-byte loads; else 0."""
    if run > 1 and (int(u.shape[1]) % run or (run * int(u.dtype.itemsize)) % 16):
        return 0
    return int(_aligned_runs(u, along=1) and _aligned_runs(v, along=0))


def vector_steps(contiguous: bool, time: int, size: int, operand: Any) -> int:
    """The dense steps one thread reads with vector loads from ``operand`` (B, a CuPy
    array), or 0: a contiguous placement whose ``time`` elements are 16 or 32 bytes of a
    row-major row, every row starting 16-byte aligned, and a rank of ``size`` a multiple of
    ``time`` (no thread's run passes the row's end)."""
    if not contiguous or time < 2 or size % time:
        return 0
    if time * int(operand.dtype.itemsize) not in VECTOR_BYTES:
        return 0
    return time if _aligned_runs(operand, along=1) else 0


# A thread-mapped launch writes by vectors only where no row is longer than this. On an H100
# its vector-store build was slower on 68 of the SpMM suite's 90 cases (up to 1.57x; at every
# N where the longest row passed 64) and faster on 12 (0.67x to 0.93x), all with rows of at
# most 30 (BENCHMARKS.md). The other schedules gained on most cases.
THREAD_STORE_MAX_ROW = 24


def vector_store(vector: int, output: Any, *, walks_rows: bool = False,
                 longest_row: int = 0) -> bool:
    """Whether a vector launch (``vector`` steps a thread, :func:`vector_steps`) writes its
    outputs with 16-byte stores too: the output (SpMM's Z, a CuPy array) row-major with every
    row 16-byte aligned, so that a thread's ``vector`` neighbouring outputs of a row are 16 or
    32 aligned bytes (the rank is a multiple of ``vector``, as the loads required); and, where
    one thread ``walks_rows`` whole (thread-mapped), a ``longest_row`` known and at most
    :data:`THREAD_STORE_MAX_ROW`."""
    if vector < 2 or not _aligned_runs(output, along=1):
        return False
    return not walks_rows or 0 < longest_row <= THREAD_STORE_MAX_ROW


def _aligned_runs(array: Any, along: int) -> bool:
    """Whether a 2-D ``array`` has unit stride ``along`` that axis and each of its runs along
    it (rows for 1, columns for 0) starts 16-byte aligned: 16-byte loads may read them."""
    strides: tuple[int, ...] = tuple(getattr(array, "strides", ()))
    if len(strides) != 2 or strides[along] != int(array.dtype.itemsize):
        return False
    return not (strides[1 - along] % 16 or int(array.data.ptr) % 16)
