"""The L2 read bandwidth that the limit model divides x's gathers by
(:mod:`teaal_loops.matrix.limit_model`).

A kernel reads a buffer small enough to stay in L2 (8 MiB, well under the H100's 50 MB and the
H200's 60 MB) over and over, 16-byte loads, every thread summing what it reads so the loads
cannot be removed; after a warm-up pass the DRAM is idle and the time is L2's. Bytes read over
the median time (CUDA events, back-to-back repetitions) is the figure.
"""

from __future__ import annotations

from typing import Any

PROBE_SOURCE = r"""
extern "C" __global__ void teaal_l2_probe(const float4* __restrict__ buf, long long n4,
                                          int passes, float* __restrict__ sink) {
  float acc = 0.f;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (int p = 0; p < passes; ++p) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
      const float4 v = __ldcg(buf + i);  // cache-global: served by L2, not L1
      acc += v.x + v.y + v.z + v.w;
    }
  }
  if (acc == 12345.678f) sink[0] = acc;  // never true for the probe's data; keeps the loads
}
"""
BUFFER_BYTES = 8 << 20
PASSES = 64


def l2_bandwidth(cupy: Any, timer: Any, *, reps: int = 10) -> dict[str, Any]:
    """GB/s of L2 reads (bytes read over time), with the settings that produced it."""
    module = cupy.RawModule(code=PROBE_SOURCE)
    kernel = module.get_function("teaal_l2_probe")
    n4 = BUFFER_BYTES // 16
    buf = cupy.ones(n4 * 4, dtype=cupy.float32)
    sink = cupy.zeros(1, dtype=cupy.float32)
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    grid, block = (sms * 8,), (256,)
    args = (buf, cupy.int64(n4), cupy.int32(PASSES), sink)

    def run(_: int) -> None:
        kernel(grid, block, args)

    run(0)
    samples = timer.queued(run, reps)
    moved = BUFFER_BYTES * PASSES
    return {
        "buffer_bytes": BUFFER_BYTES,
        "passes": PASSES,
        "bytes_read": moved,
        "method": "16-byte __ldcg loads of an L2-resident buffer, summed per thread",
        "median_ms": samples.median,
        "gbps": moved / (samples.median * 1e-3) / 1e9,
    }
