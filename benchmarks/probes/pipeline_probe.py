"""Probe (#13, session 23): work-oriented SpMM's walk ahead with the next group's values and
columns loaded while this group's elements of B are in flight, and the next row's end loaded
before the walk reaches it (TEAAL_ATOMS_PIPELINED), and with groups no row end splits added
without a test per atom (TEAAL_GROUP_FAST), against the runtime's build and the best cuSPARSE
SpMM (descriptors once), one process. ncu (benchmarks/probes/ncu_versus.py) had cuSPARSE's
CSR_ALG3 issue 16.7M instructions on ego-Twitter at N = 32 against our 29.9M, with our issue
slots 60% busy. The builds are forced by rewriting the build options at compile time; every
output is checked against float64 first; 3 rounds, each a median of PREPS launches queued
behind a spin.

The macros TEAAL_ATOMS_PIPELINED, TEAAL_GROUP_FAST and TEAAL_ATOMS_SHUFFLED exist only in the
template of commit e64738c (the untested groups became the template's only walk ahead after
it): a build naming a macro the source lacks stops the probe. The session's runs, at e64738c:
the first with the defaults; the second with PBUILDS=runtime,plain,ahead4,ahead8,shuffled8
PCHUNKS=12,24,48,64 PWIDTHS=8,32,128 PDEFINES=-DTEAAL_GROUP_FAST=1 and PMATS naming the 26
corpus matrices and the three 2^20-row classes (PDEFINES: options added to every build, the
runtime's too)."""
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
                      "email-Enron,bcsstk33,luxembourg_osm,longrows-r20,rmat-s20,uniform-r20").split(",")
WIDTHS = [int(w) for w in os.environ.get("PWIDTHS", "32,128").split(",")]
REPS = int(os.environ.get("PREPS", "30"))
CHUNKS = [int(c) for c in os.environ.get("PCHUNKS", "24,48,64").split(",")]
FORCED = {"options": None}
_orig = backend.get_function
WALK = ("TEAAL_ATOMS_AHEAD", "TEAAL_ATOMS_SHUFFLED", "TEAAL_ATOMS_PIPELINED", "TEAAL_GROUP_FAST")


EXTRA = tuple(os.environ.get("PDEFINES", "").split())


def patched(source, name, *, trace=False, options=()):
    if FORCED["options"] is not None:
        options = tuple(o for o in options if not any(w in o for w in WALK)) + FORCED["options"]
    options = tuple(options) + EXTRA
    for o in (FORCED["options"] or ()) + EXTRA:
        macro = o[2:].split("=")[0]
        if macro not in source:
            raise SystemExit(f"{name}: the source has no {macro} (see the docstring's commit)")
    return _orig(source, name, trace=trace, options=options)


backend.get_function = patched
A4, A8 = "-DTEAAL_ATOMS_AHEAD=4", "-DTEAAL_ATOMS_AHEAD=8"
P, F, S = "-DTEAAL_ATOMS_PIPELINED=1", "-DTEAAL_GROUP_FAST=1", "-DTEAAL_ATOMS_SHUFFLED=1"
ALL_BUILDS = {"runtime": None, "plain": (), "ahead4": (A4,), "fast4": (A4, F), "pipe4": (A4, P),
              "pipefast4": (A4, P, F), "pipe8": (A8, P), "pipefast8": (A8, P, F),
              "ahead8": (A8,), "shuffled8": (A8, S), "shuffledfast8": (A8, S, F)}
# PBUILDS: which of them (default: the first run's, session 23)
BUILDS = {k: ALL_BUILDS[k] for k in os.environ.get(
    "PBUILDS", "runtime,plain,ahead4,fast4,pipe4,pipefast4,pipe8,pipefast8,shuffled8,"
    "shuffledfast8").split(",")}


def main():
    timer = Timer(cp)
    out = []
    for name in MATS:
        A = coop_probe.load(name)
        A.sum_duplicates()
        rows = A.shape[0]
        for n in WIDTHS:
            B, ref, bound, Z, base = coop_probe.dense_case(A, n, timer)
            ops = {"cusparse": lambda i, base=base, B=B, Z=Z: base.launch(B, Z)}
            for build, forced in BUILDS.items():
                for chunk in CHUNKS:
                    FORCED["options"] = forced
                    k = teaal_loops.compile("specs/spmm/nonzero_split_vec.yaml", dtype="float32",
                                            params={"NNZ_PER_WORKER": chunk})
                    launch = k.bind_dense(k.prepare(A), (B,), Z)
                    ops[f"{build} chunk{chunk}"] = (lambda i, launch=launch: launch.launch())
            FORCED["options"] = None
            times = {}
            for label, op in ops.items():
                Z.fill(np.nan)
                op(0)
                cp.cuda.Device().synchronize()
                err = float(cp.abs(Z.astype(cp.float64) - ref).max()) / bound
                times[label] = [] if err < 1e-5 else None
                if times[label] is None:
                    print(name, n, label, "WRONG", err, flush=True)
            for _round in range(3):
                for label, op in ops.items():
                    if times[label] is not None:
                        times[label].append(timer.queued(op, REPS).median * 1e3)
            med = {k: statistics.median(v) for k, v in times.items() if v}
            cu = med["cusparse"]
            line = [f"{name:24s} N={n:<3d} cusparse {cu:7.1f} ({base.describe()})"]
            for build in BUILDS:
                mine = {k: v for k, v in med.items() if k.startswith(build + " ")}
                if mine:
                    b = min(mine, key=mine.get)
                    line.append(f"{build} {mine[b]:7.1f} ({cu / mine[b]:.3f}x, {b.split()[1]})")
            print("\n   ".join(line), flush=True)
            out.append({"matrix": name, "n": n, "rows": rows, "nnz": int(A.nnz),
                        "cusparse": base.describe(), "us": med, "rounds": times})
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    with open(os.path.join(OUT, "pipeline_probe.json"), "w") as f:
        json.dump({"device": dev, "reps": REPS, "builds": {k: v for k, v in BUILDS.items()},
                   "cases": out}, f, indent=1)


if __name__ == "__main__":
    main()
