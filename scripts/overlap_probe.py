"""Does a few-block kernel on a second stream run beside a full SpMV, or after it? (GPU)

    python -m scripts.overlap_probe [FAMILY]

The one-GPU stand-in for the distributed product's overlap (docs/distributed.md section 4):
NCCL's kernels are a few blocks. On a side stream, a full-grid copy (the packing) and then an
8- or 32-block copy of 125 MB (the transfer) are queued just before the SpMV of the family
(default: half the 1e9 power-law matrix of BENCHMARKS.md) on the main stream, with the side
stream at default and at the highest priority. Prints each alone, both together, and how much
of the side work the SpMV hid.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from teaal_loops import pipeline
from teaal_loops.distributed.device import TRANSPORT_PRIORITY
from teaal_loops.matrix import rowwise
from teaal_loops.matrix.csr_arrays import CsrArrays
from teaal_loops.runtime import backend

DEFAULT_FAMILY = "powerlaw:rows=31250000,nnz=5.1e8,seed=7"
COPY = r'''
extern "C" __global__ void teaal_probe_copy(const float4* s, float4* d, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) d[i] = s[i];
}'''


def _timed(cupy: Any, main: Any, fn: Callable[[], None], reps: int = 10) -> float:
    fn()
    cupy.cuda.Device().synchronize()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(main)
    for _ in range(reps):
        fn()
    end.record(main)
    end.synchronize()
    return float(cupy.cuda.get_elapsed_time(start, end)) / reps


def main() -> None:
    cupy = backend.cupy_module()
    family = rowwise.parse_family(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_FAMILY)
    began = time.perf_counter()
    indptr, indices, data = rowwise.generate_rows(family, 0, family.rows, np.float32, xp=cupy)
    kernel = pipeline.compile("specs/merge_path.yaml", dtype="float32")
    prepared = kernel.prepare(CsrArrays(indptr, indices, data, (family.rows, family.cols)))
    x = rowwise.operand(cupy, 1, 0, family.cols, np.float32)
    y = cupy.empty(family.rows, np.float32)
    print(f"{family.describe()}: {len(indices)} nonzeros made and prepared in "
          f"{time.perf_counter() - began:.1f} s", flush=True)
    copy = cupy.RawKernel(COPY, "teaal_probe_copy")
    n4 = 125_000_000 // 16
    src = cupy.ones(n4 * 4, np.float32)
    dst = cupy.empty_like(src)
    main_stream = cupy.cuda.get_current_stream()
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]

    def spmv() -> None:
        kernel.launch_into(prepared, x, y)

    for blocks in (8, 32):
        for name, priority in (("default", 0), ("highest", TRANSPORT_PRIORITY)):
            side = cupy.cuda.Stream(non_blocking=True, priority=priority)

            def side_work(side: Any = side, blocks: int = blocks) -> None:
                side.wait_event(main_stream.record())
                with side:
                    copy((sms * 4,), (512,), (src, dst, np.int64(n4 // 4)))  # the packing
                    copy((blocks,), (512,), (src, dst, np.int64(n4)))  # the transfer

            def alone(side: Any = side, work: Callable[[], None] = side_work) -> None:
                work()
                main_stream.wait_event(side.record())

            def both(side: Any = side, work: Callable[[], None] = side_work) -> None:
                work()
                spmv()
                main_stream.wait_event(side.record())

            a = _timed(cupy, main_stream, spmv)
            b = _timed(cupy, main_stream, alone)
            c = _timed(cupy, main_stream, both)
            print(f"blocks={blocks:3d} side priority {name:8s} ({side.priority}): spmv {a:.3f} ms, "
                  f"side {b:.3f} ms, together {c:.3f} ms, hidden {(a + b - c) / b * 100:.0f}% "
                  "of the side work", flush=True)


if __name__ == "__main__":
    main()
