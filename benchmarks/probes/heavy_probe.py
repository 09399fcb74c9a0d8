"""Probe (#13, #14, session 26): a matrix's heavy rows cut into column panels, walked panel by
panel, against the best cuSPARSE (descriptors once) and the library's best on the whole matrix.

On the long-row classes both libraries re-read the dense operand once per long row: SpMV's
`longrows` (2^22 rows, 90% of 2^27 nonzeros in 128 rows) reads x's sectors from L2 about 128
times over (BENCHMARKS.md: L2-bound, ncu), and SpMM's `longrows-r20` at N = 32 gathers each
128-byte row of B (128 MiB, more than the L2) from DRAM about 14 times. Here rows of at least
PT nonzeros ("heavy") are stored apart, cut into panels of PW columns; tile (panel p, heavy
row h) is p * H + h, so the tiles of one panel are neighbours and run together: the block
that walks them (one warp a tile, PTPB threads a block) is meant to find the panel's slice of
x or B in L1, the slice leaving DRAM once (not profiled). Each tile's sum is added atomically into its row. The
other rows ("light") stay CSR and run through the library's own kernels (the best of a few
specs, timed alone); the heavy kernel runs after them (they store 0 into the heavy rows, which
are empty in the light matrix). Both outputs are checked against float64.

Hand-written kernels (float32), one process, 3 rounds each a median of PREPS launches queued
behind a spin. Environment: PMATS (SpMV: longrows, rmat-s23; SpMM: longrows-r20, rmat-s20,
uniform-r20, at PWIDTHS), PT, PW (SpMV panel widths), PWN (SpMM panel widths), PTPB.
Output: $OUT/heavy_probe.json.
"""
import json
import os
import statistics
import sys

import cupy as cp
import cupyx.scipy.sparse as cps
import numpy as np

import teaal_loops
from teaal_loops.bench.cusparse.spmv import SpMV
from teaal_loops.bench.timing import Timer

sys.path.insert(0, os.path.dirname(__file__))
import coop_probe  # noqa: E402  (beside this file)

OUT = os.environ.get("OUT", "/tmp")
SPMV_MATS = [m for m in os.environ.get("PSPMV", "longrows,rmat-s23").split(",") if m]
SPMM_MATS = [m for m in os.environ.get("PSPMM", "longrows-r20,rmat-s20").split(",") if m]
WIDTHS = [int(w) for w in os.environ.get("PWIDTHS", "32,128").split(",")]
THRESHOLD = int(os.environ.get("PT", "4096"))
PANELS_SPMV = [int(w) for w in os.environ.get("PW", "512,2048,8192").split(",")]
PANELS_SPMM = [int(w) for w in os.environ.get("PWN", "256,1024,4096").split(",")]
TPBS = [int(t) for t in os.environ.get("PTPB", "256,512").split(",")]
REPS = int(os.environ.get("PREPS", "20"))

SOURCE = r"""
// SpMV: warp w walks tile w (panel-major: tile = p * H + h), lanes striding its atoms.
extern "C" __global__ void heavy_spmv(const long long* __restrict__ tptr,
    const int* __restrict__ col, const float* __restrict__ val, const float* __restrict__ x,
    float* __restrict__ y, const int* __restrict__ hrow, int H, long long tiles) {
  const long long t = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (t >= tiles) return;
  const long long b = tptr[t], e = tptr[t + 1];
  if (b == e) return;
  float sum = 0.f;
  long long a = b + lane;
  for (; a + 96 < e; a += 128) {
    const int c0 = __ldcs(col + a), c1 = __ldcs(col + a + 32), c2 = __ldcs(col + a + 64),
              c3 = __ldcs(col + a + 96);
    const float v0 = __ldcs(val + a), v1 = __ldcs(val + a + 32), v2 = __ldcs(val + a + 64),
                v3 = __ldcs(val + a + 96);
    const float x0 = __ldg(x + c0), x1 = __ldg(x + c1), x2 = __ldg(x + c2), x3 = __ldg(x + c3);
    sum += v0 * x0; sum += v1 * x1; sum += v2 * x2; sum += v3 * x3;
  }
  for (; a < e; a += 32) sum += __ldcs(val + a) * __ldg(x + __ldcs(col + a));
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, o);
  if (lane == 0) atomicAdd(y + hrow[t % H], sum);
}

// SpMM, B and Z row-major with NQ float4s a row: warp w walks tile w; S = 32 / NQ atoms a
// step (sub-group s takes atoms b + s, b + s + S, ...), lane q of a sub-group float4 q.
template <int NQ>
__device__ __forceinline__ void heavy_spmm(const long long* __restrict__ tptr,
    const int* __restrict__ col, const float* __restrict__ val, const float4* __restrict__ B,
    float4* __restrict__ Z, const int* __restrict__ hrow, int H, long long tiles) {
  constexpr int S = NQ >= 32 ? 1 : 32 / NQ;
  constexpr int R = NQ >= 32 ? NQ / 32 : 1;  // float4s a lane
  const long long t = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (t >= tiles) return;
  const long long b = tptr[t], e = tptr[t + 1];
  if (b == e) return;
  const int sub = lane / (32 / S);
  const int q = lane % (32 / S);
  float4 acc[R];
  #pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
  long long a = b + sub;
  for (; a + 3 * S < e; a += 4 * S) {
    int c[4]; float v[4]; float4 bv[4][R];
    #pragma unroll
    for (int u = 0; u < 4; ++u) { c[u] = __ldg(col + a + u * S); v[u] = __ldg(val + a + u * S); }
    #pragma unroll
    for (int u = 0; u < 4; ++u) {
      #pragma unroll
      for (int r = 0; r < R; ++r) bv[u][r] = __ldg(B + (long long)c[u] * NQ + q + r * 32);
    }
    #pragma unroll
    for (int u = 0; u < 4; ++u) {
      #pragma unroll
      for (int r = 0; r < R; ++r) {
        acc[r].x += v[u] * bv[u][r].x; acc[r].y += v[u] * bv[u][r].y;
        acc[r].z += v[u] * bv[u][r].z; acc[r].w += v[u] * bv[u][r].w;
      }
    }
  }
  for (; a < e; a += S) {
    const int c = __ldg(col + a); const float v = __ldg(val + a);
    #pragma unroll
    for (int r = 0; r < R; ++r) {
      const float4 bv = __ldg(B + (long long)c * NQ + q + r * 32);
      acc[r].x += v * bv.x; acc[r].y += v * bv.y; acc[r].z += v * bv.z; acc[r].w += v * bv.w;
    }
  }
  #pragma unroll
  for (int o = 32 / S; o < 32; o <<= 1) {
    #pragma unroll
    for (int r = 0; r < R; ++r) {
      acc[r].x += __shfl_xor_sync(0xffffffffu, acc[r].x, o);
      acc[r].y += __shfl_xor_sync(0xffffffffu, acc[r].y, o);
      acc[r].z += __shfl_xor_sync(0xffffffffu, acc[r].z, o);
      acc[r].w += __shfl_xor_sync(0xffffffffu, acc[r].w, o);
    }
  }
  if (sub == 0) {
    float4* z = Z + (long long)hrow[t % H] * NQ + q;
    #pragma unroll
    for (int r = 0; r < R; ++r) atomicAdd(z + r * 32, acc[r]);
  }
}
extern "C" __global__ void heavy_spmm_8(const long long* tptr, const int* col, const float* val,
    const float4* B, float4* Z, const int* hrow, int H, long long tiles) {
  heavy_spmm<8>(tptr, col, val, B, Z, hrow, H, tiles);
}
extern "C" __global__ void heavy_spmm_32(const long long* tptr, const int* col, const float* val,
    const float4* B, float4* Z, const int* hrow, int H, long long tiles) {
  heavy_spmm<32>(tptr, col, val, B, Z, hrow, H, tiles);
}
extern "C" __global__ void heavy_spmm_2(const long long* tptr, const int* col, const float* val,
    const float4* B, float4* Z, const int* hrow, int H, long long tiles) {
  heavy_spmm<2>(tptr, col, val, B, Z, hrow, H, tiles);
}
"""


def split(A, threshold):
    """The light rows as CSR of A's shape (heavy rows empty), and the heavy rows' ids and
    nonzeros (row index among the heavy, column, value), in CSR order."""
    rows = A.shape[0]
    lens = cp.diff(A.indptr).astype(cp.int64)
    is_heavy = lens >= threshold
    entry_row = cp.repeat(cp.arange(rows, dtype=cp.int64), lens)
    keep = ~is_heavy[entry_row]
    light_lens = cp.where(is_heavy, 0, lens)
    indptr = cp.concatenate([cp.zeros(1, cp.int64), cp.cumsum(light_lens)]).astype(A.indptr.dtype)
    light = cps.csr_matrix((A.data[keep], A.indices[keep], indptr), shape=A.shape)
    heavy_rows = cp.nonzero(is_heavy)[0].astype(cp.int32)
    index_of = cp.full(rows, -1, dtype=cp.int64)
    index_of[heavy_rows] = cp.arange(len(heavy_rows))
    hsel = ~keep
    return light, heavy_rows, index_of[entry_row[hsel]], A.indices[hsel], A.data[hsel]


def panel_tiles(heavy_rows, hidx, cols_h, vals_h, width, ncols):
    """Tiles (panel p, heavy row h) = p * H + h: offsets, and the nonzeros in tile order."""
    H = len(heavy_rows)
    panels = -(-ncols // width)
    key = (cols_h.astype(cp.int64) // width) * H + hidx
    order = cp.argsort(key, kind="stable")
    counts = cp.bincount(key, minlength=panels * H)
    tptr = cp.concatenate([cp.zeros(1, cp.int64), cp.cumsum(counts)])
    return tptr, cols_h[order].astype(cp.int32), vals_h[order], panels * H


def timed(timer, ops):
    times = {k: [] for k in ops}
    for _round in range(3):
        for label, op in ops.items():
            times[label].append(timer.queued(lambda i, op=op: op(), REPS).median * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def report(title, med):
    """Every timing of a case, then cuSPARSE against the library's best on the whole matrix
    and against the best light kernel plus the best heavy one."""
    best = {part: min(v for k, v in med.items() if k.startswith(part))
            for part in ("light", "whole", "heavy")}
    cu = med["cusparse"]
    split = best["light"] + best["heavy"]
    print(f"== {title}", flush=True)
    for k, v in sorted(med.items(), key=lambda kv: kv[1]):
        print(f"   {k:40s} {v:9.1f} us", flush=True)
    print(f"   cusparse {cu:.1f}  library whole {best['whole']:.1f} ({cu / best['whole']:.3f}x)  "
          f"light {best['light']:.1f} + heavy {best['heavy']:.1f} = {split:.1f} "
          f"({cu / split:.3f}x)", flush=True)


def spmv_case(module, timer, name):
    A = coop_probe.load(name)
    A.sum_duplicates()
    rows, cols = A.shape
    x = cp.asarray(np.random.default_rng(1).standard_normal(cols).astype(np.float32))
    ref = A.astype(cp.float64) @ x.astype(cp.float64)
    bound = float((abs(A).astype(cp.float64) @ abs(x).astype(cp.float64)).max())
    base = SpMV(A, x=x)
    base.choose(timer)
    y = cp.empty(rows, dtype=cp.float32)
    light, heavy_rows, hidx, hc, hv = split(A, THRESHOLD)
    H = len(heavy_rows)
    info = {"rows": rows, "nnz": int(A.nnz), "heavy_rows": H, "heavy_nnz": int(len(hc))}
    whole, lights = {}, {}
    for spec, params in (("merge_path", {}), ("merge_path", {"ITEMS_PER_THREAD": 32}),
                         ("group_mapped", {"BLOCK_SIZE": 8}), ("group_mapped", {"BLOCK_SIZE": 4})):
        k = teaal_loops.compile(f"specs/{spec}.yaml", dtype="float32", params=params)
        label = spec + "".join(f"[{v}]" for v in params.values())
        pw, pl = k.prepare(A), k.prepare(light)
        whole[label] = (lambda k=k, p=pw: k.launch_into(p, x, y))
        lights[label] = (lambda k=k, p=pl: k.launch_into(p, x, y))
    ops = {"cusparse": lambda: base.launch(x, base.y)}
    ops.update({f"whole {k}": v for k, v in whole.items()})
    ops.update({f"light {k}": v for k, v in lights.items()})
    fn = module.get_function("heavy_spmv")
    for width in PANELS_SPMV:
        tptr, tc, tv, tiles = panel_tiles(heavy_rows, hidx, hc, hv, width, cols)
        for tpb in TPBS:
            grid = (int(-(-tiles * 32 // tpb)),)
            args = (tptr, tc, tv, x, y, heavy_rows, np.int32(H), np.int64(tiles))
            ops[f"heavy W{width} T{tpb}"] = (lambda g=grid, t=tpb, a=args: fn(g, (t,), a))
            # checked: the light rows by merge_path, then the heavy tiles
            y.fill(np.nan)
            lights["merge_path"]()
            fn(grid, (tpb,), args)
            err = float(cp.abs(y.astype(cp.float64) - ref).max()) / bound
            info[f"err W{width} T{tpb}"] = err
            assert err < 1e-5, (name, width, tpb, err)
    med = timed(timer, ops)
    report(f"SpMV {name} rows={rows} nnz={A.nnz} heavy rows {H} ({info['heavy_nnz']} nnz) "
           f"{base.describe()}", med)
    return {"form": "spmv", "matrix": name, "cusparse": base.describe(), "info": info, "us": med}


def spmm_case(module, timer, name, n):
    A = coop_probe.load(name)
    A.sum_duplicates()
    rows, cols = A.shape
    B, ref, bound, Z, base = coop_probe.dense_case(A, n, timer)
    light, heavy_rows, hidx, hc, hv = split(A, THRESHOLD)
    H = len(heavy_rows)
    info = {"rows": rows, "nnz": int(A.nnz), "heavy_rows": H, "heavy_nnz": int(len(hc))}
    ops = {"cusparse": lambda: base.launch(B, Z)}
    lights = {}
    for spec, params in (("nonzero_split_vec", {"NNZ_PER_WORKER": 128}),
                         ("nonzero_split_vec", {"NNZ_PER_WORKER": 48}),
                         ("group_lanes_vec", {"ROW_LANES": 1}),
                         ("group_lanes_vec", {"ROW_LANES": 4})):
        k = teaal_loops.compile(f"specs/spmm/{spec}.yaml", dtype="float32", params=params)
        label = spec + "".join(f"[{v}]" for v in params.values())
        ops[f"whole {label}"] = k.bind_dense(k.prepare(A), (B,), Z).launch
        lights[label] = k.bind_dense(k.prepare(light), (B,), Z).launch
        ops[f"light {label}"] = lights[label]
    nq = n // 4
    fn = module.get_function(f"heavy_spmm_{nq}")
    for width in PANELS_SPMM:
        tptr, tc, tv, tiles = panel_tiles(heavy_rows, hidx, hc, hv, width, cols)
        for tpb in TPBS:
            grid = (int(-(-tiles * 32 // tpb)),)
            args = (tptr, tc, tv, B, Z, heavy_rows, np.int32(H), np.int64(tiles))
            ops[f"heavy W{width} T{tpb}"] = (lambda g=grid, t=tpb, a=args: fn(g, (t,), a))
            Z.fill(np.nan)
            next(iter(lights.values()))()
            fn(grid, (tpb,), args)
            err = float(cp.abs(Z.astype(cp.float64) - ref).max()) / bound
            info[f"err W{width} T{tpb}"] = err
            assert err < 1e-5, (name, n, width, tpb, err)
    med = timed(timer, ops)
    report(f"SpMM {name} N={n} rows={rows} nnz={A.nnz} heavy rows {H} ({info['heavy_nnz']} nnz) "
           f"{base.describe()}", med)
    return {"form": "spmm", "matrix": name, "n": n, "cusparse": base.describe(), "info": info,
            "us": med}


def main():
    timer = Timer(cp)
    module = cp.RawModule(code=SOURCE, options=("--std=c++17",))
    cases = []
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    for name in SPMM_MATS:
        for n in WIDTHS:
            cases.append(spmm_case(module, timer, name, n))
            write(dev, cases)
            cp.get_default_memory_pool().free_all_blocks()
    for name in SPMV_MATS:
        cases.append(spmv_case(module, timer, name))
        write(dev, cases)
        cp.get_default_memory_pool().free_all_blocks()


def write(dev, cases):
    with open(os.path.join(OUT, "heavy_probe.json"), "w") as f:
        json.dump({"device": dev, "reps": REPS, "threshold": THRESHOLD, "cases": cases}, f,
                  indent=1)


if __name__ == "__main__":
    main()
