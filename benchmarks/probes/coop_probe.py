"""Probe: SpMM with a whole warp walking one work-oriented chunk together (#13).

Today's work-oriented SpMM (specs/spmm/nonzero_split_vec.yaml) gives each worker of N/4
threads its own chunk; at N = 32 four workers share a warp and end rows at different atoms,
so the warp diverges at every row end (ncu: 18.5 of 32 threads active an instruction on
ego-Twitter). Here the warp's S = 32/L sub-groups of L lanes take neighbouring atoms of the
same row in each step (sub-group s: atoms base + s), each lane R float4s of B's row; at a row's
end the sub-groups' sums meet by shuffles and sub-group 0 stores (atomically where the row is
split across chunks). The warp's atoms' columns and values are loaded 32 at a time, coalesced,
and shared by shuffles. Hand-written, timed beside the library's best work-oriented build and
the best cuSPARSE SpMM (descriptors once), device time behind a spin, one process.
"""
import json, os, statistics
import numpy as np
import cupy as cp
import cupyx.scipy.sparse as cps
import teaal_loops
from teaal_loops.bench.timing import Timer
from teaal_loops.bench.cusparse.spmm import SpMM
from teaal_loops.bench import generate
from teaal_loops.matrix.mmio import read_matrix_market

OUT = os.environ.get("OUT", "/tmp")
MATS = os.environ.get("PMATS", "soc-Slashdot0902,ego-Twitter-undirected,ca-AstroPh-cc1,cit-HepTh,"
                      "email-Enron,bcsstk33,bcsstk13,uniform-r20,rmat-s20,longrows-r20").split(",")
WIDTHS = [int(w) for w in os.environ.get("PWIDTHS", "32,128").split(",")]
REPS = int(os.environ.get("PREPS", "30"))

SOURCE = r"""
template <int L, int R, int AHEAD>
__device__ __forceinline__ void coop(const int* __restrict__ rowptr, const int* __restrict__ col,
    const float* __restrict__ val, const float4* __restrict__ B, float* __restrict__ Z,
    int rows, int nnz, int chunk) {
  constexpr int S = 32 / L;      // atoms a step
  constexpr int Q = L * R;       // float4s in a row of B
  const int lane = threadIdx.x & 31;
  const int sub = lane / L;
  const int q0 = (lane % L) * R;
  const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const long long first64 = warp * chunk;
  if (first64 >= nnz) return;
  const int first = (int)first64;
  const int last = nnz - first < chunk ? nnz : first + chunk;
  // the row holding atom `first`: lane 0 searches, one shuffle shares it
  int found = 0;
  if (lane == 0) {
    int lo = 0, hi = rows - 1;
    while (lo < hi) { int mid = lo + (hi - lo + 1) / 2; if (rowptr[mid] <= first) lo = mid; else hi = mid - 1; }
    found = lo;
  }
  int row = __shfl_sync(0xffffffffu, found, 0);
  int rb = rowptr[row], re = rowptr[row + 1];
  float4 acc[R];
  #pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int w = first; w < last; w += 32) {
    const int idx = w + lane;
    int c = 0; float v = 0.f;
    if (idx < last) { c = __ldcs(col + idx); v = __ldcs(val + idx); }
    const int wend = last - w < 32 ? last : w + 32;
    int base = w;
    while (base < wend) {
      while (re <= base) { ++row; rb = re; re = rowptr[row + 1]; }  // skip empty rows
      const int stop = re < wend ? re : wend;
      #pragma unroll AHEAD
      for (int s = base; s < stop; s += S) {
        const int j = s + sub;
        const int cj = __shfl_sync(0xffffffffu, c, (j - w) & 31);
        const float vj = __shfl_sync(0xffffffffu, v, (j - w) & 31);
        if (j < stop) {
          const float4* brow = B + (long long)cj * Q + q0;
          #pragma unroll
          for (int r = 0; r < R; ++r) {
            const float4 b = __ldg(brow + r);
            acc[r].x += vj * b.x; acc[r].y += vj * b.y; acc[r].z += vj * b.z; acc[r].w += vj * b.w;
          }
        }
      }
      base = stop;
      if (stop == re) {  // the row ends in this window: its sub-groups' sums meet
        #pragma unroll
        for (int off = L; off < 32; off <<= 1) {
          #pragma unroll
          for (int r = 0; r < R; ++r) {
            acc[r].x += __shfl_xor_sync(0xffffffffu, acc[r].x, off);
            acc[r].y += __shfl_xor_sync(0xffffffffu, acc[r].y, off);
            acc[r].z += __shfl_xor_sync(0xffffffffu, acc[r].z, off);
            acc[r].w += __shfl_xor_sync(0xffffffffu, acc[r].w, off);
          }
        }
        if (sub == 0) {
          float4* zrow = reinterpret_cast<float4*>(Z) + (long long)row * Q + q0;
          if (rb >= first) {
            #pragma unroll
            for (int r = 0; r < R; ++r) zrow[r] = acc[r];
          } else {
            #pragma unroll
            for (int r = 0; r < R; ++r) atomicAdd(zrow + r, acc[r]);
          }
        }
        #pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
  }
  if (re > last) {  // the last row goes on in the next chunk
    #pragma unroll
    for (int off = L; off < 32; off <<= 1) {
      #pragma unroll
      for (int r = 0; r < R; ++r) {
        acc[r].x += __shfl_xor_sync(0xffffffffu, acc[r].x, off);
        acc[r].y += __shfl_xor_sync(0xffffffffu, acc[r].y, off);
        acc[r].z += __shfl_xor_sync(0xffffffffu, acc[r].z, off);
        acc[r].w += __shfl_xor_sync(0xffffffffu, acc[r].w, off);
      }
    }
    if (sub == 0) {
      float4* zrow = reinterpret_cast<float4*>(Z) + (long long)row * Q + q0;
      #pragma unroll
      for (int r = 0; r < R; ++r) atomicAdd(zrow + r, acc[r]);
    }
  }
}
"""
CONFIGS = {  # N: [(L, R)]
    32: [(8, 1), (4, 2), (2, 4)],
    128: [(32, 1), (16, 2), (8, 4)],
    8: [(2, 1)],
}
AHEADS = [1, 2, 4]
CHUNKS = [64, 128, 256]


def kernel_source():
    src = SOURCE
    for n, confs in CONFIGS.items():
        for (l, r) in confs:
            for ah in AHEADS:
                src += (f'extern "C" __global__ void __launch_bounds__(128) coop_{l}_{r}_{ah}('
                        "const int* rowptr, const int* col, const float* val, const float4* B, "
                        "float* Z, int rows, int nnz, int chunk) {"
                        f" coop<{l}, {r}, {ah}>(rowptr, col, val, B, Z, rows, nnz, chunk); }}\n")
    return src


def load(name, dtype="float32"):
    """A probe's matrix: a corpus file under $PCORPUS, a 2^20-row SpMM class (the suite's
    ``banded-r20``, ``uniform-r20``, ``rmat-s20``, ``longrows-r20``), or one of the
    SpMV suite's large classes (``rmat-s23``, ``longrows``: bench/suite.py's parameters)."""
    gen = {"banded-r20": lambda: generate.banded(cp, rows=2**20, width=16, dtype=dtype),
           "rmat-s20": lambda: generate.rmat(cp, scale=20, nnz=2**24, dtype=dtype),
           "uniform-r20": lambda: generate.uniform(cp, rows=2**20, nnz=2**24, dtype=dtype),
           "longrows-r20": lambda: generate.longrows(cp, rows=2**20, nnz=2**24, dtype=dtype),
           "rmat-s23": lambda: generate.rmat(cp, scale=23, nnz=int(160e6), dtype=dtype),
           "longrows": lambda: generate.longrows(cp, rows=2**22, nnz=2**27, long_rows=128,
                                                 fraction=0.9, dtype=dtype)}
    if name in gen:
        indptr, indices, data = gen[name]()
        n = len(indptr) - 1
        return cps.csr_matrix((data, indices, indptr), shape=(n, n))
    path = os.path.join(os.environ.get("PCORPUS", ".carry/corpus/matrices"), f"{name}.mtx.gz")
    return cps.csr_matrix(read_matrix_market(path).astype(dtype))


def dense_case(A, n, timer):
    """One SpMM case of the probes: B (seeded, float32, row-major), the float64 reference and
    the rounding scale every output is checked against, Z, and the best cuSPARSE SpMM
    (descriptors once) chosen by ``timer``."""
    rows, cols = A.shape
    rng = np.random.default_rng(1)
    B = cp.asarray(rng.standard_normal((cols, n)).astype(np.float32))
    ref = A.astype(cp.float64) @ B.astype(cp.float64)
    bound = float((abs(A).astype(cp.float64) @ abs(B).astype(cp.float64)).max())
    Z = cp.empty((rows, n), dtype=cp.float32)
    base = SpMM(A, n, B=B, C=Z)
    base.choose(timer)
    return B, ref, bound, Z, base


def checked(op, out, ref, bound, zero=True):
    """``op``'s output against ``ref`` in units of the rounding scale ``bound``: ``out`` zeroed
    first (a launch that adds) or, ``zero=False``, poisoned with NaN (one that must store)."""
    out.fill(0 if zero else np.nan)
    op()
    cp.cuda.Device().synchronize()
    return float(cp.abs(out.astype(cp.float64) - ref).max()) / bound


def main():
    timer = Timer(cp)
    module = cp.RawModule(code=kernel_source(), options=("--std=c++17",))
    out = []
    for name in MATS:
        A = load(name)
        A.sort_indices()
        rows = A.shape[0]
        rowptr = A.indptr.astype(cp.int32)
        colidx = A.indices.astype(cp.int32)
        vals = A.data.astype(cp.float32)
        for n in WIDTHS:
            B, ref, bound, Z, base = dense_case(A, n, timer)
            ops = {f"cusparse {base.describe()}": lambda i: base.launch(B, Z)}
            for nnzw in (24, 48, 64):
                k = teaal_loops.compile("specs/spmm/nonzero_split_vec.yaml", dtype="float32",
                                        params={"NNZ_PER_WORKER": nnzw})
                p = k.prepare(A)
                launch = k.bind_dense(p, (B,), Z)
                ops[f"library nonzero_split_vec[{nnzw}]"] = (lambda i, launch=launch: launch.launch())
            for (l, r) in CONFIGS.get(n, []):
                for ah in AHEADS:
                    fn = module.get_function(f"coop_{l}_{r}_{ah}")
                    for chunk in CHUNKS:
                        warps = -(-A.nnz // chunk)
                        grid = -(-warps * 32 // 128)
                        args = (rowptr, colidx, vals, B, Z, np.int32(rows), np.int32(A.nnz), np.int32(chunk))

                        def op(i, fn=fn, grid=grid, args=args):
                            cp.cuda.runtime.memsetAsync(Z.data.ptr, 0, Z.nbytes,
                                                        cp.cuda.get_current_stream().ptr)
                            fn((grid,), (128,), args)
                        ops[f"coop L{l} R{r} ahead{ah} chunk{chunk}"] = op
            times = {}
            for label, op in ops.items():
                Z.fill(np.nan)
                op(0)
                cp.cuda.Device().synchronize()
                err = float(cp.abs(Z.astype(cp.float64) - ref).max()) / bound
                if not err < 1e-5:
                    times[label] = None
                    print(name, n, label, "WRONG", err, flush=True)
                    continue
                times[label] = []
            for _round in range(3):
                for label, op in ops.items():
                    if times[label] is None:
                        continue
                    times[label].append(timer.queued(op, REPS).median * 1e3)
            med = {k: (statistics.median(v) if v else None) for k, v in times.items()}
            cu = min(v for k, v in med.items() if k.startswith("cusparse") and v)
            lib = min(v for k, v in med.items() if k.startswith("library") and v)
            coop = {k: v for k, v in med.items() if k.startswith("coop") and v}
            best = min(coop, key=coop.get) if coop else None
            print(f"{name:26s} N={n:4d} cusparse {cu:8.1f}  library {lib:8.1f} ({cu/lib:.3f}x)  "
                  f"coop {coop[best]:8.1f} ({cu/coop[best]:.3f}x) {best}" if best else name, flush=True)
            out.append({"matrix": name, "n": n, "rows": rows, "nnz": int(A.nnz), "us": med})
            del base
    with open(os.path.join(OUT, "coop_probe.json"), "w") as f:
        json.dump({"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "cases": out}, f, indent=1)


if __name__ == "__main__":
    main()
