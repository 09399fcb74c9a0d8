"""Probe: SpMM over 2-D tiles, row blocks by column panels, each row block's Z rows summed in
shared memory (#13, the random-access classes' 2x target).

At N >= 32 the random-access classes are DRAM-bound on B's rows: each nonzero gathers a row of
B, and with B twice the L2 fewer than a fifth of the L2's reads hit (ncu: 1.8 GB read where A
and B are 262 MB). Here a block owns RB rows, keeps their N sums in shared memory, and walks its
nonzeros panel by panel (P column panels); the blocks resident together move through the panels
at about the same pace, so the slice of B they gather from is a panel, not all of B. The
nonzeros are reordered once per matrix (row block, panel, row, column). Hand-written, timed
beside the library's best work-oriented build and the best cuSPARSE SpMM, one process."""
import json, os, statistics
import numpy as np
import cupy as cp
import teaal_loops
from teaal_loops.bench.timing import Timer
from teaal_loops.bench.cusparse.spmm import SpMM
import coop_probe

OUT = os.environ.get("OUT", "/tmp")
MATS = os.environ.get("PMATS", "uniform-r20,rmat-s20,longrows-r20,banded-r20").split(",")
N = int(os.environ.get("PWIDTH", "32"))
REPS = int(os.environ.get("PREPS", "20"))
RBS = [int(v) for v in os.environ.get("PRBS", "64,128,256").split(",")]
PANELS = [int(v) for v in os.environ.get("PPANELS", "1,2,4,8,16").split(",")]

SOURCE = r"""
// Block b owns rows [b*RB, b*RB + RB); tile t = b * P + p holds its nonzeros in column panel p,
// positions [tile_ptr[t], tile_ptr[t+1]) of (trow: row within the block, tcol, tval).
// Threads: groups of L = N/4 lanes, each lane one float4 of a row of B and of Z.
template <int N, int RB, int THREADS>
__device__ __forceinline__ void tiles2d(const long long* __restrict__ tile_ptr,
    const unsigned short* __restrict__ trow, const int* __restrict__ tcol,
    const float* __restrict__ tval, const float4* __restrict__ B, float4* __restrict__ Z,
    int rows, int panels) {
  constexpr int L = N / 4;
  constexpr int G = THREADS / L;  // nonzeros a pass
  __shared__ float4 acc[RB * L];
  for (int i = threadIdx.x; i < RB * L; i += THREADS) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  __syncthreads();
  const int g = threadIdx.x / L, q = threadIdx.x % L;
  float* accf = reinterpret_cast<float*>(acc);
  const long long t0 = (long long)blockIdx.x * panels;
  for (int p = 0; p < panels; ++p) {
    const long long begin = tile_ptr[t0 + p], end = tile_ptr[t0 + p + 1];
    #pragma unroll 4
    for (long long i = begin + g; i < end; i += G) {
      const int r = trow[i];
      const float v = tval[i];
      const float4 b = __ldg(B + (long long)tcol[i] * L + q);
      float* a = accf + (r * L + q) * 4;
      atomicAdd(a + 0, v * b.x); atomicAdd(a + 1, v * b.y);
      atomicAdd(a + 2, v * b.z); atomicAdd(a + 3, v * b.w);
    }
  }
  __syncthreads();
  const long long row0 = (long long)blockIdx.x * RB;
  const int mine = rows - row0 < RB ? (int)(rows - row0) : RB;
  for (int i = threadIdx.x; i < mine * L; i += THREADS) Z[row0 * L + i] = acc[i];
}
"""


def kernel_source():
    src = SOURCE
    for rb in RBS:
        src += (f'extern "C" __global__ void __launch_bounds__(256) tiles2d_{rb}('
                "const long long* tile_ptr, const unsigned short* trow, const int* tcol, "
                "const float* tval, const float4* B, float4* Z, int rows, int panels) {"
                f" tiles2d<{N}, {rb}, 256>(tile_ptr, trow, tcol, tval, B, Z, rows, panels); }}\n")
    return src


def tiles(A, rb, panels):
    """The nonzeros reordered by (row block, panel, row, column), and the tiles' offsets."""
    rows, cols = A.shape
    row = cp.repeat(cp.arange(rows, dtype=cp.int64), cp.diff(A.indptr).astype(cp.int64))
    col = A.indices.astype(cp.int64)
    width = -(-cols // panels)
    tile = (row // rb) * panels + col // width
    order = cp.argsort((tile * rows + row) * cols + col)  # unique keys: columns stay sorted
    ntiles = -(-rows // rb) * panels
    counts = cp.bincount(tile, minlength=ntiles)
    ptr = cp.zeros(ntiles + 1, dtype=cp.int64)
    ptr[1:] = cp.cumsum(counts)
    return (ptr, (row[order] % rb).astype(cp.uint16), A.indices[order].astype(cp.int32),
            A.data[order].astype(cp.float32))


def load(name):
    if name == "banded-r20":
        from teaal_loops.bench import generate
        indptr, indices, data = generate.banded(cp, rows=2**20, width=16, dtype="float32")
        import cupyx.scipy.sparse as cps
        return cps.csr_matrix((data, indices, indptr), shape=(2**20, 2**20))
    return coop_probe.load(name)


def main():
    timer = Timer(cp)
    module = cp.RawModule(code=kernel_source(), options=("--std=c++17",))
    out = []
    for name in MATS:
        A = load(name)
        A.sort_indices()
        rows, cols = A.shape
        rng = np.random.default_rng(1)
        B = cp.asarray(rng.standard_normal((cols, N)).astype(np.float32))
        ref = A.astype(cp.float64) @ B.astype(cp.float64)
        bound = float((abs(A).astype(cp.float64) @ abs(B).astype(cp.float64)).max())
        Z = cp.empty((rows, N), dtype=cp.float32)
        base = SpMM(A, N, B=B, C=Z)
        base.choose(timer)
        ops = {"cusparse": lambda i: base.launch(B, Z)}
        for spec in ("nonzero_split_vec", "lanes_over_n_vec"):
            for params in ({"NNZ_PER_WORKER": 48}, {"NNZ_PER_WORKER": 128}) if spec == "nonzero_split_vec" else ({},):
                k = teaal_loops.compile(f"specs/spmm/{spec}.yaml", dtype="float32", params=params)
                launch = k.bind_dense(k.prepare(A), (B,), Z)
                ops[f"library {spec}{params or ''}"] = (lambda i, launch=launch: launch.launch())
        keep = []
        for rb in RBS:
            fn = module.get_function(f"tiles2d_{rb}")
            for panels in PANELS:
                arrays = tiles(A, rb, panels)
                keep.append(arrays)
                grid = -(-rows // rb)
                args = arrays + (B, Z, np.int32(rows), np.int32(panels))
                ops[f"tiles RB{rb} P{panels}"] = (lambda i, fn=fn, grid=grid, args=args:
                                                  fn((grid,), (256,), args))
        times = {}
        for label, op in ops.items():
            Z.fill(np.nan)
            op(0)
            cp.cuda.Device().synchronize()
            err = float(cp.abs(Z.astype(cp.float64) - ref).max()) / bound
            times[label] = [] if err < 1e-5 else None
            if times[label] is None:
                print(name, label, "WRONG", err, flush=True)
        for _round in range(3):
            for label, op in ops.items():
                if times[label] is not None:
                    times[label].append(timer.queued(op, REPS).median * 1e3)
        med = {k: statistics.median(v) for k, v in times.items() if v}
        cu = med["cusparse"]
        print(f"{name} N={N} cusparse {cu:.1f} us", flush=True)
        for k, v in sorted(med.items(), key=lambda kv: kv[1]):
            print(f"    {k:40s} {v:9.1f}  {cu / v:.3f}x", flush=True)
        out.append({"matrix": name, "n": N, "rows": rows, "nnz": int(A.nnz), "us": med})
        del base, keep
    with open(os.path.join(OUT, f"tiles2d_probe_n{N}.json"), "w") as f:
        json.dump({"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "cases": out}, f, indent=1)


if __name__ == "__main__":
    main()
