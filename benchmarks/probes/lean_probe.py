"""Probe (#13, session 24): fewer instructions an atom in SpMM's dense loads, against the
builds before and the best cuSPARSE SpMM (descriptors once), one process.

ncu had cuSPARSE's CSR_ALG3 issue 16.7M instructions on ego-Twitter at N = 32 against our
29.9M (benchmarks/probes/ncu_versus.py). The sm_90 SASS of the work-oriented walk ahead (4
atoms a group, 16-byte loads) showed where a group's 105 instructions went: an element of B's
address took a 64-bit multiply by the row stride (six instructions an atom), each atom's value
and column a select and an address of its own (every load clamped to the chunk), and the
column's base address was recomputed from the kernel's parameters at every group (22). The
builds:

- ``before``: the templates before this change (-DTEAAL_WIDE_STRIDES=1 -DTEAAL_CLAMPED_GROUPS=1);
- ``strides``: 32-bit byte strides (one IMAD.WIDE an element) and column addresses kept in
  registers, groups still clamped (-DTEAAL_CLAMPED_GROUPS=1);
- ``groups``: a group inside the matrix loads its U atoms from one address, 64-bit strides kept
  (-DTEAAL_WIDE_STRIDES=1);
- ``lean``: both (the new templates' default).

The macros exist only in the templates of commit 468dc8e, where the session's run was made
(benchmarks/probes/run_lean.sh; output lean_probe_h100.json.gz). After it, the 32-bit strides
were kept for the walk ahead alone: elsewhere they let ptxas squeeze group-mapped SpMM to 32
registers, which serialised its loads (BENCHMARKS.md). Each build keeps
the runtime's own options (atoms ahead, vector loads) and adds its macros; every output is
checked against float64 first; 3 rounds, each a median of PREPS launches queued behind a spin.
Specs and parameters: PSPECS, entries SPEC:PARAM=v1/v2/... separated by commas (default: the
suite's winners on the misses). Output: $OUT/lean_probe.json.
"""
import json
import os
import statistics
import sys

import cupy as cp
import numpy as np

import teaal_loops
from teaal_loops.bench.timing import Timer
from teaal_loops.runtime import backend

sys.path.insert(0, os.path.dirname(__file__))
import coop_probe  # noqa: E402  (beside this file)

OUT = os.environ.get("OUT", "/tmp")
MATS = os.environ.get("PMATS", "soc-Slashdot0902,ego-Twitter-undirected,ca-AstroPh-cc1,cit-HepTh,"
                      "email-Enron,bcsstk33,bcsstk13,cage8,luxembourg_osm,longrows-r20,rmat-s20,"
                      "uniform-r20").split(",")
WIDTHS = [int(w) for w in os.environ.get("PWIDTHS", "8,32,128").split(",")]
REPS = int(os.environ.get("PREPS", "20"))
SPECS = os.environ.get("PSPECS", "nonzero_split_vec:NNZ_PER_WORKER=12/24/48/64/128,"
                       "nonzero_split:NNZ_PER_WORKER=64/128,"
                       "group_lanes_vec:ROW_LANES=1/2/4/16").split(",")
BUILDS = {"before": ("-DTEAAL_WIDE_STRIDES=1", "-DTEAAL_CLAMPED_GROUPS=1"),
          "strides": ("-DTEAAL_CLAMPED_GROUPS=1",),
          "groups": ("-DTEAAL_WIDE_STRIDES=1",),
          "lean": ()}
# A mode forces one macro of the templates after commit 468dc8e over whatever the runtime's rule
# chose. PMODE=bytes: group-mapped B with 32-bit byte strides (TEAAL_BYTE_STRIDES,
# dense_builds.py), off ("before") and on ("lean"). PMODE=unroll (session 25): group-mapped
# SpMM's loads a lane a step (TEAAL_UNROLL, which dense_builds.deep_unroll sets to 16 or leaves
# at the source's 4) at each of PUNROLLS, labelled u4, u8, ...
MODES = {
    "bytes": ("TEAAL_BYTE_STRIDES",
              {"before": ("-DTEAAL_BYTE_STRIDES=0",), "lean": ("-DTEAAL_BYTE_STRIDES=1",)}),
    "unroll": ("TEAAL_UNROLL",
               {f"u{u}": (f"-DTEAAL_UNROLL={u}",)
                for u in os.environ.get("PUNROLLS", "4,8,16").split(",")}),
}
MODE = os.environ.get("PMODE")
FORCED_MACRO = MODES[MODE][0] if MODE in MODES else None
if FORCED_MACRO:
    BUILDS = MODES[MODE][1]
FORCED = {"options": ()}
_orig = backend.get_function


def patched(source, name, *, trace=False, options=()):
    if FORCED_MACRO:
        if FORCED_MACRO not in source:
            raise SystemExit(f"{name}: the source has no {FORCED_MACRO} (PMODE={MODE})")
        kept = tuple(o for o in options if FORCED_MACRO not in o)
        return _orig(source, name, trace=trace, options=kept + FORCED["options"])
    # a schedule without the walk ahead (group-mapped) has no TEAAL_CLAMPED_GROUPS: its
    # "groups" build is its "lean" one, its "strides" build its "before"
    if "TEAAL_WIDE_STRIDES" not in source:
        raise SystemExit(f"{name}: the source has no TEAAL_WIDE_STRIDES (see the docstring)")
    forced = tuple(o for o in FORCED["options"] if o[2:].split("=")[0] in source)
    return _orig(source, name, trace=trace, options=tuple(options) + forced)


backend.get_function = patched


def configs():
    for entry in SPECS:
        spec, _, param = entry.partition(":")
        key, _, values = param.partition("=")
        for v in values.split("/") if values else [None]:
            yield spec, ({key: int(v)} if v else {})


def main():
    timer = Timer(cp)
    out = []
    for name in MATS:
        A = coop_probe.load(name)
        A.sum_duplicates()
        rows = A.shape[0]
        for n in WIDTHS:
            B, ref, bound, Z, base = coop_probe.dense_case(A, n, timer)
            ops = {"cusparse": lambda base=base, B=B, Z=Z: base.launch(B, Z)}
            for build, forced in BUILDS.items():
                FORCED["options"] = forced
                for spec, params in configs():
                    k = teaal_loops.compile(f"specs/spmm/{spec}.yaml", dtype="float32",
                                            params=params)
                    launch = k.bind_dense(k.prepare(A), (B,), Z)
                    launch.launch()  # compiled now, under this build's options
                    label = f"{build} {spec}" + "".join(f"[{p}={v}]" for p, v in params.items())
                    ops[label] = launch.launch
            FORCED["options"] = ()
            times = {}
            for label, op in ops.items():
                Z.fill(np.nan)
                op()
                cp.cuda.Device().synchronize()
                err = float(cp.abs(Z.astype(cp.float64) - ref).max()) / bound
                times[label] = [] if err < 1e-5 else None
                if times[label] is None:
                    print(name, n, label, "WRONG", err, flush=True)
            for _round in range(3):
                for label, op in ops.items():
                    if times[label] is not None:
                        times[label].append(timer.queued(lambda i, op=op: op(), REPS).median * 1e3)
            med = {k: statistics.median(v) for k, v in times.items() if v}
            cu = med["cusparse"]
            line = [f"{name:24s} N={n:<3d} cusparse {cu:7.1f} ({base.describe()})"]
            best = {}
            for build in BUILDS:
                mine = {k: v for k, v in med.items() if k.startswith(build + " ")}
                if mine:
                    b = min(mine, key=mine.get)
                    best[build] = mine[b]
                    line.append(f"{build:8s} {mine[b]:8.1f} ({cu / mine[b]:.3f}x, {b.split()[1]})")
            if len(best) > 1:
                line.append("best build " + min(best, key=best.get))
            if "before" in best and "lean" in best:
                line.append(f"lean / before {best['lean'] / best['before']:.3f}")
            print("\n   ".join(line), flush=True)
            out.append({"matrix": name, "n": n, "rows": rows, "nnz": int(A.nnz),
                        "cusparse": base.describe(), "us": med, "rounds": times})
            write(out)  # after every case: a run cut short keeps what it measured


def write(cases):
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    with open(os.path.join(OUT, "lean_probe.json"), "w") as f:
        json.dump({"device": dev, "reps": REPS, "builds": BUILDS, "specs": SPECS,
                   "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
