"""Probe: merge-path SpMV with its staged tile sized for the chunk (ITEMS_PER_THREAD), the
staging's loads in flight a thread (SU) and the blocks a SM asked of the compiler (MB),
against the runtime's build and the best cuSPARSE, one process."""
import json, os, statistics, itertools
import numpy as np
import cupy as cp
import cupyx.scipy.sparse as cps
import teaal_loops
from teaal_loops.runtime import backend
from teaal_loops.bench.timing import Timer
from teaal_loops.bench.cusparse.spmv import SpMV
from teaal_loops.bench import generate
from teaal_loops.matrix.mmio import read_matrix_market

OUT = os.environ.get("OUT", "/tmp")
DT = os.environ.get("PDTYPE", "float32")
MATS = os.environ.get("PMATS", "rmat-s23,longrows,uniform,ego-Twitter-undirected,soc-Slashdot0902").split(",")
CONFIGS = [tuple(int(v) for v in c.split(":")) for c in os.environ.get(
    "PCONF", "8:4:8,8:4:12,8:4:16,8:8:8,8:8:12,8:8:16,16:4:8,16:4:12,16:4:16,16:8:8,16:8:12,16:8:16,16:16:8,16:16:12").split(",")]
VARIANT = {"conf": None}
_orig = backend.get_function
MB_OLD = "#define TEAAL_MIN_BLOCKS (1024 / TEAAL_BLOCK_THREADS > 0 ? 1024 / TEAAL_BLOCK_THREADS : 1)"
TB_OLD = "constexpr int TEAAL_TILE_BYTES = 128 * TEAAL_BLOCK_THREADS < 40960 ? 128 * TEAAL_BLOCK_THREADS : 40960;"
SU_OLD = "constexpr int TEAAL_STAGE_UNROLL = TEAAL_STAGED_IPT < 16 ? TEAAL_STAGED_IPT : 16;"


def patched(source, name, *, trace=False, options=()):
    conf = VARIANT["conf"]
    if conf is not None and "TEAAL_MIN_BLOCKS" in source:
        ipt, su, mb = conf
        for old in (MB_OLD, TB_OLD, SU_OLD):
            assert old in source, old
        slot = max(np.dtype(DT).itemsize, 4)
        source = source.replace(MB_OLD, f"#define TEAAL_MIN_BLOCKS {mb}")
        source = source.replace(TB_OLD, f"constexpr int TEAAL_TILE_BYTES = {ipt * slot} * TEAAL_BLOCK_THREADS;")
        source = source.replace(SU_OLD, f"constexpr int TEAAL_STAGE_UNROLL = {su};")
    return _orig(source, name, trace=trace, options=options)


backend.get_function = patched


def load(name):
    gen = {"rmat-s23": lambda: generate.rmat(cp, scale=23, nnz=160_000_000, dtype=DT),
           "uniform": lambda: generate.uniform(cp, rows=2**23, nnz=2**27, dtype=DT),
           "longrows": lambda: generate.longrows(cp, rows=2**22, nnz=2**27, dtype=DT)}
    name = name.split("@")[0]
    if name in gen:
        indptr, indices, data = gen[name]()
        n = len(indptr) - 1
        return cps.csr_matrix((data, indices, indptr), shape=(n, n))
    return cps.csr_matrix(read_matrix_market(f".carry/corpus/matrices/{name}.mtx.gz").astype(DT))


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
        ops = {"cusparse": lambda i: base.launch(x, base.y)}
        variants = [(f"runtime IPT{i}", None, i) for i in (4, 8, 16, 32)]
        variants += [(f"IPT{c[0]} SU{c[1]} MB{c[2]}", c, c[0]) for c in CONFIGS]
        for label, conf, ipt in variants:
            VARIANT["conf"] = conf
            layout = name.split("@")[1] if "@" in name else None
            k = teaal_loops.compile("specs/merge_path.yaml", params={"ITEMS_PER_THREAD": ipt}, dtype=DT, layout=layout)
            p = k.prepare(A)
            k.launch_into(p, x, y)
            cp.cuda.Device().synchronize()
            err = float(cp.abs(y.astype(cp.float64) - ref).max() / bound)
            assert err < (1e-5 if DT == "float32" else 1e-13), (name, label, err)
            ops[label] = (lambda i, k=k, p=p: k.launch_into(p, x, y))
        VARIANT["conf"] = None
        times = {k: [] for k in ops}
        reps = 15 if A.nnz > 2**24 else 200
        for r in range(5):
            keys = list(ops); keys = keys[r % len(keys):] + keys[:r % len(keys)]
            for key in keys:
                times[key].append(statistics.median(timer.queued(ops[key], reps).ms) * 1e3)
        row = {k: statistics.median(v) for k, v in times.items()}
        cu = row["cusparse"]
        print(f"== {name} {DT} nnz={A.nnz} cuSPARSE {base.describe()} {cu:.1f} us", flush=True)
        for key, us in sorted(row.items(), key=lambda kv: kv[1]):
            print(f"   {key:22s} {us:9.2f} us  {cu/us:5.3f}x", flush=True)
        out.append({"matrix": name, "dtype": DT, "nnz": int(A.nnz), "us": row, "cusparse": base.describe()})
        del A, base, ops, ref, x, y
        cp.get_default_memory_pool().free_all_blocks()
    with open(f"{OUT}/mp_probe_{DT}.json", "w") as f:
        json.dump(out, f, indent=1)


main()
