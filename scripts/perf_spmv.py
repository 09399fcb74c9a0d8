"""Tuning runs of the generated SpMV kernels against cuSPARSE, in one process; writes JSON.

    PYTHONPATH=. python3 scripts/perf_spmv.py --out perf.json --corpus corpus_carry/matrices \
        --large --baseline perf_carry/baseline --budget-s 240

For each matrix (corpus files, then the four large classes generated on the GPU with
:mod:`teaal_loops.bench.generate`): cuSPARSE through CuPy (``A @ x``) gives the reference and
its times; then every variant (a library spec with parameters, optionally another block size,
a patched source or a baseline source from an earlier commit launched with the same
arguments) is validated against cuSPARSE's result (outputs poisoned with NaN first where the
schedule stores) and timed three ways:

* ``call_us``: CUDA events around each lean launch (zeroing y included where the schedule
  accumulates), launches back to back: what a Python loop sees;
* ``kernel_us``: the same repetitions queued behind a spin kernel: device time only;
* ``host_us``: host time per lean launch (many launches, one synchronisation at the end).

Inputs are rotated over copies spanning 3x the L2 (at most --max-copies) so that small matrices
are not timed out of the L2. Bandwidth counts the compulsory CSR bytes
nnz*(value+index) + (rows+1)*offset + cols*value + rows*value.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SPIN = r"""
extern "C" __global__ void perf_spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
"""
ATOL, RTOL = 1e-2, 1e-3


@dataclass(frozen=True)
class Variant:
    label: str
    spec: str
    params: dict[str, int] = field(default_factory=dict)
    block_threads: int | None = None
    patch: tuple[tuple[str, str], ...] = ()  # (old, new) replacements in the rendered source
    baseline: str | None = None  # file stem under --baseline: that source, same arguments
    large_only: bool = False
    small_only: bool = False


# Source patches for variants (the templates' knobs, and one layout experiment)
UNROLL8 = (("#define TEAAL_UNROLL 4", "#define TEAAL_UNROLL 8"),)
MIN_BLOCKS_64 = "(1024 / TEAAL_BLOCK_THREADS > 0 ? 1024 / TEAAL_BLOCK_THREADS : 1)"
REG128 = ((MIN_BLOCKS_64, "(512 / TEAAL_BLOCK_THREADS > 0 ? 512 / TEAAL_BLOCK_THREADS : 1)"),)
STAGE_UNROLL = "constexpr int TEAAL_STAGE_UNROLL = TEAAL_STAGED_IPT < 16 ? TEAAL_STAGED_IPT : 16;"
SU8 = ((STAGE_UNROLL, STAGE_UNROLL.replace("16", "8")),)
SU32_REG128 = ((STAGE_UNROLL, STAGE_UNROLL.replace("16", "32")),) + REG128
# streaming (evict-first) loads of the matrix, so that they do not push x out of the L2
LDCS = (("{ return __ldg(indices + a); }", "{ return __ldcs(indices + a); }"),
        ("{ return __ldg(values + a); }", "{ return __ldcs(values + a); }"))


def corpus_variants() -> list[Variant]:
    return [
        Variant("thread_mapped", "thread_mapped"),
        *[Variant(f"group_mapped_g{g}", "group_mapped", {"BLOCK_SIZE": g})
          for g in (2, 4, 8, 16, 32)],
        Variant("group_mapped_g32_u8", "group_mapped", {"BLOCK_SIZE": 32}, patch=UNROLL8),
        Variant("group_mapped_block_g128", "group_mapped_block", {"GROUP": 128}),
        *[Variant(f"merge_path_i{i}", "merge_path", {"ITEMS_PER_THREAD": i})
          for i in (4, 8, 16, 32)],
        Variant("merge_path_i16_t256", "merge_path", {"ITEMS_PER_THREAD": 16}, block_threads=256),
        Variant("merge_path_i32_t256", "merge_path", {"ITEMS_PER_THREAD": 32}, block_threads=256),
        Variant("merge_path_i16_su8", "merge_path", {"ITEMS_PER_THREAD": 16}, patch=SU8),
        Variant("OLD_merge_path_i8", "merge_path", {"ITEMS_PER_THREAD": 8},
                baseline="merge_path_i8"),
        Variant("OLD_group_mapped_g8", "group_mapped", {"BLOCK_SIZE": 8},
                baseline="group_mapped_g8"),
        Variant("OLD_group_mapped_g32", "group_mapped", {"BLOCK_SIZE": 32},
                baseline="group_mapped_g32"),
    ]


def large_variants() -> list[Variant]:
    return [
        *[Variant(f"group_mapped_g{g}", "group_mapped", {"BLOCK_SIZE": g}) for g in (4, 8, 16, 32)],
        *[Variant(f"group_mapped_g{g}_u8", "group_mapped", {"BLOCK_SIZE": g}, patch=UNROLL8)
          for g in (8, 32)],
        Variant("group_mapped_g8_ldcs", "group_mapped", {"BLOCK_SIZE": 8}, patch=LDCS),
        *[Variant(f"merge_path_i{i}", "merge_path", {"ITEMS_PER_THREAD": i}) for i in (16, 24, 32)],
        Variant("merge_path_i16_t256", "merge_path", {"ITEMS_PER_THREAD": 16}, block_threads=256),
        Variant("merge_path_i32_t256", "merge_path", {"ITEMS_PER_THREAD": 32}, block_threads=256),
        Variant("merge_path_i16_t512", "merge_path", {"ITEMS_PER_THREAD": 16}, block_threads=512),
        Variant("merge_path_i16_su8", "merge_path", {"ITEMS_PER_THREAD": 16}, patch=SU8),
        Variant("merge_path_i32_r128", "merge_path", {"ITEMS_PER_THREAD": 32}, patch=SU32_REG128),
        Variant("merge_path_i32_ldcs", "merge_path", {"ITEMS_PER_THREAD": 32}, patch=LDCS),
        Variant("merge_path_i16_t256_ldcs", "merge_path", {"ITEMS_PER_THREAD": 16},
                block_threads=256, patch=LDCS),
        Variant("OLD_merge_path_i8", "merge_path", {"ITEMS_PER_THREAD": 8},
                baseline="merge_path_i8"),
        Variant("OLD_group_mapped_g4", "group_mapped", {"BLOCK_SIZE": 4},
                baseline="group_mapped_g4"),
        Variant("OLD_group_mapped_g16", "group_mapped", {"BLOCK_SIZE": 16},
                baseline="group_mapped_g16"),
        Variant("OLD_group_mapped_g32", "group_mapped", {"BLOCK_SIZE": 32},
                baseline="group_mapped_g32"),
    ]


# DESIGN.md section 7 classes, each over a gigabyte of float32 CSR
LARGE: list[tuple[str, str, dict[str, Any]]] = [
    ("banded", "banded", {"rows": 1 << 23, "width": 32}),
    ("uniform", "uniform", {"rows": 1 << 23, "nnz": 1 << 27}),
    ("rmat-s23", "rmat", {"scale": 23, "nnz": 160_000_000}),
    ("longrows", "longrows", {"rows": 1 << 22, "nnz": 1 << 27, "long_rows": 128, "fraction": 0.9}),
]


class Timer:
    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self._spin = cp.RawKernel(SPIN, "perf_spin")

    def per_call(self, op: Callable[[int], Any], reps: int) -> list[float]:
        cp = self.cp
        starts = [cp.cuda.Event() for _ in range(reps)]
        ends = [cp.cuda.Event() for _ in range(reps)]
        cp.cuda.Device().synchronize()
        for i in range(reps):
            starts[i].record()
            op(i)
            ends[i].record()
        ends[-1].synchronize()
        return [cp.cuda.get_elapsed_time(s, e) * 1e3 for s, e in zip(starts, ends, strict=True)]

    def queued(
        self, op: Callable[[int], Any], reps: int, host_us: float
    ) -> tuple[list[float], bool]:
        cp = self.cp
        spin_ms = max(2.0, 4e-3 * host_us * reps)
        for _ in range(3):
            starts = [cp.cuda.Event() for _ in range(reps)]
            ends = [cp.cuda.Event() for _ in range(reps)]
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            self._spin((1,), (1,), (cp.uint64(int(spin_ms * 1e6)),))
            for i in range(reps):
                starts[i].record()
                op(i)
                ends[i].record()
            host_ms = (time.perf_counter() - t0) * 1e3
            ends[-1].synchronize()
            times = [cp.cuda.get_elapsed_time(s, e) * 1e3
                     for s, e in zip(starts, ends, strict=True)]
            if host_ms < 0.9 * spin_ms:
                return times, True
            spin_ms = min(2000.0, 2 * host_ms + 1)
        return times, False

    def host_us(self, op: Callable[[int], Any], calls: int) -> float:
        cp = self.cp
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for i in range(calls):
            op(i)
        t1 = time.perf_counter()
        cp.cuda.Device().synchronize()
        return (t1 - t0) / calls * 1e6


def median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def copy_gbps(cp: Any, timer: Timer) -> float:
    n = 1 << 28
    src = cp.ones(n, dtype=cp.float32)
    dst = cp.empty_like(src)
    times = timer.per_call(lambda i: cp.copyto(dst, src), 20)
    return 2 * n * 4 / (median(times) * 1e3)


def load_corpus(path: Path, seed: int) -> Any:
    from teaal_loops import matrix

    A = matrix.as_csr(matrix.read_matrix_market(str(path)))
    if A.nnz and np.all(A.data == A.data[0]):  # pattern files: random values
        A.data = np.random.default_rng(seed).uniform(-1.0, 1.0, A.nnz)
    return A


class Runner:
    def __init__(self, cp: Any, args: argparse.Namespace) -> None:
        import teaal_loops.runtime as rt
        from teaal_loops.runtime import backend

        self.cp = cp
        self.rt = rt
        self.backend = backend
        self.args = args
        self.timer = Timer(cp)
        self.device = rt.device_info()
        self.kernels: dict[str, Any] = {}
        self.started = time.perf_counter()
        self.dtype = {"f32": "float32", "f64": "float64"}[args.dtype]

    def over_budget(self) -> bool:
        return time.perf_counter() - self.started > self.args.budget_s

    def kernel(self, v: Variant) -> Any:
        k = self.kernels.get(v.label)
        if k is None:
            from teaal_loops.lowering import lower
            from teaal_loops.spec import load_spec

            schedule = lower(load_spec(str(REPO / "specs" / f"{v.spec}.yaml")),
                             params=dict(v.params), block_threads=v.block_threads)
            k = self.rt.compile(schedule, dtype=self.dtype)
            self.kernels[v.label] = k
        return k

    def source_override(self, v: Variant, prepared: Any) -> str | None:
        if v.baseline:
            return (Path(self.args.baseline) / f"{v.baseline}.{self.dtype}.cu").read_text()
        if v.patch:
            src = prepared.source
            for old, new in v.patch:
                if old not in src:
                    raise RuntimeError(f"{v.label}: patch target {old!r} not in source")
                src = src.replace(old, new)
            return src
        return None

    def run_matrix(self, name: str, indptr: Any, indices: Any, data: Any, shape: tuple[int, int],
                   variants: list[Variant], reps: int) -> dict[str, Any]:
        import cupyx.scipy.sparse as csp

        cp, timer = self.cp, self.timer
        rows, cols = shape
        nnz = int(indices.size)
        vb = np.dtype(self.dtype).itemsize
        x0 = (cp.random.RandomState(7).random_sample(cols) * 2 - 1).astype(self.dtype)
        working = indptr.nbytes + indices.nbytes + data.nbytes + x0.nbytes + rows * vb
        copies = max(1, min(self.args.max_copies, math.ceil(3 * self.device.l2_bytes / working)))
        mats = [csp.csr_matrix((data, indices, indptr), shape=shape, copy=False)]
        xs = [x0]
        for _ in range(copies - 1):
            mats.append(csp.csr_matrix((data.copy(), indices.copy(), indptr.copy()), shape=shape))
            xs.append(x0.copy())
        compulsory = nnz * (vb + 4) + (rows + 1) * indptr.itemsize + cols * vb + rows * vb
        entry: dict[str, Any] = {"matrix": name, "rows": rows, "cols": cols, "nnz": nnz,
                                 "copies": copies, "compulsory_bytes": compulsory}
        lengths = cp.diff(indptr)
        entry["row_stats"] = {
            "mean": nnz / max(rows, 1),
            "max": int(lengths.max()) if rows else 0,
            "cv": float(lengths.std() / max(float(lengths.mean()), 1e-30)) if rows else 0.0,
        }

        def cus(i: int) -> Any:
            return mats[i % copies] @ xs[i % copies]

        for i in range(max(copies, 3)):
            cus(i)
        y_ref = (mats[0] @ xs[0]).astype(cp.float64)
        call = timer.per_call(cus, reps)
        host = timer.host_us(cus, 50 if nnz < 5e6 else 5)
        kern, queued = timer.queued(cus, reps, host)
        entry["cusparse"] = {"call_us": median(call), "kernel_us": median(kern),
                             "host_us": host, "queued": queued}
        print(f"{name}: {rows}x{cols} nnz={nnz} copies={copies} cuSPARSE call "
              f"{median(call):.1f} us kernel {median(kern):.1f} us host {host:.1f} us", flush=True)
        entry["variants"] = {}
        for v in variants:
            if self.over_budget():
                entry["incomplete"] = True
                break
            try:
                entry["variants"][v.label] = self.run_variant(v, mats, xs, y_ref, compulsory,
                                                              median(kern), reps)
            except Exception as err:  # record and go on
                entry["variants"][v.label] = {"error": f"{type(err).__name__}: {err}"[:400]}
                print(f"  {v.label:26s} ERROR {err}"[:300], flush=True)
        return entry

    def run_variant(self, v: Variant, mats: list[Any], xs: list[Any], y_ref: Any,
                    compulsory: int, cus_kernel_us: float, reps: int) -> dict[str, Any]:
        cp, timer = self.cp, self.timer
        k = self.kernel(v)
        copies = len(mats)
        prepared = [k.prepare(m) for m in mats]
        override = self.source_override(v, prepared[0])
        if override is not None:
            fn = self.backend.get_function(override, prepared[0].config.kernel_name)
            for p in prepared:
                p._functions[False] = fn
                p._raw.pop(False, None)
        ys = [k.new_output(p) for p in prepared]
        # validate: poisoned output where the kernel stores
        if not prepared[0].accumulates:
            ys[0].fill(cp.nan)
        else:
            k.zero_output(prepared[0], ys[0])
        k.launch(prepared[0], xs[0], ys[0])
        got = ys[0].astype(cp.float64)
        diff = cp.abs(got - y_ref)
        mismatches = int((~(diff <= ATOL + RTOL * cp.abs(y_ref))).sum())

        def op(i: int) -> None:
            j = i % copies
            k.zero_output(prepared[j], ys[j])
            k.launch(prepared[j], xs[j], ys[j])

        probe = median(timer.per_call(op, 1))
        n = reps if not (probe > 20_000 and probe > 10 * cus_kernel_us) else 3
        for i in range(max(copies, 3)):
            op(i)
        call = timer.per_call(op, n)
        host = timer.host_us(op, 50 if n > 3 and probe < 1000 else 3)
        kern, queued = timer.queued(op, n, host)
        kus = median(kern)
        if probe < 200:  # the convenient call (allocates y) as well, on small matrices
            out_call = timer.host_us(lambda i: k(prepared[i % copies], xs[i % copies]), 50)
        else:
            out_call = None
        b = prepared[0].bound
        out = {
            "call_us": median(call), "kernel_us": kus, "host_us": host, "queued": queued,
            "mismatches": mismatches, "GBps": compulsory / (kus * 1e3) if kus > 0 else None,
            "speedup_called": None, "speedup_kernel": cus_kernel_us / kus if kus > 0 else None,
            "launch": [b.launch.blocks, b.launch.threads_per_block],
            "work_per_thread": b.work_per_thread, "group_size": b.group_size, "reps": n,
            "call_path_host_us": out_call,
        }
        print(f"  {v.label:26s} call {out['call_us']:9.1f} kernel {kus:9.1f} us host "
              f"{host:5.1f} {out['GBps']:8.1f} GB/s x{out['speedup_kernel']:5.2f} kernel"
              f"{'' if mismatches == 0 else f'  MISMATCHES {mismatches}'}", flush=True)
        return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default="perf_spmv.json")
    p.add_argument("--corpus", default=None, help="folder of .mtx/.mtx.gz files")
    p.add_argument("--only", action="append", help="corpus matrix names (stems) to run")
    p.add_argument("--large", action="store_true", help="the four large classes")
    p.add_argument("--large-scale", type=float, default=1.0)
    p.add_argument("--baseline", default=str(REPO / "perf_carry" / "baseline"))
    p.add_argument("--dtype", default="f32", choices=["f32", "f64"])
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--max-copies", type=int, default=8)
    p.add_argument("--budget-s", type=float, default=300.0)
    args = p.parse_args()

    import cupy as cp

    runner = Runner(cp, args)
    doc: dict[str, Any] = {"device": runner.device.name, "sm_count": runner.device.sm_count,
                           "dtype": runner.dtype, "copy_GBps": copy_gbps(cp, runner.timer),
                           "matrices": []}
    print(f"device {doc['device']}, copy {doc['copy_GBps']:.0f} GB/s", flush=True)
    out = Path(args.out)

    def save() -> None:
        doc["elapsed_s"] = round(time.perf_counter() - runner.started, 1)
        out.write_text(json.dumps(doc, indent=1))

    if args.large:
        from teaal_loops.bench import generate

        for name, gen, base in LARGE:
            if runner.over_budget():
                break
            opts = dict(base)
            if args.large_scale != 1.0:
                for key in ("rows", "nnz"):
                    if key in opts:
                        opts[key] = max(1024, int(opts[key] * args.large_scale))
                if "scale" in opts:
                    opts["scale"] = max(10, round(23 + math.log2(args.large_scale)))
            t0 = time.perf_counter()
            make: Any = generate.GENERATORS[gen]
            indptr, indices, data = make(cp, seed=1, dtype=runner.dtype, **opts)
            n = len(indptr) - 1
            print(f"[{name} generated in {time.perf_counter() - t0:.1f} s]", flush=True)
            doc["matrices"].append(runner.run_matrix(
                name, indptr, indices, data, (n, n),
                [v for v in large_variants() if not v.small_only], max(10, args.reps // 2)))
            del indptr, indices, data
            cp.get_default_memory_pool().free_all_blocks()
            save()
    if args.corpus:
        files = sorted(Path(args.corpus).glob("*.mtx*"))
        for path in files:
            stem = path.name.split(".mtx")[0]
            if args.only and stem not in args.only:
                continue
            if runner.over_budget():
                doc["incomplete"] = True
                break
            A = load_corpus(path, 0)
            indptr = cp.asarray(A.indptr.astype(np.int32))
            indices = cp.asarray(A.indices.astype(np.int32))
            data = cp.asarray(A.data.astype(runner.dtype))
            doc["matrices"].append(runner.run_matrix(
                stem, indptr, indices, data, (int(A.shape[0]), int(A.shape[1])),
                [v for v in corpus_variants() if not v.large_only], args.reps))
            save()
    save()
    summarize(doc)
    return 0


def summarize(doc: dict[str, Any]) -> None:
    """Best variant per matrix: device time and as-called time against cuSPARSE."""
    print("\nmatrix                     cuS call  cuS kern | best(kernel)              kern"
          "   x_kern | best(call)                call  x_call")
    for m in doc["matrices"]:
        good = {k: v for k, v in m["variants"].items()
                if "kernel_us" in v and v["mismatches"] == 0 and not k.startswith(("OLD", "PREV"))}
        if not good:
            print(f"{m['matrix']:26s} no valid variant")
            continue
        bk = min(good, key=lambda k: good[k]["kernel_us"])
        bc = min(good, key=lambda k: good[k]["call_us"])
        c = m["cusparse"]
        print(f"{m['matrix'][:26]:26s} {c['call_us']:8.1f} {c['kernel_us']:8.1f} | {bk[:24]:24s} "
              f"{good[bk]['kernel_us']:7.1f} {c['kernel_us'] / good[bk]['kernel_us']:6.2f} | "
              f"{bc[:24]:24s} {good[bc]['call_us']:7.1f} {c['call_us'] / good[bc]['call_us']:6.2f}")


if __name__ == "__main__":
    sys.exit(main())
