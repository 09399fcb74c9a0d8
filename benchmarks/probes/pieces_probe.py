"""Probe (#13, #14, session 28): why the library's kernels over the heavy rows' pieces
(layout ``pieces:1024``, the second launch of a split) trail the hand-written one of
``heavy_probe.py`` (a warp a piece, its sub-groups taking every S-th atom, 4 atoms ahead,
float4 atomics): on longrows-r20 on the H100, 196.7 against 236.2 us at N = 32 and 502.0
against 694.8 at N = 128 (BENCHMARKS.md), where group_lanes_vec at ROW_LANES = 32 / (N / 4)
is the same mapping.

For each N of PWIDTHS: the heavy rows of PMAT (``teaal_loops.split_heavy``, W = 1,024), and
- the hand kernel in blocks of 256 and 512 threads;
- group_lanes_vec at each ROW_LANES of PLANES and lanes_over_n_vec, in blocks of PTPB
  threads, under each build of PBUILDS: ``runtime`` (the options the runtime picks), ``uN``
  (TEAAL_UNROLL forced to N), ``bN`` (TEAAL_BYTE_STRIDES forced to N), ``uN+bM`` (both).
Each kernel's registers a thread are recorded. Every output is checked against float64
first (the pieces add into a zeroed Z); 3 rounds, each a median of PREPS launches queued
behind a spin. With PSPMV=1 the SpMV pieces of ``longrows`` too (merge_path, group_mapped at
BLOCK_SIZE 8 / 32, against heavy_probe's hand kernel). Output: $OUT/pieces_probe.json.
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
from teaal_loops.runtime import backend

sys.path.insert(0, os.path.dirname(__file__))
import coop_probe  # noqa: E402  (beside this file)
import heavy_probe  # noqa: E402

OUT = os.environ.get("OUT", "/tmp")
MAT = os.environ.get("PMAT", "longrows-r20")
WIDTHS = [int(w) for w in os.environ.get("PWIDTHS", "8,32,128").split(",")]
LANES = [int(v) for v in os.environ.get("PLANES", "1,2,4,8").split(",")]
TPBS = [int(t) for t in os.environ.get("PTPB", "128,512").split(",")]
BUILDS = os.environ.get("PBUILDS", "runtime,u4,u8,u16,u4+b1,u16+b0").split(",")
REPS = int(os.environ.get("PREPS", "20"))
SPMV = os.environ.get("PSPMV", "") == "1"
PANEL = 1024

FORCED = {"options": (), "regs": None}
_orig = backend.get_function


def patched(source, name, *, trace=False, options=()):
    forced = FORCED["options"]
    macros = {o[2:].split("=")[0] for o in forced}
    kept = tuple(o for o in options if o[2:].split("=")[0] not in macros)
    fn = _orig(source, name, trace=trace, options=kept + forced)
    FORCED["regs"] = (int(fn.num_regs), kept + forced)
    return fn


backend.get_function = patched


def build_options(build):
    if build == "runtime":
        return ()
    out = ()
    for part in build.split("+"):
        macro = {"u": "TEAAL_UNROLL", "b": "TEAAL_BYTE_STRIDES"}[part[0]]
        out += (f"-D{macro}={part[1:]}",)
    return out


def spmm(timer, module, A, heavy, n):
    rows, cols = A.shape
    rng = np.random.default_rng(1)
    B = cp.asarray(rng.standard_normal((cols, n)).astype(np.float32))
    ref = heavy.astype(cp.float64) @ B.astype(cp.float64)
    bound = float((abs(heavy).astype(cp.float64) @ abs(B).astype(cp.float64)).max())
    Z = cp.zeros((rows, n), dtype=cp.float32)
    ops, regs = {}, {}
    # the hand kernel (heavy_probe.SOURCE), its tiles built as there
    _, hrows, hidx, hc, hv = heavy_probe.split(A, heavy_probe.THRESHOLD)
    tptr, tc, tv, tiles = heavy_probe.panel_tiles(hrows, hidx, hc, hv, PANEL, cols)
    fn = module.get_function(f"heavy_spmm_{n // 4}")
    regs["hand"] = int(fn.num_regs)
    for tpb in (256, 512):
        grid = (int(-(-tiles * 32 // tpb)),)
        args = (tptr, tc, tv, B, Z, hrows, np.int32(len(hrows)), np.int64(tiles))
        ops[f"hand T{tpb}"] = (lambda g=grid, t=tpb, a=args: fn(g, (t,), a))
    specs = [("group_lanes_vec", {"ROW_LANES": lanes}) for lanes in LANES]
    specs.append(("lanes_over_n_vec", {}))
    for build in BUILDS:
        FORCED["options"] = build_options(build)
        for spec, params in specs:
            if build != "runtime" and spec != "group_lanes_vec":
                continue  # thread-mapped sources have neither macro
            for tpb in TPBS:
                variant = Variant(Path(f"specs/spmm/{spec}.yaml"), params,
                                  layout=f"pieces:{PANEL}", block_threads=tpb)
                k = compile_variant(variant, "float32")
                launch = k.bind_dense(k.prepare(heavy), (B,), Z, accumulate=True)
                launch.launch()  # compiled now, under this build
                label = f"{build} {variant.label}"
                ops[label] = launch.launch
                regs[label] = FORCED["regs"]
    FORCED["options"] = ()
    errors = {label: coop_probe.checked(op, Z, ref, bound) for label, op in ops.items()}
    bad = {k: v for k, v in errors.items() if not v < 1e-5}
    if bad:
        print("WRONG", n, bad, flush=True)
    med = heavy_probe.timed(timer, {k: v for k, v in ops.items() if k not in bad})
    print(f"== SpMM pieces of {MAT}, N = {n}", flush=True)
    for k, v in sorted(med.items(), key=lambda kv: kv[1]):
        print(f"   {k:60s} {v:8.1f} us  regs {regs.get(k, regs.get('hand'))}", flush=True)
    return {"form": "spmm", "n": n, "us": med, "regs": {k: v for k, v in regs.items()},
            "errors": errors}


def spmv(timer, module):
    A = coop_probe.load("longrows")
    A.sum_duplicates()
    rows, cols = A.shape
    _, heavy = teaal_loops.split_heavy(A, width=PANEL * 8)
    x = cp.asarray(np.random.default_rng(1).standard_normal(cols).astype(np.float32))
    ref = heavy.astype(cp.float64) @ x.astype(cp.float64)
    bound = float((abs(heavy).astype(cp.float64) @ abs(x).astype(cp.float64)).max())
    y = cp.zeros(rows, dtype=cp.float32)
    ops = {}
    _, hrows, hidx, hc, hv = heavy_probe.split(A, heavy_probe.THRESHOLD)
    fn = module.get_function("heavy_spmv")
    for width in (2048, 8192):
        tptr, tc, tv, tiles = heavy_probe.panel_tiles(hrows, hidx, hc, hv, width, cols)
        for tpb in (256, 512):
            grid = (int(-(-tiles * 32 // tpb)),)
            args = (tptr, tc, tv, x, y, hrows, np.int32(len(hrows)), np.int64(tiles))
            ops[f"hand W{width} T{tpb}"] = (lambda g=grid, t=tpb, a=args: fn(g, (t,), a))
    for width in (2048, 8192):
        _, heavy = teaal_loops.split_heavy(A, width=width)
        for spec, params in (("merge_path", {}), ("group_mapped", {"BLOCK_SIZE": 8}),
                             ("group_mapped", {"BLOCK_SIZE": 32})):
            for tpb in (None, 512):
                variant = Variant(Path(f"specs/{spec}.yaml"), params,
                                  layout=f"pieces:{width}", block_threads=tpb)
                k = compile_variant(variant, "float32")
                prepared = k.prepare(heavy)
                ops[variant.label] = (lambda k=k, p=prepared: k.launch(p, x, y))
    errors = {label: coop_probe.checked(op, y, ref, bound) for label, op in ops.items()}
    med = heavy_probe.timed(timer, {k: v for k, v in ops.items() if errors[k] < 1e-5})
    print("== SpMV pieces of longrows", {k: v for k, v in errors.items() if not v < 1e-5},
          flush=True)
    for k, v in sorted(med.items(), key=lambda kv: kv[1]):
        print(f"   {k:60s} {v:8.1f} us", flush=True)
    return {"form": "spmv", "us": med, "errors": errors}


def main():
    timer = Timer(cp)
    module = cp.RawModule(code=heavy_probe.SOURCE, options=("--std=c++17",))
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    cases = []
    A = coop_probe.load(MAT)
    A.sum_duplicates()
    _, heavy = teaal_loops.split_heavy(A, width=PANEL)
    for n in WIDTHS:
        cases.append(spmm(timer, module, A, heavy, n))
        write(dev, cases)
    if SPMV:
        del A, heavy
        cp.get_default_memory_pool().free_all_blocks()
        cases.append(spmv(timer, module))
        write(dev, cases)


def write(dev, cases):
    with open(os.path.join(OUT, "pieces_probe.json"), "w") as f:
        json.dump({"device": dev, "matrix": MAT, "builds": BUILDS, "reps": REPS,
                   "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
