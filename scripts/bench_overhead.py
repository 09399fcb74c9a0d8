"""Host-side cost of one SpMV call on a small matrix: our lean paths against cupyx (cuSPARSE).

    PYTHONPATH=. python3 scripts/bench_overhead.py --matrix path/to/small.mtx.gz --out o.json

Wall-clock microseconds per call, averaged over --calls back-to-back calls followed by one
synchronisation (what a Python loop calling SpMV repeatedly pays): ``kernel.launch`` on a
prepared matrix and preallocated vectors (the raw launch), ``kernel(prepared, x)`` (allocates
y, zeroes it where needed), and ``cupyx csr @ x``. Also the GPU time of the kernel alone.
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


def per_call_us(cupy: Any, fn: Any, calls: int) -> float:
    for _ in range(10):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--matrix", default=None, help="Matrix Market file (default: synthetic)")
    p.add_argument("--synthetic", default="uniform:rows=10000,nnz=100000,seed=1")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--out", default="bench_overhead.json")
    args = p.parse_args()

    import cupy
    import cupyx.scipy.sparse as csp

    import teaal_loops.runtime as rt
    from teaal_loops import matrix
    from teaal_loops.runtime import timing, validation

    A = matrix.read_matrix_market(args.matrix) if args.matrix else matrix.synthetic_from_string(
        args.synthetic
    )
    x = validation.random_vector(A.shape[1], "float32", 1)
    xd = cupy.asarray(x)
    Ad = csp.csr_matrix(A.astype("float32"))
    out: dict[str, Any] = {"matrix": args.matrix or args.synthetic, "nnz": int(A.nnz),
                           "cusparse_call_us": per_call_us(cupy, lambda: Ad @ xd, args.calls),
                           "kernels": {}}
    print(f"{out['matrix']} nnz={A.nnz}: cupyx csr @ x {out['cusparse_call_us']:.1f} us/call")
    for name in ("thread_mapped", "group_mapped", "work_oriented", "merge_path"):
        k = rt.compile(REPO / "specs" / f"{name}.yaml", dtype="float32")
        prepared = k.prepare(A)
        y = k.new_output(prepared)
        raw = per_call_us(cupy, lambda k=k, pr=prepared, y=y: k.launch(pr, xd, y), args.calls)
        full = per_call_us(cupy, lambda k=k, pr=prepared: k(pr, xd), args.calls)
        gpu = timing.median(timing.time_launches(k, prepared, xd, y, repeat=200))
        out["kernels"][name] = {"launch_us": raw, "call_us": full, "gpu_us": gpu * 1e3}
        print(f"  {name:15s} launch {raw:6.1f} us/call  kernel(prepared, x) {full:6.1f} us/call"
              f"  GPU {gpu * 1e3:6.1f} us")
    Path(args.out).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
