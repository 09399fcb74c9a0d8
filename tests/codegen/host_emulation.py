"""Run a generated kernel on the CPU: g++ with tests/codegen/cuda_emulation.h force-included.

The driver's ``main`` is generated from the kernel's parameter list (the same list the runtime
launches with): it reads the grid, the block and every argument from a binary file, runs every
thread and writes ``y`` and ``owner`` back. The kernel runs in a subprocess with a timeout, so
a shuffle or barrier that not all lanes reach shows as a failure, not a hung test.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from teaal_loops.codegen.config import KernelConfig
from teaal_loops.codegen.render import render
from teaal_loops.ir.model import BoundSchedule

HERE = Path(__file__).resolve().parent
SHIM = HERE / "cuda_emulation.h"
CXX = shutil.which("g++") or shutil.which("clang++")
_BUILD_DIR = Path(tempfile.mkdtemp(prefix="teaal-emu-"))
atexit.register(shutil.rmtree, _BUILD_DIR, True)
_built: dict[str, Path] = {}
_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()
_pch_lock = threading.Lock()
CXXFLAGS = ["-std=c++17", "-O0", "-pthread", "-DTEAAL_TRACE=1"]


def _shim() -> Path:
    """The shim copied into the build folder with a precompiled header beside it (2x faster)."""
    header = _BUILD_DIR / SHIM.name
    with _pch_lock:
        if not header.exists():
            assert CXX is not None
            header.write_text(SHIM.read_text())
            subprocess.run(
                [CXX, *CXXFLAGS, "-x", "c++-header", str(header), "-o", f"{header}.gch"],
                check=False,  # without the .gch, g++ simply parses the header
                capture_output=True,
            )
    return header

_CTYPES = {"index_t": "index_t", "offset_t": "offset_t", "value_t": "value_t", "int": "int"}


def _driver(cfg: KernelConfig) -> str:
    source = render(cfg)
    # lanes that shuffle or wait at barriers must run concurrently
    threaded = any(s in source for s in ("__shfl", "__syncthreads", "__barrier_sync"))
    decls, reads, call = [], [], []
    # an empty scratch is passed as a null pointer, as the runtime passes it
    nullable = {p.name for p in cfg.trailing_params()}
    for p in cfg.kernel_params():
        t = p.scalar_type
        if p.is_pointer:
            decls.append(f"  std::vector<{t}> {p.name}_buf; long long {p.name}_n = 0;")
            reads.append(f"  {p.name}_n = read_array(f, {p.name}_buf);")
            call.append(f"({p.name}_n ? {p.name}_buf.data() : nullptr)" if p.name in nullable
                        else f"{p.name}_buf.data()")
        else:
            decls.append(f"  {t} {p.name};")
            reads.append(f"  {{ long long v; read_raw(f, &v, sizeof v); {p.name} = ({t})v; }}")
            call.append(p.name)
    args = ", ".join(call)
    # the output array: y (SpMV, SDDMM) or y_data (SpMM: column n of Z is y_data + n * stride)
    out = "y_data" if any(p.name == "y_data" for p in cfg.kernel_params()) else "y"
    run_block = (
        """    std::vector<std::thread> pool;
    for (unsigned t = 0; t < emu_block_threads; ++t)
      pool.emplace_back([&, t] { threadIdx.x = t; KERNEL(ARGS); });
    for (auto& th : pool) th.join();"""
        if threaded
        else "    for (unsigned t = 0; t < emu_block_threads; ++t) "
        "{ threadIdx.x = t; KERNEL(ARGS); }"
    ).replace("KERNEL", cfg.kernel_name).replace("ARGS", args)
    prepare = prepare_code(cfg, args)
    # the scratch as the last launch left it, after y and the owners
    scratch_out = "".join(
        f"  std::fwrite({p.name}_buf.data(), 1, {p.name}_n * sizeof({p.scalar_type}), o);\n"
        for p in cfg.trailing_params())
    return f"""
unsigned emu_block_threads = 0;
static void read_raw(FILE* f, void* p, size_t n) {{
  if (n && std::fread(p, 1, n, f) != n) {{ std::fprintf(stderr, "short read\\n"); std::exit(3); }}
}}
template <class T> static long long read_array(FILE* f, std::vector<T>& v) {{
  long long n; read_raw(f, &n, sizeof n); v.resize(n ? n : 1); read_raw(f, v.data(), n * sizeof(T));
  return n;
}}
int main(int argc, char** argv) {{
  FILE* f = std::fopen(argv[1], "rb");
  long long blocks, tpb; read_raw(f, &blocks, sizeof blocks); read_raw(f, &tpb, sizeof tpb);
{chr(10).join(decls)}
{chr(10).join(reads)}
  emu_block_threads = (unsigned)tpb;
{prepare}  std::fclose(f);
  // launches of the product (argv[3], default 1) over the same scratch, as a stream repeats
  // them; y is restored between them, so a row a later launch misses shows
  const int launches = argc > 3 ? std::atoi(argv[3]) : 1;
  const std::vector<value_t> y_start = {out}_buf;
  for (int launch = 0; launch < launches; ++launch) {{
  {out}_buf = y_start;
  gridDim.x = (unsigned)blocks;
  for (long long b = 0; b < blocks; ++b) {{
    blockIdx.x = (unsigned)b;
{run_block}
  }}
  }}
  FILE* o = std::fopen(argv[2], "wb");
  std::fwrite({out}_buf.data(), sizeof(value_t), {out}_buf.size(), o);
  std::fwrite(owner_buf.data(), sizeof(int), owner_buf.size(), o);
{scratch_out}  std::fclose(o);
  return 0;
}}
"""


def build(cfg: KernelConfig, options: tuple[str, ...] = ()) -> Path:
    """The kernel with its driver, compiled; ``options``: the runtime's build options of a
    launch (``-DNAME=VALUE``, dense_builds.dense_options), passed to g++ as they are to NVRTC."""
    source = render(cfg) + "\n#include <vector>\n" + _driver(cfg)
    key = hashlib.sha256("\0".join((source, *options)).encode()).hexdigest()[:16]
    with _key_locks_guard:  # tests build in threads: one build a source, the others wait
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:
        if key in _built:
            return _built[key]
        assert CXX is not None
        src = _BUILD_DIR / f"{key}.cpp"
        exe = _BUILD_DIR / f"{key}.exe"
        src.write_text(source)
        done = subprocess.run(
            [CXX, *CXXFLAGS, *options, "-include", str(_shim()), "-o", str(exe), str(src)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise AssertionError(f"{CXX} failed on {src}:\n{done.stderr[-4000:]}")
        _built[key] = exe
        return exe


@dataclass
class EmulationResult:
    y: np.ndarray[Any, Any]
    owner: np.ndarray[Any, Any]
    scratch: bytes = b""  # the launch scratch after the last launch (empty: none)


def run(
    cfg: KernelConfig, bound: BoundSchedule, A: sp.csr_matrix, x: np.ndarray[Any, Any],
    *, timeout: float = 60.0, launches: int = 1, options: tuple[str, ...] = (),
) -> EmulationResult:
    """Execute the kernel of ``cfg`` for ``bound`` on ``A`` and ``x`` (y pre-filled NaN or 0),
    ``launches`` times over the same scratch (y restored between launches), built with
    ``options`` (the prepare kernels too, as the runtime builds them)."""
    from teaal_loops.runtime.kernel import schedule_arguments

    exe = build(cfg, options)
    value = np.dtype(cfg.dtype)
    offset = np.int64 if cfg.index_bits == 64 else np.int32
    rows, cols = A.shape
    y0 = np.zeros(rows, value) if zeroes_output(cfg, bound) else np.full(rows, np.nan, value)
    arrays = {
        "indptr": A.indptr.astype(offset),
        "indices": A.indices.astype(np.int32),
        "values": A.data.astype(value),
        "x": x.astype(value),
        "y": y0,
        "owner": np.full(A.nnz, -1, np.int32),
    }
    scalars: dict[str, int] = {"rows": rows, "cols": cols, "nnz": A.nnz}
    scalars.update(schedule_arguments(bound))
    return execute(exe, cfg, bound, arrays, scalars, rows=rows, atoms=A.nnz, timeout=timeout,
                   launches=launches)


def prepare_code(cfg: KernelConfig, args: str) -> str:
    """C++ that runs the schedule's prepare kernels (merge-path's partition) over ``args``, as
    Kernel.prepare does before any launch: each reads its block count from the input file
    ``f`` (written last, by :func:`prepare_blocks`), with ``emu_block_threads`` threads."""
    return "".join(
        f"""  {{ long long pre_blocks; read_raw(f, &pre_blocks, sizeof pre_blocks);
    gridDim.x = (unsigned)pre_blocks;
    for (long long b = 0; b < pre_blocks; ++b) {{
      blockIdx.x = (unsigned)b;
      for (unsigned t = 0; t < emu_block_threads; ++t) {{ threadIdx.x = t; {name}({args}); }}
    }} }}
"""
        for name in _prepare_kernels(cfg)
    )


def _prepare_kernels(cfg: KernelConfig) -> list[str]:
    """The kernels that fill the schedule's prepared arrays, in launch order: which they are
    depends on the schedule, not on the matrix, so any binding names them."""
    from teaal_loops.schedules import bind
    from teaal_loops.types import MatrixShape

    bound = bind(cfg.schedule, MatrixShape(rows=1, cols=1, nnz=1))
    return [a.kernel for a in cfg.definition.prepared_arrays(bound)]


def prepare_blocks(cfg: KernelConfig, bound: BoundSchedule) -> bytes:
    """The block counts :func:`prepare_code` reads, one a prepare kernel (one thread an element
    of its array)."""
    threads = bound.launch.threads_per_block
    blocks = [(a.length + threads - 1) // threads for a in cfg.definition.prepared_arrays(bound)]
    return np.array(blocks, np.int64).tobytes()


def zeroes_output(cfg: KernelConfig, bound: BoundSchedule) -> bool:
    """Whether the runtime zeroes the output before this kernel (else it starts as NaN here,
    so that a kernel that adds into it shows)."""
    return cfg.zeroes_output(bound)


def prepared_arguments(cfg: KernelConfig, bound: BoundSchedule) -> dict[str, np.ndarray[Any, Any]]:
    """The schedule's prepared arrays (filled by its prepare kernels in the emulator; -1 here)
    and the launch scratch, zeroed, as the runtime makes them."""
    offset = np.int64 if cfg.index_bits == 64 else np.int32
    out = {a.name: np.full(max(a.length, 1), -1, offset)
           for a in cfg.definition.prepared_arrays(bound)}
    for p in cfg.trailing_params():  # empty: the driver passes a null pointer
        nbytes = cfg.definition.scratch_bytes(bound, np.dtype(cfg.dtype).itemsize)
        out[p.name] = np.zeros(nbytes, np.uint8)
    return out


def execute(
    exe: Path,
    cfg: KernelConfig,
    bound: BoundSchedule,
    arrays: dict[str, np.ndarray[Any, Any]],
    scalars: dict[str, int],
    *,
    rows: int,
    atoms: int,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
    launches: int = 1,
) -> EmulationResult:
    """Run an emulator binary: write the launch geometry and every kernel argument in signature
    order (arrays as size + bytes, scalars as int64), read back y and the owners."""
    value = np.dtype(cfg.dtype)
    arrays = {**prepared_arguments(cfg, bound), **arrays}
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "in.bin", Path(tmp) / "out.bin"
        with inp.open("wb") as f:
            f.write(np.array([bound.launch.blocks, bound.launch.threads_per_block], np.int64))
            for p in cfg.kernel_params():
                if p.is_pointer:
                    arr = arrays[p.name]
                    f.write(np.array([arr.size], np.int64).tobytes())
                    f.write(np.ascontiguousarray(arr).tobytes())
                else:
                    f.write(np.array([scalars[p.name]], np.int64).tobytes())
            f.write(prepare_blocks(cfg, bound))
        subprocess.run([str(exe), str(inp), str(out), str(launches)], check=True,
                       timeout=timeout, env=env)
        raw = out.read_bytes()
    y_end = rows * value.itemsize
    owner_end = y_end + 4 * max(arrays["owner"].size, 1)  # (read_array's one slot when empty)
    y = np.frombuffer(raw[:y_end], dtype=value).copy()
    owner = np.frombuffer(raw[y_end:owner_end], dtype=np.int32).copy()
    return EmulationResult(y=y, owner=owner[:atoms], scratch=raw[owner_end:])
