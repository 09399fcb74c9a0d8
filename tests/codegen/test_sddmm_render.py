"""SDDMM kernels (templates/schedules/sddmm/): rendering, nvcc, and the owner of every atom.

``Z[m, n] = C[m, n] * sum_k A[m, k] * B[k, n]`` with C sparse: each schedule gives every
nonzero of C (an atom) to the thread that owns it in SpMV, which computes the atom's whole dot
product over K and writes its one output value. Checked here, on the CPU:

* every schedule's SDDMM kernel renders, deterministically, with the signature
  ``KernelConfig.kernel_params`` gives, for f32 and f64 and each layout serving SDDMM, and
  compiles with nvcc (plain and trace builds) where nvcc exists;
* a NumPy emulation of each template's walk (which thread visits which atom, in which row)
  agrees with ``lowering.simulate``'s owners and with the atoms' rows;
* the generated source itself, run under g++ with tests/codegen/cuda_emulation.h, writes every
  atom's value and records the simulation's owner for every (atom, k) pair.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.codegen import make_config, render, template_dir
from teaal_loops.codegen.config import SAMPLED_PARAMS, KernelConfig
from teaal_loops.codegen.render import clear_caches
from teaal_loops.ir.model import BoundSchedule, RowTiling, Schedule
from teaal_loops.layouts import get_layout, tile_view
from teaal_loops.lowering import lower, simulate
from teaal_loops.runtime.device_matrix import host_arguments
from teaal_loops.schedules import bind, definitions, schedule_definition
from teaal_loops.spec import load_spec, load_spec_string
from tests.codegen import host_emulation as emu
from tests.conftest import require_corpus
from tests.layouts import emulation as layout_emulation

NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
)

HEAD = """\
einsum:
  declaration:
    C: [M, N]
    A: [M, K]
    B: [K, N]
    Z: [M, N]
  expressions:
    - Z[m, n] = C[m, n] * A[m, k] * B[k, n]
mapping:
  partitioning:
    Z:
"""
# One mapping per schedule, in the loops style (the atom rank of SDDMM is C's column rank N):
# partitioning, loop order, space, time.
MAPPINGS = {
    "thread_mapped": (["M: [uniform_shape(T)]"], "M1, M0, N, K", "M0", "M1, N, K"),
    "group_mapped": (
        ["M: [uniform_shape(T)]", "N: [uniform_occupancy(C.G)]"],
        "M1, M0, N1, N0, K", "M0, N0", "M1, N1, K",
    ),
    "work_oriented": (
        ["(M, N): [flatten()]", "MN: [uniform_occupancy(C.W)]"], "MN1, MN0, K", "MN1", "MN0, K"
    ),
    "merge_path": (
        ["(M, N): [flatten()]", "MN: [x_merge_path(C.I)]"], "MN1, MN0, K", "MN1", "MN0, K"
    ),
}
KINDS = tuple(MAPPINGS)
TEAAL_SPEC = ("teaal-specs", "teaal-compiler", "sddmm.yaml")  # T1 = A * B; Z = C * T1


def sddmm_spec_text(kind: str) -> str:
    partitioning, order, space, time = MAPPINGS[kind]
    return HEAD + "".join(f"      {line}\n" for line in partitioning) + (
        f"  loop-order:\n    Z: [{order}]\n"
        f"  spacetime:\n    Z:\n      space: [{space}]\n      time: [{time}]\n"
    )


def sddmm_schedule(kind: str, params: dict[str, int] | None = None) -> Schedule:
    text = sddmm_spec_text(kind)
    return lower(load_spec_string(text, source=f"sddmm_{kind}.yaml"), params=params or {})


def teaal_schedule() -> Schedule:
    """TeAAL's own two-einsum SDDMM (no spacetime: one thread runs every row)."""
    return lower(load_spec(require_corpus(*TEAAL_SPEC)))


# Every (schedule, layout) that lowering and make_config accept for SDDMM.
RENDER_CASES = [
    (kind, name) for kind in KINDS for name in ("csr", "coo")
    if "sddmm" in get_layout(name).forms and kind in get_layout(name).schedules
]
CASE_IDS = [f"{kind}-{layout}" for kind, layout in RENDER_CASES]


def test_the_layouts_serving_sddmm_cover_every_schedule() -> None:
    assert RENDER_CASES == [
        ("thread_mapped", "csr"), ("thread_mapped", "coo"), ("group_mapped", "csr"),
        ("work_oriented", "csr"), ("work_oriented", "coo"), ("merge_path", "csr"),
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_each_mapping_lowers_to_its_schedule_in_the_sddmm_form(kind: str) -> None:
    schedule = sddmm_schedule(kind)
    assert schedule.kind == kind
    assert (schedule.matrix, schedule.tile_rank, schedule.atom_rank) == ("C", "M", "N")
    form = schedule.form
    assert form.kind == "sddmm" and form.operands == ("A", "B")
    assert form.dense is not None and form.dense.name == "K" and form.dense.reduce
    cfg = make_config(schedule)
    assert cfg.template == f"schedules/sddmm/{kind}.cu.j2"
    assert cfg.kernel_name == f"teaal_sddmm_{kind}"


def test_every_schedule_has_an_sddmm_template_that_names_no_layout() -> None:
    for definition in definitions():
        path = template_dir() / definition.template.replace("schedules/", "schedules/sddmm/", 1)
        assert path.is_file(), f"{definition.kind}: {path} is missing"
        assert "csr" not in path.read_text().lower()


def _signature(source: str, kernel_name: str) -> list[tuple[str, str]]:
    """(ctype, name) of every kernel parameter, read back from the rendered source."""
    match = re.search(rf"{kernel_name}\(\n(.*?)\n\) \{{", source, re.DOTALL)
    assert match, f"no kernel {kernel_name} in the source"
    out = []
    for line in match.group(1).splitlines():
        declaration = line.split("//")[0].strip().rstrip(",")
        ctype, _, name = declaration.rpartition(" ")
        out.append((ctype, name))
    return out


def _check_rendered(cfg: KernelConfig) -> str:
    source = render(cfg)
    assert _signature(source, cfg.kernel_name) == [(p.ctype, p.name) for p in cfg.kernel_params()]
    assert [p.name for p in cfg.kernel_params()][-len(SAMPLED_PARAMS):] == [
        p.name for p in SAMPLED_PARAMS
    ]
    assert f"typedef {cfg.value_type} value_t;" in source
    assert f"typedef {cfg.offset_type} offset_t;" in source
    # One writer per output value: the kernel body neither combines nor synchronises.
    body = source.split("// ---- Schedule:", 1)[1]
    for word in ("atomicAdd", "__syncthreads", "__shfl", "__barrier"):
        assert word not in body, f"{cfg.kind}: {word} in an SDDMM kernel"
    assert "y[a] = A.atom_val(" in body and "TEAAL_OWN(" in body
    clear_caches()  # rendered afresh, not from the cache: the same bytes
    assert render(cfg) == source
    return source


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize(("kind", "layout"), RENDER_CASES, ids=CASE_IDS)
def test_render_has_the_config_signature_and_is_deterministic(
    kind: str, layout: str, dtype: str
) -> None:
    cfg = make_config(sddmm_schedule(kind), dtype=dtype, layout=layout)
    source = _check_rendered(cfg)
    assert f"layout:     {layout}" in source


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("layout", ["csr", "coo"])
def test_teaal_sddmm_spec_renders(layout: str, dtype: str) -> None:
    schedule = teaal_schedule()
    assert schedule.kind == "thread_mapped" and schedule.form.kind == "sddmm"
    assert schedule.form.dense is not None and schedule.form.dense.reduce
    _check_rendered(make_config(schedule, dtype=dtype, layout=layout))


# ---- nvcc ------------------------------------------------------------------------------------


def _nvcc(source: Path, *defines: str) -> tuple[str, int, str]:
    out = source.with_suffix(f"{''.join(defines).replace('-D', '.')}.o")
    proc = subprocess.run(
        [str(NVCC), "-arch=sm_90", "-c", *defines, "-o", str(out), str(source)],
        capture_output=True, text=True,
    )
    return f"{source.name} {' '.join(defines)}", proc.returncode, proc.stderr


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed)")
def test_every_sddmm_kernel_compiles_with_nvcc(tmp_path: Path) -> None:
    """f32 and f64 with 32-bit offsets, the trace build of f64, 64-bit offsets in f32, and
    the vector build (16-byte loads of both factors) of each."""
    configs: list[tuple[str, KernelConfig]] = []
    for kind, layout in RENDER_CASES:
        schedule = sddmm_schedule(kind)
        for dtype, bits in (("f32", 32), ("f64", 32), ("f32", 64)):
            cfg = make_config(schedule, dtype=dtype, layout=layout, index_bits=bits)
            configs.append((f"{kind}.{layout}.{dtype}.i{bits}", cfg))
    jobs: list[tuple[Path, tuple[str, ...]]] = []
    for name, cfg in configs:
        path = tmp_path / f"{name}.cu"
        path.write_text(render(cfg))
        jobs.append((path, ()))
        jobs.append((path, ("-DTEAAL_DENSE_VECTOR=1",)))
        if cfg.dtype == "float64":
            jobs.append((path, ("-DTEAAL_TRACE=1",)))
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: _nvcc(job[0], *job[1]), jobs))
    failures = [f"{name}: exit {rc}\n{err}" for name, rc, err in results if rc != 0]
    assert not failures, "\n".join(failures)
    warnings = [f"{name}:\n{err}" for name, rc, err in results if "warning" in err.lower()]
    assert not warnings, "\n".join(warnings)


# ---- Ownership: a NumPy emulation of each template's walk -------------------------------------


def _matrices() -> dict[str, sp.csr_matrix]:
    rng = np.random.default_rng(7)
    # skewed rows, empty rows (leading, trailing, a run of them), one long row
    lengths = rng.integers(0, 6, size=57)
    lengths[[0, 1, 20, 21, 22, 55, 56]] = 0
    lengths[30] = 140
    cols = 150
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths])
    data = rng.uniform(-1, 1, size=indptr[-1])
    return {
        "skewed": sp.csr_matrix((data, indices, indptr), shape=(57, cols)),
        "rectangular": sp.random(23, 70, density=0.2, format="csr", random_state=3),
        "single_row": sp.csr_matrix(rng.uniform(-1, 1, size=(1, 33))),
        "all_empty": sp.csr_matrix((9, 4)),
    }


MATRICES = _matrices()
# Parameters per schedule: the defaults, and ones that loop over rows or split them.
PARAMS: dict[str, list[dict[str, int]]] = {
    "thread_mapped": [{}, {"T": 4}],
    "group_mapped": [{}, {"G": 4, "T": 3}, {"G": 1}],
    "work_oriented": [{}, {"W": 3}, {"W": 1}],
    "merge_path": [{}, {"I": 5}, {"I": 1}],
}
OWNER_CASES = [(kind, p) for kind in KINDS for p in PARAMS[kind]]
OWNER_IDS = [f"{kind}{''.join(f'-{k}{v}' for k, v in p.items())}" for kind, p in OWNER_CASES]


class _Walk:
    """The owner and row of every atom, as one template's threads visit them."""

    def __init__(self, nnz: int) -> None:
        self.owner = np.full(nnz, -1, np.int64)
        self.row = np.full(nnz, -1, np.int64)

    def visit(self, atom: int, thread: int, row: int) -> None:
        assert self.owner[atom] == -1, f"atom {atom} visited twice"
        self.owner[atom], self.row[atom] = thread, row


def _rows_of_worker(tiling: RowTiling, args: dict[str, int], worker: int, tiles: int
                    ) -> Iterator[int]:
    """common/row_tiling.cuh.j2's for_each_row: space digits from the worker, time digits in
    loops, tiles whose digits stay inside their parents."""
    depth, space, rest = tiling.depth, list(tiling.space_levels), worker
    digits: dict[int, int] = {}
    for level in reversed(space[1:]):  # least significant first; the first takes the rest
        digits[level], rest = rest % args[f"E{level}"], rest // args[f"E{level}"]
    if space:
        digits[space[0]] = rest
    for combo in itertools.product(*(range(args[f"E{lvl}"]) for lvl in tiling.time_levels)):
        d = {**digits, **dict(zip(tiling.time_levels, combo, strict=True))}
        m, inside = d[0], True
        for j in range(1, depth + 1):
            inside = inside and (j < 2 or m < args[f"S{j}"])
            m += d[j] * args[f"S{j}"]
        if inside and m < tiles:
            yield m


def _walk_row_tiled(bound: BoundSchedule, ptr: np.ndarray, args: dict[str, int]) -> _Walk:
    walk, G = _Walk(int(ptr[-1])), bound.group_size
    assert bound.schedule.tiling is not None
    for worker in range(args["workers"]):
        for m in _rows_of_worker(bound.schedule.tiling, args, worker, len(ptr) - 1):
            for lane in range(G):  # thread-mapped: G = 1
                for a in range(ptr[m] + lane, ptr[m + 1], G):
                    walk.visit(a, worker * G + lane, m)
    return walk


def _walk_work_oriented(bound: BoundSchedule, ptr: np.ndarray, args: dict[str, int]) -> _Walk:
    nnz, W = int(ptr[-1]), args["work_per_thread"]
    walk = _Walk(nnz)

    def tile_of(a: int) -> int:  # the last row beginning at or before a
        return int(np.searchsorted(ptr[:-1], a, side="right")) - 1

    for tid in range(args["workers"]):
        first, last = tid * W, min(tid * W + W, nnz)
        row = tile_of(first)
        row_end = ptr[row + 1]
        for a in range(first, last):  # as the template: the next row, else search
            if a >= row_end:
                row += 1
                row_end = ptr[row + 1]
                if a >= row_end:
                    row = tile_of(a)
                    row_end = ptr[row + 1]
            walk.visit(a, tid, row)
    return walk


def _walk_merge_path(bound: BoundSchedule, ptr: np.ndarray, args: dict[str, int]) -> _Walk:
    tiles, nnz, ipt = len(ptr) - 1, int(ptr[-1]), args["items_per_thread"]
    walk = _Walk(nnz)
    row_end_items = ptr[1:] + np.arange(tiles)  # the end of row r is merge item ptr[r+1] + r
    for tid in range(args["workers"]):
        begin, end = tid * ipt, min(tid * ipt + ipt, tiles + nnz)
        row = int(np.searchsorted(row_end_items, begin, side="left"))  # rows ending before
        a, row_end = begin - row, ptr[row + 1]
        for item in range(begin, end):
            if a < row_end:
                walk.visit(a, tid, row)
                a += 1
            elif item + 1 < end:
                row += 1
                row_end = ptr[row + 1]
    return walk


WALKS: dict[str, Callable[[BoundSchedule, np.ndarray, dict[str, int]], _Walk]] = {
    "thread_mapped": _walk_row_tiled, "group_mapped": _walk_row_tiled,
    "work_oriented": _walk_work_oriented, "merge_path": _walk_merge_path,
}


def emulated_owners(bound: BoundSchedule, tile_ptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owning thread, row) of every atom, walking every thread's share as the SDDMM template
    of ``bound``'s schedule does, from the kernel arguments the runtime passes."""
    args = schedule_definition(bound.kind).kernel_arguments(bound)
    walk = WALKS[bound.kind](bound, np.asarray(tile_ptr, np.int64), args)
    return walk.owner, walk.row


def _check_owners(schedule: Schedule, params: dict[str, int], A: sp.csr_matrix) -> None:
    view = tile_view(schedule.layout, A)
    bound = bind(schedule, view.shape, None, params)
    owner, row = emulated_owners(bound, view.tile_ptr)
    d = bound.dense_size
    sim = simulate(bound, A, np.zeros((A.shape[0], d)), np.zeros((d, A.shape[1])))
    assert (owner >= 0).all(), "an atom no thread visits"
    # every (atom, k) of an atom has the atom's owner (SDDMM's K is never in space)
    np.testing.assert_array_equal(sim.owner, np.repeat(owner[:, None], d, axis=1))
    np.testing.assert_array_equal(row, view.entries.row)
    assert owner.max(initial=-1) < bound.threads


@pytest.mark.parametrize("matrix", sorted(MATRICES))
@pytest.mark.parametrize(("kind", "params"), OWNER_CASES, ids=OWNER_IDS)
def test_emulated_template_walk_gives_the_simulated_owners(
    kind: str, params: dict[str, int], matrix: str
) -> None:
    _check_owners(sddmm_schedule(kind), params, MATRICES[matrix])


def test_emulated_walk_of_the_teaal_spec_is_one_thread() -> None:
    for A in MATRICES.values():
        _check_owners(teaal_schedule(), {}, A)


# ---- The generated source run on the CPU (g++ and the CUDA shim) ------------------------------

needs_cxx = pytest.mark.skipif(emu.CXX is None, reason="no C++ compiler (g++/clang++) found")
# (kind, layout, compile-time params, dtype, offset bits): f64 for every schedule and layout
# serving it, f32 and 64-bit offsets once per schedule; each costs one g++ build.
RUN_CASES: list[tuple[str, str, dict[str, int], str, int]] = [
    *[(kind, layout, {}, "float64", 32) for kind, layout in RENDER_CASES],
    ("group_mapped", "csr", {"G": 4}, "float64", 32),
    ("group_mapped", "csr", {"G": 1}, "float64", 32),
    ("thread_mapped", "coo", {}, "float32", 32),
    ("group_mapped", "csr", {"G": 4}, "float32", 64),
    ("work_oriented", "csr", {}, "float32", 64),
    ("merge_path", "csr", {}, "float64", 64),
]
RUN_IDS = [
    f"{k}-{lay}{''.join(f'-{n}{v}' for n, v in p.items())}-{d}-i{b}"
    for k, lay, p, d, b in RUN_CASES
]


def _run_kernel(
    schedule: Schedule, layout: str, params: dict[str, int], dtype: str, bits: int,
    A: sp.csr_matrix, K: int, *, v_column_major: bool = False, sanitize: bool = False,
    options: tuple[str, ...] = (),
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Run the generated kernel on ``A`` with random factors U[M, K] and V[K, N]: its y and
    owners (atoms x K), the float64 SDDMM of the same (rounded) inputs, the simulation's
    owners. ``v_column_major`` stores V as V^T row-major (v_stride_k = 1); ``sanitize`` runs
    an AddressSanitizer build, which aborts on any access outside an argument array;
    ``options``: the runtime's build options (a vector build, say)."""
    view = tile_view(layout, A)
    bound = bind(schedule, view.shape, None, params, dense_size=K)
    bound = dataclasses.replace(bound, index_bits=max(bits, bound.index_bits))
    cfg = make_config(schedule, dtype=dtype, layout=layout, bound=bound)
    value = np.dtype(dtype)
    host = host_arguments(layout, A, value, bound.index_bits)
    rng = np.random.default_rng(K)
    rows, cols = A.shape
    U = rng.uniform(-1, 1, size=(rows, K)).astype(value)
    V = rng.uniform(-1, 1, size=(K, cols)).astype(value)
    V_stored = np.ascontiguousarray(V.T) if v_column_major else V
    nnz = view.shape.nnz
    arrays = {**host.arrays, "u_data": U.ravel(), "v_data": V_stored.ravel(),
              "y": np.full(nnz, np.nan, value), "owner": np.full(nnz * K, -1, np.int32)}
    scalars = {"rows": rows, "cols": cols, "nnz": nnz, **host.scalars}
    scalars.update(schedule_definition(bound.kind).kernel_arguments(bound))
    scalars.update(
        dense_n=K, u_stride_m=K, u_stride_k=1,
        v_stride_k=1 if v_column_major else cols, v_stride_n=K if v_column_major else 1,
    )
    exe = emu.build(cfg, options) if options else layout_emulation.build(cfg, sanitize=sanitize)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")  # the shim keeps its barriers
    result = emu.execute(exe, cfg, bound, arrays, scalars, rows=nnz, atoms=nnz * K, env=env)
    e = view.entries
    dots = np.einsum("ak,ka->a", U[e.row].astype(np.float64), V[:, e.col].astype(np.float64))
    expected = e.val.astype(value).astype(np.float64) * dots
    d = bound.dense_size
    sim = simulate(bound, A, np.zeros((A.shape[0], d)), np.zeros((d, cols)))
    return result.y, result.owner.reshape(nnz, K), expected, sim.owner[:, 0]


@pytest.fixture(scope="module")
def built_kernels() -> None:
    """Every g++ build of RUN_CASES, in parallel (about a second each)."""
    configs = []
    for kind, layout, params, dtype, bits in RUN_CASES:
        schedule = sddmm_schedule(kind)
        bound = bind(schedule, tile_view(layout, MATRICES["skewed"]).shape, None, params)
        bound = dataclasses.replace(bound, index_bits=bits)
        configs.append(make_config(schedule, dtype=dtype, layout=layout, bound=bound))
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(emu.build, configs))


def _check_run(y: np.ndarray, owner: np.ndarray, expected: np.ndarray, sim_owner: np.ndarray,
               dtype: str) -> None:
    assert not np.isnan(y).any(), "an atom's value was never written"
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(y, expected, rtol=tol, atol=tol)
    np.testing.assert_array_equal(owner, np.repeat(sim_owner[:, None], owner.shape[1], axis=1))


# Runtime sizes that make threads loop over rows (T) or cut rows into several chunks (W, I).
LOOPING = {"thread_mapped": {"T": 3}, "group_mapped": {"T": 3}, "work_oriented": {"W": 3},
           "merge_path": {"I": 5}}


@needs_cxx
@pytest.mark.usefixtures("built_kernels")
@pytest.mark.parametrize(("kind", "layout", "params", "dtype", "bits"), RUN_CASES, ids=RUN_IDS)
def test_generated_kernel_values_and_owners_on_the_cpu(
    kind: str, layout: str, params: dict[str, int], dtype: str, bits: int
) -> None:
    """Every matrix, default and looping sizes; K = 9 (two unrolled steps of the K loop and a
    remainder), K = 4 with V stored column-major (one step, other strides), K = 1 (no step)."""
    schedule = sddmm_schedule(kind)
    for A in MATRICES.values():
        for sizes in (params, {**params, **LOOPING[kind]}):
            for K in (9, 4, 1):
                y, owner, expected, sim_owner = _run_kernel(
                    schedule, layout, sizes, dtype, bits, A, K, v_column_major=K == 4
                )
                _check_run(y, owner, expected, sim_owner, dtype)


@needs_cxx
@pytest.mark.parametrize(("kind", "layout"), RENDER_CASES, ids=CASE_IDS)
def test_generated_kernel_reads_and_writes_only_its_arrays(kind: str, layout: str) -> None:
    """AddressSanitizer builds: no read past a row pointer's end (the last row's end item),
    nor outside U, V, y or owner, with rows split across threads and rows looped over."""
    schedule = sddmm_schedule(kind)
    for A in (MATRICES["skewed"], MATRICES["single_row"]):
        for K in (9, 4):
            y, owner, expected, sim_owner = _run_kernel(
                schedule, layout, LOOPING[kind], "float64", 32, A, K,
                v_column_major=K == 4, sanitize=True,
            )
            _check_run(y, owner, expected, sim_owner, "float64")


@needs_cxx
@pytest.mark.parametrize("layout", ["csr", "coo"])
def test_teaal_spec_kernel_values_and_owners_on_the_cpu(layout: str) -> None:
    schedule = teaal_schedule()
    for A in (MATRICES["skewed"], MATRICES["rectangular"]):
        y, owner, expected, sim_owner = _run_kernel(schedule, layout, {}, "float64", 32, A, 5)
        assert (sim_owner == 0).all()  # no spacetime: one thread runs every row
        _check_run(y, owner, expected, sim_owner, "float64")



VECTOR = ("-DTEAAL_DENSE_VECTOR=1",)


@needs_cxx
@pytest.mark.parametrize(("kind", "params", "dtype"), [
    ("thread_mapped", {}, "float32"), ("thread_mapped", {}, "float64"),
    ("group_mapped", {"G": 4}, "float64"), ("work_oriented", {"W": 3}, "float32"),
    ("merge_path", {"I": 5}, "float64"),
])
def test_dot_products_read_by_16_byte_loads_give_the_same_bits(
    kind: str, params: dict[str, int], dtype: str
) -> None:
    """The vector build (both factors along K with unit stride, rows aligned: V stored as
    V^T) sums the same products in the same order as the scalar loads: the same bits, for K
    a multiple of two vectors, with a scalar remainder, and shorter than one step. The shim
    aborts on a misaligned 16-byte load."""
    schedule = sddmm_schedule(kind)
    per = 16 // np.dtype(dtype).itemsize
    for A in (MATRICES["skewed"], MATRICES["rectangular"]):
        for K in (4 * per, 2 * per + per, per):
            plain = _run_kernel(schedule, "csr", params, dtype, 32, A, K, v_column_major=True)
            vector = _run_kernel(schedule, "csr", params, dtype, 32, A, K,
                                 v_column_major=True, options=VECTOR)
            np.testing.assert_array_equal(vector[0], plain[0])
            _check_run(*vector, dtype)


def test_the_vector_build_needs_unit_k_strides_and_aligned_rows() -> None:
    from types import SimpleNamespace

    from teaal_loops.runtime import dense_builds

    def arr(strides: tuple[int, int], ptr: int = 4096, itemsize: int = 4) -> object:
        return SimpleNamespace(dtype=np.dtype(f"f{itemsize}"), strides=strides,
                               data=SimpleNamespace(ptr=ptr))

    u, v_t = arr((128, 4)), arr((4, 128))  # U row-major, V stored as V^T: K = 32 along both
    assert dense_builds.sampled_vector(u, v_t) == 1
    assert dense_builds.sampled_vector(arr((256, 8), itemsize=8), arr((8, 256), itemsize=8)) == 1
    assert dense_builds.sampled_vector(u, arr((128, 4))) == 0  # V row-major: K is strided
    assert dense_builds.sampled_vector(arr((4, 128)), v_t) == 0  # U column-major
    assert dense_builds.sampled_vector(arr((132, 4)), v_t) == 0  # rows 33 elements apart
    assert dense_builds.sampled_vector(u, arr((4, 128), ptr=4100)) == 0  # misaligned start
    source = render(make_config(sddmm_schedule("thread_mapped")))
    assert dense_builds.dense_options(source, 1, 32, vector=1) == ("-DTEAAL_DENSE_VECTOR=1",)
