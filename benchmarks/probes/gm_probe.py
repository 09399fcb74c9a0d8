"""Probe: group_mapped SpMV, lanes a row G, steps in flight U and the atoms' load flavour,
on banded, the large classes and corpus matrices, against the best cuSPARSE, one process."""
import json, os, statistics
import numpy as np
import cupy as cp
import cupyx.scipy.sparse as cps
import teaal_loops
from teaal_loops.runtime import backend
from teaal_loops.bench.timing import Timer, copy_bandwidth
from teaal_loops.bench.cusparse.spmv import SpMV
from teaal_loops.bench import generate
from teaal_loops.matrix.mmio import read_matrix_market

OUT = os.environ.get("OUT", "/tmp")
DT = os.environ.get("PDTYPE", "float64")
MATS = os.environ.get("PMATS", "banded").split(",")
VARS = [v.split(":") for v in os.environ.get("PVARS", "8:4:__ldcs,8:2:__ldg").split(",")]
VARIANT = {"load": "__ldcs", "unroll": 4}
_orig = backend.get_function


def patched(source, name, *, trace=False, options=()):
    old = "return __ldcs(p);"
    if VARIANT["load"] != "__ldcs":
        assert old in source
        source = source.replace(old, f"return {VARIANT['load']}(p);")
    options = tuple(options) + (f"-DTEAAL_UNROLL={VARIANT['unroll']}",)
    return _orig(source, name, trace=trace, options=options)


backend.get_function = patched


def load(name):
    gen = {"banded": lambda: generate.banded(cp, rows=2**23, width=32, dtype=DT),
           "rmat-s23": lambda: generate.rmat(cp, scale=23, nnz=160_000_000, dtype=DT),
           "uniform": lambda: generate.uniform(cp, rows=2**23, nnz=2**27, dtype=DT),
           "longrows": lambda: generate.longrows(cp, rows=2**22, nnz=2**27, dtype=DT)}
    if name in gen:
        indptr, indices, data = gen[name]()
        n = len(indptr) - 1
        return cps.csr_matrix((data, indices, indptr), shape=(n, n))
    return cps.csr_matrix(read_matrix_market(f".carry/corpus/matrices/{name}.mtx.gz").astype(DT))


def main():
    timer = Timer(cp)
    copy = copy_bandwidth(cp, timer)["gbps"]
    print(f"copy {copy:.0f} GB/s", flush=True)
    out = {"copy_gbps": copy, "cases": []}
    for name in MATS:
        A = load(name)
        rows, cols = A.shape
        isz = np.dtype(DT).itemsize
        nbytes = A.nnz * (4 + isz) + (rows + 1) * 4 + cols * isz + rows * isz
        x = cp.asarray(np.random.default_rng(1).standard_normal(cols).astype(DT))
        ref = A.astype(cp.float64) @ x.astype(cp.float64)
        bound = (abs(A).astype(cp.float64) @ abs(x).astype(cp.float64)).max()
        base = SpMV(A, x=x)
        base.choose(timer)
        y = cp.empty(rows, dtype=DT)
        ops = {"cusparse": lambda i: base.launch(x, base.y)}
        for G, U, L in VARS:
            VARIANT["load"], VARIANT["unroll"] = L, int(U)
            k = teaal_loops.compile("specs/group_mapped.yaml", params={"BLOCK_SIZE": int(G)}, dtype=DT)
            p = k.prepare(A)
            k.launch_into(p, x, y)
            cp.cuda.Device().synchronize()
            err = float(cp.abs(y.astype(cp.float64) - ref).max() / bound)
            assert err < (1e-5 if DT == "float32" else 1e-13), (name, G, U, L, err)
            ops[f"G{G} U{U} {L}"] = (lambda i, k=k, p=p: k.launch_into(p, x, y))
        times = {k: [] for k in ops}
        reps = 15 if A.nnz > 2**24 else 200
        for r in range(3):
            keys = list(ops); keys = keys[r % len(keys):] + keys[:r % len(keys)]
            for key in keys:
                times[key].append(statistics.median(timer.queued(ops[key], reps).ms) * 1e3)
        row = {k: statistics.median(v) for k, v in times.items()}
        cu = row["cusparse"]
        print(f"== {name} {DT} nnz={A.nnz} {base.describe()} {cu:.2f} us", flush=True)
        for key, us in sorted(row.items(), key=lambda kv: kv[1])[:8]:
            frac = nbytes / (us * 1e-6) / 1e9 / copy
            print(f"   {key:18s} {us:9.2f} us  {frac*100:5.1f}% of copy  {cu/us:5.3f}x", flush=True)
        out["cases"].append({"matrix": name, "dtype": DT, "bytes": nbytes, "us": row, "cusparse": base.describe()})
        del A, base, ops, ref, x, y
        cp.get_default_memory_pool().free_all_blocks()
    with open(f"{OUT}/gm_probe_{DT}.json", "w") as f:
        json.dump(out, f, indent=1)


main()
