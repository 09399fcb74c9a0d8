"""Probe: merge-path SpMV's blocks a SM and shared-memory carveout against L1 for x's gathers.

ncu (H100, float32) showed rmat-s23 and longrows bound by L2 throughput, the 16-item build
with a 132 KB shared-memory configuration (L1 hit rate 9-10%) and the 4-item build with 64 KB
(16.6% on rmat-s23, which is why 4 items win there) but 64 registers (8 blocks a SM, 2x the
instructions of 16 items). Here each (items a thread IPT, blocks a SM asked of the compiler MB)
runs with the driver's carveout and with the smallest carveout that holds MB blocks, beside
the runtime's own build and the best cuSPARSE, one process, values checked."""
import json, math, os, statistics
import numpy as np
import cupy as cp
import cupyx.scipy.sparse as cps
import teaal_loops
from teaal_loops.runtime import backend
from teaal_loops.bench.timing import Timer
from teaal_loops.bench.cusparse.spmv import SpMV
from teaal_loops.bench import generate

OUT = os.environ.get("OUT", "/tmp")
DT = os.environ.get("PDTYPE", "float32")
MATS = os.environ.get("PMATS", "rmat-s23,longrows,uniform").split(",")
IPTS = [int(v) for v in os.environ.get("PIPT", "4,8,16").split(",")]
MBS = [int(v) for v in os.environ.get("PMB", "8,12,16").split(",")]
SMEM_MAX = 233472  # H100/H200: 228 KB of shared memory a SM at most
VARIANT = {"conf": None}
_orig = backend.get_function


def patched(source, name, *, trace=False, options=()):
    conf = VARIANT["conf"]
    if conf is None or name != "teaal_spmv_merge_path":
        return _orig(source, name, trace=trace, options=options)
    ipt, mb, carve = conf
    options = tuple(o for o in options if not o.startswith(("-DTEAAL_MIN_BLOCKS", "-DTEAAL_STAGE_UNROLL_MAX")))
    options += (f"-DTEAAL_MIN_BLOCKS={mb}",)
    if mb >= 12:
        options += ("-DTEAAL_STAGE_UNROLL_MAX=8",)
    source = source + f"\n// probe variant {ipt} {mb} {carve}\n"
    fn = _orig(source, name, trace=trace, options=options)
    smem = fn.shared_size_bytes  # a cupy.RawKernel
    if carve:
        fn.preferred_shared_memory_carveout = min(100, math.ceil(100 * mb * (smem + 1024) / SMEM_MAX))
    VARIANT["attrs"] = {"smem": smem, "regs": fn.num_regs, "local": fn.local_size_bytes,
                        "carveout": fn.preferred_shared_memory_carveout}
    return fn


backend.get_function = patched


def load(name):
    if name not in ("rmat-s23", "uniform", "powerlaw", "longrows"):  # a corpus matrix
        import sys
        sys.path.insert(0, os.path.dirname(__file__))
        import coop_probe  # beside this file: reads $PCORPUS
        return coop_probe.load(name, DT)
    gen = {"rmat-s23": lambda: generate.rmat(cp, scale=23, nnz=160_000_000, dtype=DT),
           "uniform": lambda: generate.uniform(cp, rows=2**23, nnz=2**27, dtype=DT),
           "powerlaw": lambda: generate.powerlaw(cp, rows=2**23, nnz=2**27, dtype=DT),
           "longrows": lambda: generate.longrows(cp, rows=2**22, nnz=2**27, dtype=DT)}
    indptr, indices, data = gen[name]()
    n = len(indptr) - 1
    return cps.csr_matrix((data, indices, indptr), shape=(n, n))


def main():
    timer = Timer(cp)
    out = []
    for name in MATS:
        A = load(name)
        rows, cols = A.shape
        x = cp.asarray(np.random.default_rng(1).standard_normal(cols).astype(DT))
        ref = A.astype(cp.float64) @ x.astype(cp.float64)
        bound = (abs(A).astype(cp.float64) @ abs(x).astype(cp.float64)).max()
        base = SpMV(A, x=x)
        base.choose(timer)
        y = cp.empty(rows, dtype=DT)
        ops = {"cusparse": lambda: base.launch(x, base.y)}
        attrs = {}
        confs = [(f"runtime IPT{i}", None, i) for i in IPTS]
        confs += [(f"IPT{i} MB{m}{' carve' if c else ''}", (i, m, c), i)
                  for i in IPTS for m in MBS for c in (False, True)]
        for label, conf, ipt in confs:
            VARIANT["conf"] = conf
            k = teaal_loops.compile("specs/merge_path.yaml", params={"ITEMS_PER_THREAD": ipt}, dtype=DT)
            p = k.prepare(A)
            k.launch_into(p, x, y)
            cp.cuda.Device().synchronize()
            err = float(cp.abs(y.astype(cp.float64) - ref).max() / bound)
            assert err < 1e-5, (name, label, err)
            attrs[label] = VARIANT.pop("attrs", None)
            ops[label] = (lambda k=k, p=p: k.launch_into(p, x, y))
        VARIANT["conf"] = None
        times = {k: [] for k in ops}
        for r in range(5):
            keys = list(ops); keys = keys[r % len(keys):] + keys[:r % len(keys)]
            for key in keys:
                times[key].append(timer.queued(lambda i, f=ops[key]: f(), 15).median * 1e3)
        row = {k: statistics.median(v) for k, v in times.items()}
        cu = row["cusparse"]
        print(f"== {name} {DT} nnz={A.nnz} {base.describe()} {cu:.1f} us", flush=True)
        for key, us in sorted(row.items(), key=lambda kv: kv[1]):
            print(f"   {key:22s} {us:9.1f} us  {cu/us:5.3f}x  {attrs.get(key)}", flush=True)
        out.append({"matrix": name, "dtype": DT, "nnz": int(A.nnz), "us": row, "attrs": attrs,
                    "cusparse": base.describe()})
        del A, base, ops, ref, x, y
        cp.get_default_memory_pool().free_all_blocks()
    with open(f"{OUT}/carveout_probe_{DT}.json", "w") as f:
        json.dump(out, f, indent=1)


main()
