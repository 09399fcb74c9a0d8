"""Time every library spec's kernel against cuSPARSE on synthetic matrices; write JSON.

    PYTHONPATH=. python3 scripts/bench_spmv.py --out bench.json \
        --synthetic uniform:rows=1000000,nnz=10000000,seed=1 --dtype f32 --repeat 50

Each kernel: prepared once (matrix uploaded and validated), checked against the float64
reference, then timed with CUDA events (median of --repeat launches after warm-up; outputs
re-zeroed between launches where the schedule accumulates). cuSPARSE is ``cupyx csr @ x``
(its allocation of y included, as a user would call it). Bandwidth counts the compulsory bytes
of CSR SpMV: nnz*(value+index) + (rows+1)*offset + cols*value + rows*value.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_MATRICES = [
    "uniform:rows=1000000,nnz=10000000,seed=1",
    "rmat:rows=1048576,nnz=10000000,seed=2",
    "banded:rows=2000000,nnz=40000000,seed=3",
    "longrows:rows=100000,nnz=10000000,seed=4",
]
SPECS = ["thread_mapped", "group_mapped", "group_mapped_block", "work_oriented", "merge_path"]
# (label, spec, parameters): the library specs with their defaults, plus chunk-size variants
KERNELS: list[tuple[str, str, dict[str, int]]] = [(s, s, {}) for s in SPECS] + [
    ("work_oriented_w8", "work_oriented", {"WORK_PER_THREAD": 8}),
    ("merge_path_i8", "merge_path", {"ITEMS_PER_THREAD": 8}),
    ("merge_path_i4", "merge_path", {"ITEMS_PER_THREAD": 4}),
    ("merge_path_i16", "merge_path", {"ITEMS_PER_THREAD": 16}),
]


def copy_bandwidth(cupy: Any, timing: Any, nbytes: int = 2**30) -> float:
    """Device-to-device copy, GB/s counting bytes read plus written."""
    src = cupy.ones(nbytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    times = timing.time_callable(lambda: cupy.copyto(dst, src), repeat=20)
    return 2 * nbytes / (timing.median(times) * 1e6)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--synthetic", action="append", help="matrix spec (repeatable)")
    p.add_argument("--kernel", action="append", help="kernel labels (default: all of KERNELS)")
    p.add_argument("--dtype", default="f32", choices=["f32", "f64"])
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--out", default="bench_spmv.json")
    args = p.parse_args()

    import cupy
    import cupyx.scipy.sparse as csp

    import teaal_loops.runtime as rt
    from teaal_loops import matrix
    from teaal_loops.runtime import timing, validation

    dtype = {"f32": "float32", "f64": "float64"}[args.dtype]
    dev = rt.device_info()
    results: dict[str, Any] = {
        "device": dev.name,
        "sm_count": dev.sm_count,
        "dtype": dtype,
        "repeat": args.repeat,
        "copy_GBps": round(copy_bandwidth(cupy, timing), 1),
        "matrices": [],
    }
    print(f"device {dev.name}, copy {results['copy_GBps']} GB/s", flush=True)
    for text in args.synthetic or DEFAULT_MATRICES:
        t0 = time.time()
        A = matrix.synthetic_from_string(text)
        rows, cols = A.shape
        x = validation.random_vector(cols, dtype, 1)
        ref = validation.reference(A, x)
        vb = 4 if dtype == "float32" else 8
        entry: dict[str, Any] = {"matrix": text, "rows": rows, "cols": cols, "nnz": int(A.nnz)}
        Ad = csp.csr_matrix(A.astype(dtype))
        xd = cupy.asarray(x)
        cus = timing.median(timing.time_callable(lambda Ad=Ad, xd=xd: Ad @ xd, repeat=args.repeat))
        entry["cusparse_ms"] = cus
        entry["kernels"] = {}
        print(f"{text}: {rows}x{cols} nnz={A.nnz} (built in {time.time() - t0:.1f}s) "
              f"cuSPARSE {cus:.4f} ms", flush=True)
        for name, spec, params in KERNELS:
            if args.kernel and name not in args.kernel:
                continue
            k = rt.compile(REPO / "specs" / f"{spec}.yaml", dtype=dtype, params=params)
            prepared = k.prepare(A)
            xk = k.vector(prepared, x)
            y = k(prepared, xk)
            errors = validation.count_errors(y.get(), ref)
            ms = timing.median(timing.time_launches(k, prepared, xk, y, repeat=args.repeat))
            ob = prepared.bound.index_bits // 8
            compulsory = A.nnz * (vb + 4) + (rows + 1) * ob + cols * vb + rows * vb
            gbps = compulsory / (ms * 1e6)
            entry["kernels"][name] = {
                "ms": ms,
                "GBps": round(gbps, 1),
                "speedup_vs_cusparse": round(cus / ms, 3),
                "errors": errors,
                "launch": [prepared.grid[0], prepared.block[0]],
                "params": dict(prepared.bound.params),
                "work_per_thread": prepared.bound.work_per_thread,
            }
            print(f"  {name:20s} {ms:9.4f} ms {gbps:8.1f} GB/s  x{cus / ms:6.2f} vs cuSPARSE  "
                  f"errors={errors}", flush=True)
            del prepared, xk, y
        results["matrices"].append(entry)
        del Ad, xd
        cupy.get_default_memory_pool().free_all_blocks()
    Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
