"""The L2 rates that the limit model divides gathers by (:mod:`teaal_loops.matrix.limit_model`).

:func:`l2_bandwidth`, the read bandwidth: a kernel reads a buffer small enough to stay in L2
(8 MiB, well under the H100's 50 MiB and the H200's 60 MiB) over and over, 16-byte loads,
every thread summing what it reads so the loads cannot be removed; after a warm-up pass the
DRAM is idle and the time is L2's. Bytes read over the median time (CUDA events, back-to-back
repetitions) is the figure.

:func:`gather_curve`, random one-sector gathers by buffer size: every thread gathers 4-byte
elements at random positions of a buffer of S bytes (positions from an xorshift hash in
registers, so that no index array competes for the caches, as an SpMV's x gathers do), S from
1 to 128 MiB. Gathers (one 32-byte sector each) over the median time, as GB/s of sectors. L2
serves scattered sectors more slowly than it streams, and more slowly again once the buffer
outgrows the part of L2 that holds it (the curve's knee).
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

GATHER_SOURCE = r"""
extern "C" __global__ void teaal_gather_probe(const float* __restrict__ buf, unsigned mask,
                                              int per_thread, float* __restrict__ sink) {
  unsigned h = (blockIdx.x * blockDim.x + threadIdx.x) * 2654435761u + 12345u;
  float acc = 0.f;
  #pragma unroll 8
  for (int i = 0; i < per_thread; ++i) {
    h ^= h << 13; h ^= h >> 17; h ^= h << 5;  // xorshift32: a new position every gather
    acc += __ldg(buf + (h & mask));
  }
  if (acc == 12345.678f) sink[0] = acc;  // never true for the probe's data; keeps the loads
}
"""
GATHER_SIZES = tuple(1 << (20 + k) for k in range(8))  # 1 MiB .. 128 MiB
GATHER_BLOCKS_PER_SM = 16
GATHERS_PER_THREAD = 256


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


def gather_curve(cupy: Any, timer: Any, *, reps: int = 10,
                 sizes: tuple[int, ...] = GATHER_SIZES) -> dict[str, Any]:
    """GB/s of random 32-byte sector gathers from buffers of ``sizes`` bytes (powers of two),
    as ``{"curve": [[bytes, gbps], ...], ...}`` with the settings that produced it."""
    module = cupy.RawModule(code=GATHER_SOURCE)
    kernel = module.get_function("teaal_gather_probe")
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    grid, block = (sms * GATHER_BLOCKS_PER_SM,), (256,)
    gathers = grid[0] * block[0] * GATHERS_PER_THREAD
    sink = cupy.zeros(1, dtype=cupy.float32)
    curve = []
    for size in sizes:
        n = size // 4
        if n & (n - 1):
            raise ValueError(f"gather probe: {size} bytes is not a power of two")
        buf = cupy.ones(n, dtype=cupy.float32)
        args = (buf, cupy.uint32(n - 1), cupy.int32(GATHERS_PER_THREAD), sink)

        def run(_: int, args: Any = args) -> None:
            kernel(grid, block, args)

        run(0)
        samples = timer.queued(run, reps)
        curve.append([size, gathers * 32 / (samples.median * 1e-3) / 1e9])
        del buf
    return {
        "method": "random 4-byte __ldg gathers (xorshift positions, no index array), one "
                  "32-byte sector each, from buffers of each size",
        "gathers": gathers,
        "curve": curve,
    }
