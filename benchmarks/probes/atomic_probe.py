"""Probe: does merge-path SpMV lose long rows to atomics on one address? The blocks inside
a long row each add their piece to y[row] with one atomicAdd; a row of 943K nonzeros at 4
items a thread is 1,843 blocks adding to one word. Variant `spread` sends each such atomic
to a different word (wrong values, the same work otherwise): if the time drops, contention
on the word is the cost. One process, the runtime's build otherwise, beside the best
cuSPARSE."""
import json, os, statistics
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
MATS = os.environ.get("PMATS", "longrows,rmat-s23").split(",")
IPTS = [int(v) for v in os.environ.get("PIPT", "4,8,16").split(",")]
VARIANT = {"spread": False}
_orig = backend.get_function
HEAD_OLD = "if (row_nnz > 0 && !carried) A.atomic_tile(y, first_row, suffix);"
HEAD_NEW = ("if (row_nnz > 0 && !carried) A.atomic_tile(y, (offset_t)(((unsigned long long)first_row"
            " + 7919ull * blockIdx.x) % (unsigned long long)tiles), suffix);")


def patched(source, name, *, trace=False, options=()):
    if VARIANT["spread"] and "TEAAL_MIN_BLOCKS" in source:
        assert HEAD_OLD in source
        source = source.replace(HEAD_OLD, HEAD_NEW)
    return _orig(source, name, trace=trace, options=options)


backend.get_function = patched


def load(name):
    gen = {"rmat-s23": lambda: generate.rmat(cp, scale=23, nnz=160_000_000, dtype=DT),
           "uniform": lambda: generate.uniform(cp, rows=2**23, nnz=2**27, dtype=DT),
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
        for ipt in IPTS:
            for spread in (False, True):
                VARIANT["spread"] = spread
                k = teaal_loops.compile("specs/merge_path.yaml", params={"ITEMS_PER_THREAD": ipt}, dtype=DT)
                p = k.prepare(A)
                k.launch_into(p, x, y)
                cp.cuda.Device().synchronize()
                err = float(cp.abs(y.astype(cp.float64) - ref).max() / bound)
                if not spread:
                    assert err < 1e-5, (name, ipt, err)
                ops[f"IPT{ipt}{' spread' if spread else ''}"] = (lambda k=k, p=p: k.launch_into(p, x, y))
        VARIANT["spread"] = False
        times = {k: [] for k in ops}
        for r in range(5):
            keys = list(ops); keys = keys[r % len(keys):] + keys[:r % len(keys)]
            for key in keys:
                times[key].append(timer.queued(lambda i, f=ops[key]: f(), 15).median * 1e3)
        row = {k: statistics.median(v) for k, v in times.items()}
        cu = row["cusparse"]
        print(f"== {name} {DT} nnz={A.nnz} cuSPARSE {base.describe()} {cu:.1f} us", flush=True)
        for key, us in row.items():
            print(f"   {key:18s} {us:9.1f} us  {cu/us:5.3f}x", flush=True)
        out.append({"matrix": name, "dtype": DT, "nnz": int(A.nnz), "us": row, "cusparse": base.describe()})
        del A, base, ops, ref, x, y
        cp.get_default_memory_pool().free_all_blocks()
    with open(f"{OUT}/atomic_probe_{DT}.json", "w") as f:
        json.dump(out, f, indent=1)


main()
