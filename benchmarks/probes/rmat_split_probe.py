"""Probe (#13, session 28): R-MAT's SpMM at N = 8 split at a low threshold.

rmat-s20 at N = 8 runs at 323 us on the H200 (nonzero_split_vec[12]) where uniform-r20, the
same nonzeros and a B of the same 32 MiB, runs at 196 (group_lanes_vec): R-MAT's rows are a
power law (48% empty; rows of 256 nonzeros and more, 0.6% of the rows, hold 44% of the
nonzeros), and no one schedule suits both its short rows and its long ones. ``bench --split``
splits at rows of 4,096 nonzeros and more (2% of R-MAT's nonzeros at W = 1,024): here the
threshold goes down to PMINS, the heavy rows in panels of each of PWS columns.

The pieces layout refuses a row under its threshold; the probe lowers the threshold in
``teaal_loops.matrix.heavy_rows`` and ``teaal_loops.layouts.pieces`` to each PMINS value in
turn (``heavy_threshold`` patched), so that ``split_heavy`` and the layout agree. Each part's
variants are timed alone (warm: B stays where the last launch left it, as every variant's
does), then the fastest light and pieces kernels as a pair; every output is checked against
float64 first. Output: $OUT/rmat_split_probe.json.
"""
import json
import os
import sys
from pathlib import Path

import cupy as cp
import numpy as np

import teaal_loops
from teaal_loops.bench.timing import Timer
from teaal_loops.bench.variants import Variant, compile_variant
from teaal_loops.layouts import pieces as pieces_layout
from teaal_loops.matrix import heavy_rows

sys.path.insert(0, os.path.dirname(__file__))
import coop_probe  # noqa: E402  (beside this file)
import heavy_probe  # noqa: E402

OUT = os.environ.get("OUT", "/tmp")
MATS = os.environ.get("PMATS", "rmat-s20").split(",")
WIDTHS = [int(w) for w in os.environ.get("PWIDTHS", "8,32").split(",")]
MINS = [int(v) for v in os.environ.get("PMINS", "64,128,256,1024,4096").split(",")]
PANELS = [int(w) for w in os.environ.get("PWS", "65536").split(",")]
REPS = int(os.environ.get("PREPS", "20"))
THRESHOLD = {"value": heavy_rows.HEAVY_MIN_NNZ}


def patched_threshold(panels, min_nnz=heavy_rows.HEAVY_MIN_NNZ):
    return THRESHOLD["value"]


heavy_rows.heavy_threshold = patched_threshold
pieces_layout.heavy_threshold = patched_threshold

WHOLE = [("nonzero_split_vec", {"NNZ_PER_WORKER": 8}),
         ("nonzero_split_vec", {"NNZ_PER_WORKER": 12}),
         ("nonzero_split_vec", {"NNZ_PER_WORKER": 24}), ("group_lanes_vec", {}),
         ("group_lanes_vec", {"ROW_LANES": 1}), ("group_lanes_vec", {"ROW_LANES": 2})]
LIGHT = WHOLE + [("lanes_over_n_vec", {})]
PIECES = [("group_lanes_vec", {"ROW_LANES": r}) for r in (1, 2, 4, 8, 16)] + [
    ("nonzero_split_vec", {"NNZ_PER_WORKER": 24}), ("lanes_over_n_vec", {})]


def launcher(spec, params, layout, matrix, B, Z, tpb=None, accumulate=False):
    variant = Variant(Path(f"specs/spmm/{spec}.yaml"), params, layout=layout, block_threads=tpb)
    k = compile_variant(variant, "float32")
    if accumulate:
        return variant.label, k.bind_dense(k.prepare(matrix), (B,), Z, accumulate=True).launch
    return variant.label, k.bind_dense(k.prepare(matrix), (B,), Z).launch


def reference(M, B):
    ref = M.astype(cp.float64) @ B.astype(cp.float64)
    bound = float((abs(M).astype(cp.float64) @ abs(B).astype(cp.float64)).max()) or 1.0
    return ref, bound


def part(timer, specs, layout, matrix, B, Z, accumulate, tpbs=(None,)):
    ref, bound = reference(matrix, B)
    ops = {}
    for spec, params in specs:
        for tpb in tpbs:
            label, op = launcher(spec, params, layout, matrix, B, Z, tpb, accumulate)
            err = coop_probe.checked(op, Z, ref, bound, zero=accumulate)
            if err < 1e-5:
                ops[label] = op
            else:
                print("WRONG", layout, label, err, flush=True)
    med = heavy_probe.timed(timer, ops)
    best = min(med, key=med.get)
    return med, best, ops[best]


def case(timer, name, A, n):
    rows, cols = A.shape
    B = cp.asarray(np.random.default_rng(1).standard_normal((cols, n)).astype(np.float32))
    Z = cp.zeros((rows, n), dtype=cp.float32)
    whole, wbest, _ = part(timer, WHOLE, "csr", A, B, Z, False)
    print(f"== {name} N = {n}: whole best {wbest} {whole[wbest]:.1f} us", flush=True)
    out = {"matrix": name, "n": n, "whole": whole, "splits": []}
    ref, bound = reference(A, B)
    for low in MINS:
        THRESHOLD["value"] = low
        light = teaal_loops.split_heavy(A, width=PANELS[0], min_nnz=low)[0]
        lmed, lbest, lop = part(timer, LIGHT, "csr", light, B, Z, False)  # W-independent
        for panel in PANELS:
            out["splits"].append(split_case(timer, A, B, Z, ref, bound, low, panel,
                                            (lmed, lbest, lop), whole[wbest]))
    return out


def split_case(timer, A, B, Z, ref, bound, low, panel, light_part, whole_us):
    """The pieces at one panel width and the pair, the light rows' best given."""
    lmed, lbest, lop = light_part
    heavy = teaal_loops.split_heavy(A, width=panel, min_nnz=low)[1]
    hrows = int((cp.diff(heavy.indptr) > 0).sum())
    pmed, pbest, pop = part(timer, PIECES, f"pieces:{panel}", heavy, B, Z, True,
                            tpbs=(None, 512))

    def pair():
        lop()
        pop()

    err = coop_probe.checked(pair, Z, ref, bound, zero=False)
    both = heavy_probe.timed(timer, {"pair": pair})["pair"] if err < 1e-5 else None
    print(f"   W {panel} min {low}: heavy rows {hrows} ({int(heavy.nnz)} nnz); light {lbest} "
          f"{lmed[lbest]:.1f} + pieces {pbest} {pmed[pbest]:.1f} = pair {both} us "
          f"(whole {whole_us:.1f}; err {err:.2e})", flush=True)
    return {"width": panel, "min_nnz": low, "heavy_rows": hrows, "heavy_nnz": int(heavy.nnz),
            "light": lmed, "pieces": pmed, "pair": both, "error": err}


def main():
    timer = Timer(cp)
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    cases = []
    for name in MATS:
        A = coop_probe.load(name)
        A.sum_duplicates()
        for n in WIDTHS:
            cases.append(case(timer, name, A, n))
            with open(os.path.join(OUT, "rmat_split_probe.json"), "w") as f:
                json.dump({"device": dev, "panels": PANELS, "reps": REPS, "cases": cases}, f,
                          indent=1)


if __name__ == "__main__":
    main()
