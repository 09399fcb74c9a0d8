"""Probe: banded SpMV (2^23 rows x 32 a row), group_mapped over lanes a row G, steps in
flight TEAAL_UNROLL and the atoms' load flavour, against the best cuSPARSE, one process."""
import json, os, statistics, itertools
import numpy as np
import cupy as cp
import cupyx.scipy.sparse as cps
import teaal_loops
from teaal_loops.runtime import backend
from teaal_loops.bench.timing import Timer, copy_bandwidth
from teaal_loops.bench.cusparse.spmv import SpMV
from teaal_loops.bench import generate

OUT = os.environ.get("OUT", "/tmp")
DTYPES = os.environ.get("PDTYPES", "float32,float64").split(",")
GS = [int(g) for g in os.environ.get("PGS", "4,8,16,32").split(",")]
US = [int(u) for u in os.environ.get("PUS", "2,4,8").split(",")]
LOADS = os.environ.get("PLOADS", "__ldcs,__ldg,plain").split(",")
VARIANT = {"load": "__ldcs", "unroll": 4}
_orig = backend.get_function


def patched(source, name, *, trace=False, options=()):
    old = "return __ldcs(p);"
    if VARIANT["load"] != "__ldcs":
        assert old in source
        new = "return *p;" if VARIANT["load"] == "plain" else f"return {VARIANT['load']}(p);"
        source = source.replace(old, new)
    options = tuple(options) + (f"-DTEAAL_UNROLL={VARIANT['unroll']}",)
    return _orig(source, name, trace=trace, options=options)


backend.get_function = patched


def main():
    timer = Timer(cp)
    copy = copy_bandwidth(cp, timer)["gbps"]
    print(f"copy {copy:.0f} GB/s", flush=True)
    out = {"copy_gbps": copy, "cases": []}
    for dt in DTYPES:
        indptr, indices, data = generate.banded(cp, rows=1 << 23, width=32, dtype=dt)
        A = cps.csr_matrix((data, indices, indptr), shape=(1 << 23, 1 << 23))
        rows, cols = A.shape
        isz = np.dtype(dt).itemsize
        nbytes = A.nnz * (4 + isz) + (rows + 1) * 4 + cols * isz + rows * isz
        x = cp.asarray(np.random.default_rng(1).standard_normal(cols).astype(dt))
        ref = A.astype(cp.float64) @ x.astype(cp.float64)
        base = SpMV(A, x=x)
        base.choose(timer)
        y = cp.empty(rows, dtype=dt)
        ops = {"cusparse": lambda i: base.launch(x, base.y)}
        for G, U, L in itertools.product(GS, US, LOADS):
            VARIANT["load"], VARIANT["unroll"] = L, U
            k = teaal_loops.compile("specs/group_mapped.yaml", params={"BLOCK_SIZE": G}, dtype=dt)
            p = k.prepare(A)
            k.launch_into(p, x, y)
            cp.cuda.Device().synchronize()
            err = float(cp.abs(y.astype(cp.float64) - ref).max() / (cp.abs(ref).max()))
            assert err < (1e-5 if dt == "float32" else 1e-12), (G, U, L, err)
            ops[f"G{G} U{U} {L}"] = (lambda i, k=k, p=p, y=y: k.launch_into(p, x, y))
        times = {k: [] for k in ops}
        for r in range(3):
            keys = list(ops); keys = keys[r % len(keys):] + keys[:r % len(keys)]
            for key in keys:
                times[key].append(statistics.median(timer.queued(ops[key], 15).ms) * 1e3)
        row = {k: statistics.median(v) for k, v in times.items()}
        cu = row["cusparse"]
        for key, us in sorted(row.items(), key=lambda kv: kv[1]):
            frac = nbytes / (us * 1e-6) / 1e9 / copy
            print(f"{dt} {key:22s} {us:9.1f} us  {frac*100:5.1f}% of copy  {cu/us:5.3f}x cuSPARSE", flush=True)
        out["cases"].append({"dtype": dt, "bytes": nbytes, "us": row, "cusparse": base.describe()})
        del A, indptr, indices, data, base, ops, ref
        cp.get_default_memory_pool().free_all_blocks()
    with open(f"{OUT}/banded_probe.json", "w") as f:
        json.dump(out, f, indent=1)


main()
