"""The scalar epilogue's kernels (``Z = a * T1 + b * C`` after SpMV or SpMM) on the CPU.

* every epilogue spec (tests/lowering/epilogue_specs.py, and TeAAL's gemv.yaml and gemm.yaml
  where the corpus is) renders deterministically, with ``teaal_epilogue``'s signature from
  ``EPILOGUE_PARAMS`` (only what the epilogue has), the header naming it, and the schedule's
  kernel exactly as without the epilogue;
* every such kernel compiles with nvcc, f32 and f64, plain and trace builds;
* the generated source runs under g++ (tests/codegen/cuda_emulation.h plus the few intrinsics
  the epilogue uses): the product into Z, then the epilogue; Z must equal
  ``fl(fl(alpha * T1) + fl(beta * C))`` in the dtype, bit for bit, from the kernel's own T1
  (Z read back between the two kernels), T1 must match SciPy within a Wilkinson bound, and the
  trace build's owners the simulation's.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.codegen import make_config, render
from teaal_loops.codegen.config import EPILOGUE_KERNEL, EPILOGUE_PARAMS, KernelConfig
from teaal_loops.codegen.render import clear_caches
from teaal_loops.ir.model import BoundSchedule, Schedule
from teaal_loops.layouts import tile_view
from teaal_loops.lowering import lower, simulate
from teaal_loops.lowering.simulate import sparse_operand
from teaal_loops.runtime.device_matrix import host_arguments
from teaal_loops.runtime.kernel import schedule_arguments
from teaal_loops.runtime.operands import epilogue_arguments, epilogue_grid
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec, load_spec_string
from tests.codegen import host_emulation as emu
from tests.conftest import corpus_dir, require_corpus
from tests.lowering.epilogue_specs import PARAMS, SPECS

NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
)
COMPILER = ("teaal-specs", "teaal-compiler")


def schedule_of(name: str) -> Schedule:
    """An in-repo epilogue spec, or TeAAL's ``gemv``/``gemm`` (skipped without the corpus)."""
    if name in SPECS:
        return lower(load_spec_string(SPECS[name], source=f"{name}.yaml"), params=PARAMS[name])
    return lower(load_spec(require_corpus(*COMPILER, f"{name}.yaml")))


NAMES = [*SPECS, "gemv", "gemm"]


def clashes(source: str) -> bool:
    """Merge-path SpMM at this branch's base: the dense wrapper's variable ``teaal_slot``
    shadows merge-path's ``teaal_slot()``, so the product does not compile with or without an
    epilogue (main renamed the variable in 96b7b58). Such a source is left out of the
    compile and run cases until that fix is merged; on main, none is."""
    return "const offset_t teaal_slot =" in source and "int teaal_slot(int p)" in source


def _signature(source: str, kernel_name: str) -> list[tuple[str, str]]:
    match = re.search(rf"{kernel_name}\(\n(.*?)\n\) \{{", source, re.DOTALL)
    assert match, f"no kernel {kernel_name} in the source"
    out = []
    for line in match.group(1).splitlines():
        declaration = line.split("//")[0].strip().rstrip(",")
        ctype, _, name = declaration.rpartition(" ")
        out.append((ctype, name))
    return out


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name", NAMES)
def test_render_appends_the_epilogue_kernel(name: str, dtype: str) -> None:
    schedule = schedule_of(name)
    epi = schedule.form.epilogue
    assert epi is not None and schedule.output == "Z"
    cfg = make_config(schedule, dtype=dtype)
    source = render(cfg)
    product, _, epilogue = source.partition("// ---- Epilogue: ")
    assert epilogue, "no epilogue section"
    # the product's kernel is the schedule's, as a spec without the epilogue renders it
    plain = dataclasses.replace(schedule, form=dataclasses.replace(schedule.form, epilogue=None))
    plain_source = render(make_config(plain, dtype=dtype))
    body = product.split("#ifndef TEAAL_TRACE", 1)[1]
    assert body.rstrip() == plain_source.split("#ifndef TEAAL_TRACE", 1)[1].rstrip()
    # one signature, from EPILOGUE_PARAMS, holding what the epilogue has
    params = cfg.epilogue_params()
    assert _signature(epilogue, EPILOGUE_KERNEL) == [(p.ctype, p.name) for p in params]
    names = {p.name for p in params}
    assert ("alpha" in names) == (epi.alpha is not None)
    assert ("beta" in names) == (epi.beta is not None and epi.addend is not None)
    assert ("c" in names) == (epi.addend is not None)
    assert [p.name for p in EPILOGUE_PARAMS if p.name in names] == [p.name for p in params]
    # correctly rounded operations, no fused multiply-add
    mul, add = ("__dmul_rn", "__dadd_rn") if dtype == "f64" else ("__fmul_rn", "__fadd_rn")
    assert mul in epilogue and add in epilogue and "fma" not in epilogue
    header = source.split("#ifndef TEAAL_TRACE", 1)[0]
    assert f"// epilogue:   {EPILOGUE_KERNEL}: {epi.text}" in header
    assert "the product is rounded to value_t in Z first" in header
    clear_caches()
    assert render(cfg) == source


def test_a_hostile_einsum_text_stays_in_its_comment() -> None:
    """Spec text reaches the epilogue's comment line: it is made one safe line."""
    schedule = schedule_of("spmv_thread")
    epi = schedule.form.epilogue
    assert epi is not None
    hostile = dataclasses.replace(epi, text="Z[m] = a * T1[m]\n#error injected \\")
    form = dataclasses.replace(schedule.form, epilogue=hostile)
    source = render(make_config(dataclasses.replace(schedule, form=form)))
    assert "\n#error" not in source and "injected ?" in source


# ---- nvcc ------------------------------------------------------------------------------------


def _nvcc(source: Path, *defines: str) -> tuple[str, int, str]:
    out = source.with_suffix(f"{''.join(defines).replace('-D', '.')}.cubin")
    proc = subprocess.run(
        [str(NVCC), "-arch=sm_90", "-cubin", *defines, "-o", str(out), str(source)],
        capture_output=True, text=True,
    )
    return f"{source.name} {' '.join(defines)}", proc.returncode, proc.stderr


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed)")
def test_every_epilogue_kernel_compiles_with_nvcc(tmp_path: Path) -> None:
    """Every spec, f32 and f64, plain and trace builds (64-bit offsets once: the epilogue
    does not depend on the offset type)."""
    names = [n for n in NAMES if n in SPECS or corpus_dir().joinpath(*COMPILER).exists()]
    jobs: list[tuple[Path, tuple[str, ...]]] = []
    for name in names:
        schedule = schedule_of(name)
        variants = (("f32", 32), ("f64", 32)) + ((("f32", 64),) if name == "spmm_thread" else ())
        for dtype, bits in variants:
            path = tmp_path / f"{name}.{dtype}.i{bits}.cu"
            source = render(make_config(schedule, dtype=dtype, index_bits=bits))
            if clashes(source):
                continue
            path.write_text(source)
            jobs.append((path, ()))
            if bits == 32:
                jobs.append((path, ("-DTEAAL_TRACE=1",)))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda job: _nvcc(job[0], *job[1]), jobs))
    failures = [f"{name}: exit {rc}\n{err}" for name, rc, err in results if rc != 0]
    assert not failures, "\n".join(failures)
    warnings = [f"{name}:\n{err}" for name, rc, err in results if "warning" in err.lower()]
    assert not warnings, "\n".join(warnings)


# ---- The generated source on the CPU ---------------------------------------------------------

needs_cxx = pytest.mark.skipif(emu.CXX is None, reason="no C++ compiler (g++/clang++) found")
# What the shim lacks and the epilogue uses: the grid size and the correctly rounded ops
# (plain IEEE operations on the host, where -ffp-contract=off forbids fusing them).
_PRELUDE = """
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
"""
_BUILD = Path(tempfile.mkdtemp(prefix="teaal-epi-"))
_built: dict[str, Path] = {}


def _output_name(cfg: KernelConfig) -> str:
    return "y" if cfg.form == "spmv" else "y_data"


def _driver(cfg: KernelConfig) -> str:
    """main(): read both kernels' arguments (scalars as int64, value_t scalars as double),
    run the product's grid, write Z (that is T1) and the owners, run the epilogue's grid,
    write Z again."""
    source = render(cfg)
    threaded = any(s in source for s in ("__shfl", "__syncthreads", "__barrier_sync"))
    decls, reads, product_args, epilogue_args = [], [], [], []
    nullable = {p.name for p in cfg.trailing_params()}  # an empty scratch: a null pointer
    for p in cfg.kernel_params():
        if p.is_pointer:
            decls.append(f"  std::vector<{p.scalar_type}> {p.name}_buf;")
            reads.append(f"  read_array(f, {p.name}_buf);")
            product_args.append(f"({p.name}_buf.size() > 1 ? {p.name}_buf.data() : nullptr)"
                                if p.name in nullable else f"{p.name}_buf.data()")
        else:
            decls.append(f"  {p.scalar_type} {p.name};")
            reads.append(f"  {{ long long v; read_raw(f, &v, sizeof v); {p.name} = v; }}")
            product_args.append(p.name)
    for p in cfg.epilogue_params():
        name = f"e_{p.name}"
        if p.name == "z":
            epilogue_args.append(f"{_output_name(cfg)}_buf.data()")
            continue
        if p.is_pointer:
            decls.append(f"  std::vector<value_t> {name}_buf;")
            reads.append(f"  read_array(f, {name}_buf);")
            epilogue_args.append(f"{name}_buf.data()")
        else:
            kind = "double" if p.scalar_type == "value_t" else "long long"
            decls.append(f"  {p.scalar_type} {name};")
            reads.append(f"  {{ {kind} v; read_raw(f, &v, sizeof v); {name} = (value_t)v; }}"
                         if kind == "double" else
                         f"  {{ long long v; read_raw(f, &v, sizeof v); {name} = v; }}")
            epilogue_args.append(name)
    call = f"{cfg.kernel_name}({', '.join(product_args)})"
    run_block = (
        f"std::vector<std::thread> pool; for (unsigned t = 0; t < tpb; ++t) "
        f"pool.emplace_back([&, t] {{ threadIdx.x = t; {call}; }}); for (auto& th : pool) "
        "th.join();"
        if threaded else f"for (unsigned t = 0; t < tpb; ++t) {{ threadIdx.x = t; {call}; }}"
    )
    epilogue_call = f"{EPILOGUE_KERNEL}({', '.join(epilogue_args)})"
    return f"""
#include <vector>
unsigned emu_block_threads = 0;
static void read_raw(FILE* f, void* p, size_t n) {{
  if (n && std::fread(p, 1, n, f) != n) {{ std::fprintf(stderr, "short read\\n"); std::exit(3); }}
}}
template <class T> static void read_array(FILE* f, std::vector<T>& v) {{
  long long n; read_raw(f, &n, sizeof n); v.resize(n ? n : 1); read_raw(f, v.data(), n * sizeof(T));
}}
int main(int argc, char** argv) {{
  FILE* f = std::fopen(argv[1], "rb");
  long long blocks, tpb, eblocks, etpb;
  read_raw(f, &blocks, sizeof blocks); read_raw(f, &tpb, sizeof tpb);
  read_raw(f, &eblocks, sizeof eblocks); read_raw(f, &etpb, sizeof etpb);
{chr(10).join(decls)}
{chr(10).join(reads)}
  emu_block_threads = (unsigned)tpb;
{emu.prepare_code(cfg, ", ".join(product_args))}  std::fclose(f);
  gridDim.x = (unsigned)blocks;
  for (long long b = 0; b < blocks; ++b) {{ blockIdx.x = (unsigned)b; {run_block} }}
  FILE* o = std::fopen(argv[2], "wb");
  std::fwrite({_output_name(cfg)}_buf.data(), sizeof(value_t), {_output_name(cfg)}_buf.size(), o);
  std::fwrite(owner_buf.data(), sizeof(int), owner_buf.size(), o);
  gridDim.x = (unsigned)eblocks;
  for (long long b = 0; b < eblocks; ++b) {{
    blockIdx.x = (unsigned)b;
    for (unsigned t = 0; t < etpb; ++t) {{ threadIdx.x = t; {epilogue_call}; }}
  }}
  std::fwrite({_output_name(cfg)}_buf.data(), sizeof(value_t), {_output_name(cfg)}_buf.size(), o);
  std::fclose(o);
  return 0;
}}
"""


def _build(cfg: KernelConfig) -> Path:
    source = _PRELUDE + render(cfg) + _driver(cfg)
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    if key not in _built:
        assert emu.CXX is not None
        src, exe = _BUILD / f"{key}.cpp", _BUILD / f"{key}.exe"
        src.write_text(source)
        subprocess.run(
            [emu.CXX, *emu.CXXFLAGS, "-ffp-contract=off", "-include", str(emu.SHIM),
             "-o", str(exe), str(src)],
            check=True, capture_output=True, text=True,
        )
        _built[key] = exe
    return _built[key]


def _memory(array: np.ndarray[Any, Any]) -> bytes:
    """An array's elements in memory order (C- or Fortran-contiguous), as its strides read."""
    return array.ravel(order="K" if array.flags.f_contiguous else "C").tobytes()


@dataclasses.dataclass
class Run:
    z: np.ndarray[Any, Any]  # Z after the epilogue, in Z's logical shape
    t1: np.ndarray[Any, Any]  # the product alone (the same launch without the epilogue)
    owner: np.ndarray[Any, Any]
    bound: BoundSchedule
    op: sp.csr_matrix  # the matrix the layout holds (A^T for a transposed spec)
    operand: np.ndarray[Any, Any]
    c: np.ndarray[Any, Any] | None
    alpha: float
    beta: float


def run_on_cpu(schedule: Schedule, A: sp.csr_matrix, dtype: str, *, D: int = 3,
               z_order: str = "C", max_blocks: int = 1 << 20) -> Run:
    """The kernel of ``schedule`` on ``A`` (as declared) with seeded operands, ``Z`` in
    ``z_order``, the epilogue's grid capped at ``max_blocks`` (then its threads stride)."""
    value = np.dtype(dtype)
    op = sparse_operand(schedule, A).tocsr()
    view = tile_view(schedule.layout, op)
    spmm = schedule.form.kind == "spmm"
    bound = bind(schedule, view.shape, None, {}, dense_size=D if spmm else 1)
    cfg = make_config(schedule, dtype=dtype, bound=bound)
    host = host_arguments(schedule.layout, op, value, bound.index_bits)
    rows, cols = op.shape
    rng = np.random.default_rng(rows * 7 + cols)
    epi = schedule.form.epilogue
    assert epi is not None
    alpha = float(value.type(1 / 3)) if epi.alpha else 1.0
    beta = float(value.type(-0.7)) if epi.beta else 1.0
    zshape = (rows, D) if spmm else (rows,)
    operand = rng.uniform(-1, 1, (cols, D) if spmm else cols).astype(value)
    c = None
    if epi.addend:
        c = rng.uniform(-1, 1, zshape).astype(value)
        if spmm and epi.addend_storage[0] != epi.addend_ranks[0]:
            c = np.asfortranarray(c)
    accumulate = emu.zeroes_output(cfg, bound)
    z = np.full(zshape, 0.0 if accumulate else np.nan, dtype=value, order=z_order)  # type: ignore[call-overload]
    nnz = view.shape.nnz
    arrays = {**emu.prepared_arguments(cfg, bound), **host.arrays,
              "owner": np.full(nnz * (D if spmm else 1), -1, np.int32)}
    scalars: dict[str, Any] = {"rows": rows, "cols": cols, "nnz": nnz, **host.scalars}
    scalars.update(schedule_arguments(bound))
    if spmm:
        zs = [s // value.itemsize for s in z.strides]
        arrays.update(x_data=operand, y_data=z)
        scalars.update(dense_n=D, dense_space=bound.dense_space, dense_time=bound.dense_time,
                       x_stride_k=D, x_stride_n=1, y_stride_m=zs[0], y_stride_n=zs[1])
    else:
        arrays.update(x=operand, y=z)
    epi_args, elements = epilogue_arguments(cfg.epilogue_params(), z, c, alpha, beta)
    eblocks = epilogue_grid(elements, 256, max_blocks)
    exe = _build(cfg)
    outputs = []
    with tempfile.TemporaryDirectory() as tmp:
        inp = Path(tmp) / "in.bin"
        with inp.open("wb") as f:
            f.write(np.array([bound.launch.blocks, bound.launch.threads_per_block, eblocks, 256],
                             np.int64).tobytes())
            for p in cfg.kernel_params():
                if p.is_pointer:
                    arr = arrays[p.name]
                    f.write(np.array([arr.size], np.int64).tobytes() + _memory(arr))
                else:
                    f.write(np.array([scalars[p.name]], np.int64).tobytes())
            for p, v in zip(cfg.epilogue_params(), epi_args, strict=True):
                if p.name == "z":
                    continue
                if p.is_pointer:
                    f.write(np.array([v.size], np.int64).tobytes() + _memory(v))
                elif p.scalar_type == "value_t":
                    f.write(np.array([v], np.float64).tobytes())
                else:
                    f.write(np.array([v], np.int64).tobytes())
            f.write(emu.prepare_blocks(cfg, bound))
        out = Path(tmp) / "out.bin"
        subprocess.run([str(exe), str(inp), str(out)], check=True, timeout=120)
        raw = out.read_bytes()
    size, owners = z.size * value.itemsize, arrays["owner"].size * 4
    for lo in (0, size + owners):
        flat = np.frombuffer(raw[lo:lo + size], dtype=value)
        outputs.append(flat.reshape(zshape[::-1]).T if z_order == "F" else flat.reshape(zshape))
    owner = np.frombuffer(raw[size:size + owners], dtype=np.int32)
    return Run(outputs[1], outputs[0], owner, bound, op, operand, c, alpha, beta)


def _matrices() -> dict[str, sp.csr_matrix]:
    rng = np.random.default_rng(11)
    lengths = rng.integers(0, 6, size=37)
    lengths[[0, 5, 6, 36]] = 0
    lengths[20] = 45
    cols = 50
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths])
    data = rng.uniform(-1, 1, size=indptr[-1])
    return {
        "skewed": sp.csr_matrix((data, indices, indptr), shape=(37, cols)),
        "rectangular": sp.random(23, 61, density=0.2, format="csr", random_state=3),
    }


MATRICES = _matrices()


def check_run(run: Run, schedule: Schedule, dtype: str) -> None:
    value = np.dtype(dtype)
    e = schedule.form.epilogue
    assert e is not None
    assert not np.isnan(run.t1).any(), "an element of T1 was never written"
    # the epilogue, element by element, exactly as the template states it
    expected = run.t1 * value.type(run.alpha) if e.alpha else run.t1.copy()
    if run.c is not None:
        scaled = run.c * value.type(run.beta) if e.beta else run.c
        expected = expected + scaled
    assert expected.dtype == value
    np.testing.assert_array_equal(run.z, expected)
    # T1 is the product, within the Wilkinson-style bound of its rows' sums
    exact = np.asarray(run.op.astype(np.float64) @ run.operand.astype(np.float64))
    magnitude = np.asarray(abs(run.op.astype(np.float64)) @ np.abs(run.operand.astype(np.float64)))
    n = np.diff(run.op.indptr).reshape((-1,) + (1,) * (exact.ndim - 1))
    u = np.finfo(value).eps / 2
    assert (np.abs(run.t1 - exact) <= 2 * n * u * magnitude + np.finfo(value).tiny).all()
    # the trace build's owners are the product's, as the simulation gives them
    operand = run.operand.astype(np.float64)
    extra = ([run.c] if run.c is not None else [])
    sim = simulate(run.bound, run.op.T if schedule.form.transposed else run.op, operand, *extra,
                   scalars={n: 1.0 for n in e.scalars})
    np.testing.assert_array_equal(run.owner, sim.owner.ravel())


CPU_CASES = [
    (name, dtype) for name in SPECS for dtype in ("float64", "float32")
    if not clashes(render(make_config(schedule_of(name))))
]


@pytest.fixture(scope="module")
def built() -> None:
    """Every g++ build of CPU_CASES, two at a time."""
    configs = []
    for name, dtype in CPU_CASES:
        schedule = schedule_of(name)
        view = tile_view(schedule.layout, MATRICES["skewed"])
        dense = 3 if schedule.form.kind == "spmm" else 1
        configs.append(make_config(schedule, dtype=dtype,
                                   bound=bind(schedule, view.shape, None, {}, dense_size=dense)))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(_build, configs))


@needs_cxx
@pytest.mark.usefixtures("built")
@pytest.mark.parametrize(("name", "dtype"), CPU_CASES)
def test_generated_epilogue_values_and_owners_on_the_cpu(name: str, dtype: str) -> None:
    schedule = schedule_of(name)
    for A in MATRICES.values():
        run = run_on_cpu(schedule, A, dtype)
        check_run(run, schedule, dtype)


@needs_cxx
@pytest.mark.parametrize("name", ["spmm_thread", "spmm_group"])
def test_a_column_major_output_and_a_striding_grid(name: str) -> None:
    """Z stored column-major (walked along its contiguous rank M), and Z row-major with
    37 x 9 elements for one block of 256 threads: each thread strides to a second element."""
    schedule = schedule_of(name)
    for order, blocks in (("F", 1 << 20), ("F", 1), ("C", 1)):
        run = run_on_cpu(schedule, MATRICES["skewed"], "float64", D=9, z_order=order,
                         max_blocks=blocks)
        check_run(run, schedule, "float64")


@needs_cxx
@pytest.mark.parametrize("name", ["gemv", "gemm"])
def test_teaal_gemv_and_gemm_on_the_cpu(name: str) -> None:
    """TeAAL's own specs: transposed (the layout holds A^T, CSC), one thread, atomics."""
    schedule = schedule_of(name)
    for A in MATRICES.values():
        run = run_on_cpu(schedule, A.T.tocsr(), "float32")  # as declared: [K, M]
        check_run(run, schedule, "float32")


LAYOUT_CASES = [("spmv_thread", "coo"), ("spmv_thread", "ell"), ("spmv_thread", "dia"),
                ("spmv_thread", "bcsr:2x2"), ("spmm_work", "coo"), ("spmm_work", "bcsr:2x2")]


@needs_cxx
@pytest.mark.parametrize(("name", "layout"), LAYOUT_CASES)
def test_other_layouts_on_the_cpu(name: str, layout: str) -> None:
    """The epilogue does not depend on the layout: padded (ELL, DIA), blocked (BCSR) and
    coordinate (COO, atomics) products, then the same elementwise kernel."""
    spec = load_spec_string(SPECS[name], source=f"{name}.yaml")
    schedule = lower(spec, params=PARAMS[name], layout=layout)
    assert schedule.layout == layout and schedule.form.epilogue is not None
    run = run_on_cpu(schedule, MATRICES["rectangular"], "float64")
    check_run(run, schedule, "float64")
