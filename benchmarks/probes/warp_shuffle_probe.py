"""Probe: work-oriented SpMM at N = 128 (one worker a warp) built with its atoms loaded ahead
and shared by shuffles, against the runtime's build, the hand-written warp walk of
coop_probe.py and the best cuSPARSE SpMM, one process (#13). The library's builds are forced by
rewriting the build options at compile time (TEAAL_ATOMS_AHEAD, TEAAL_ATOMS_SHUFFLED)."""
import json, os, statistics
import numpy as np
import cupy as cp
import teaal_loops
from teaal_loops.runtime import backend
from teaal_loops.bench.timing import Timer
from teaal_loops.bench.cusparse.spmm import SpMM
import coop_probe

OUT = os.environ.get("OUT", "/tmp")
MATS = os.environ.get("PMATS", "uniform-r20,rmat-s20,longrows-r20,ca-AstroPh-cc1,cit-HepTh,"
                      "bcsstk33,soc-Slashdot0902,ego-Twitter-undirected,email-Enron").split(",")
N = int(os.environ.get("PWIDTH", "128"))
REPS = int(os.environ.get("PREPS", "30"))
FORCED = {"options": None}
_orig = backend.get_function


def patched(source, name, *, trace=False, options=()):
    if FORCED["options"] is not None:
        options = tuple(o for o in options if "TEAAL_ATOMS_AHEAD" not in o
                        and "TEAAL_ATOMS_SHUFFLED" not in o) + FORCED["options"]
    return _orig(source, name, trace=trace, options=options)


backend.get_function = patched
BUILDS = {"runtime": None, "plain": (), "ahead4": ("-DTEAAL_ATOMS_AHEAD=4",),
          "ahead8": ("-DTEAAL_ATOMS_AHEAD=8",),
          "shuffled4": ("-DTEAAL_ATOMS_AHEAD=4", "-DTEAAL_ATOMS_SHUFFLED=1"),
          "shuffled8": ("-DTEAAL_ATOMS_AHEAD=8", "-DTEAAL_ATOMS_SHUFFLED=1")}
CHUNKS = (24, 48, 64, 128)


def main():
    timer = Timer(cp)
    module = cp.RawModule(code=coop_probe.kernel_source(), options=("--std=c++17",))
    out = []
    for name in MATS:
        A = coop_probe.load(name)
        A.sort_indices()
        rows, cols = A.shape
        rng = np.random.default_rng(1)
        B = cp.asarray(rng.standard_normal((cols, N)).astype(np.float32))
        ref = A.astype(cp.float64) @ B.astype(cp.float64)
        bound = float((abs(A).astype(cp.float64) @ abs(B).astype(cp.float64)).max())
        Z = cp.empty((rows, N), dtype=cp.float32)
        base = SpMM(A, N, B=B, C=Z)
        base.choose(timer)
        ops = {"cusparse": lambda i: base.launch(B, Z)}
        for build, forced in BUILDS.items():
            for chunk in CHUNKS:
                FORCED["options"] = forced
                k = teaal_loops.compile("specs/spmm/nonzero_split_vec.yaml", dtype="float32",
                                        params={"NNZ_PER_WORKER": chunk})
                launch = k.bind_dense(k.prepare(A), (B,), Z)
                ops[f"{build} chunk{chunk}"] = (lambda i, launch=launch: launch.launch())
        FORCED["options"] = None
        rowptr, colidx = A.indptr.astype(cp.int32), A.indices.astype(cp.int32)
        for chunk in (64, 128, 256):
            fn = module.get_function("coop_32_1_1")
            grid = -(-(-(-A.nnz // chunk)) * 32 // 128)
            args = (rowptr, colidx, A.data, B, Z, np.int32(rows), np.int32(A.nnz), np.int32(chunk))

            def op(i, fn=fn, grid=grid, args=args):
                cp.cuda.runtime.memsetAsync(Z.data.ptr, 0, Z.nbytes, cp.cuda.get_current_stream().ptr)
                fn((grid,), (128,), args)
            ops[f"coop chunk{chunk}"] = op
        times = {}
        for label, op in ops.items():
            Z.fill(np.nan)
            op(0)
            cp.cuda.Device().synchronize()
            err = float(cp.abs(Z.astype(cp.float64) - ref).max()) / bound
            times[label] = [] if err < 1e-5 else None
            if times[label] is None:
                print(name, label, "WRONG", err, flush=True)
        for _round in range(3):
            for label, op in ops.items():
                if times[label] is not None:
                    times[label].append(timer.queued(op, REPS).median * 1e3)
        med = {k: statistics.median(v) for k, v in times.items() if v}
        cu = med["cusparse"]
        line = [f"{name:24s} N={N} cusparse {cu:7.1f}"]
        for build in list(BUILDS) + ["coop"]:
            mine = {k: v for k, v in med.items() if k.startswith(build + " ")}
            if mine:
                b = min(mine, key=mine.get)
                line.append(f"{build} {mine[b]:7.1f} ({cu / mine[b]:.3f}x, {b.split()[1]})")
        print(" | ".join(line), flush=True)
        out.append({"matrix": name, "n": N, "rows": rows, "nnz": int(A.nnz), "us": med})
        del base
    with open(os.path.join(OUT, f"warp_shuffle_probe_n{N}.json"), "w") as f:
        json.dump({"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "cases": out}, f, indent=1)


if __name__ == "__main__":
    main()
