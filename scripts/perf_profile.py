"""Launch one generated kernel on one large synthetic matrix, for a profiler (Nsight Compute).

    ncu --clock-control none -k regex:teaal_spmv --launch-skip 2 --launch-count 1 \
        --metrics dram__bytes_read.sum,gpu__time_duration.sum \
        python3 scripts/perf_profile.py --matrix banded --spec group_mapped --param BLOCK_SIZE=8

The matrix is built on the GPU with :mod:`teaal_loops.bench.generate` (the classes of
scripts/perf_spmv.py); the kernel is launched three times (zeroing y first where the schedule
accumulates), so ``--launch-skip 2`` profiles a warm launch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from perf_spmv import LARGE  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--matrix", required=True, choices=[name for name, _, _ in LARGE])
    p.add_argument("--spec", required=True, help="library spec name, e.g. merge_path")
    p.add_argument("--param", action="append", default=[], help="NAME=VALUE (repeatable)")
    p.add_argument("--block-threads", type=int, default=None)
    p.add_argument("--dtype", default="float32")
    args = p.parse_args()

    import cupy as cp
    import cupyx.scipy.sparse as csp

    import teaal_loops.runtime as rt
    from teaal_loops.bench import generate
    from teaal_loops.lowering import lower
    from teaal_loops.spec import load_spec

    _, gen, opts = next(entry for entry in LARGE if entry[0] == args.matrix)
    make: Any = generate.GENERATORS[gen]
    indptr, indices, data = make(cp, seed=1, dtype=args.dtype, **opts)
    n = len(indptr) - 1
    A = csp.csr_matrix((data, indices, indptr), shape=(n, n), copy=False)
    params = {k: int(v) for k, v in (item.split("=", 1) for item in args.param)}
    schedule = lower(load_spec(str(REPO / "specs" / f"{args.spec}.yaml")), params=params,
                     block_threads=args.block_threads)
    kernel: Any = rt.compile(schedule, dtype=args.dtype)
    prepared = kernel.prepare(A)
    x = (cp.random.RandomState(7).random_sample(n) * 2 - 1).astype(args.dtype)
    y = kernel.new_output(prepared)
    for _ in range(3):
        kernel.zero_output(prepared, y)
        kernel.launch(prepared, x, y)
    cp.cuda.Device().synchronize()
    ref = A @ x
    err = float(cp.abs(y - ref).max())
    print(f"{args.matrix} {args.spec} {params} blocks={prepared.grid[0]} "
          f"threads={prepared.block[0]} max|y-ref|={err:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
