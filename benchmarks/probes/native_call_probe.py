"""The prepared SpMV call's host cost: the Python one-step call (vector_call.VectorCall) against
its C twin (runtime/native/vector_call.c), and the pieces both share, in one process.

Every call takes turns in the same rounds (bench.timing.Timer.host_rounds: 15 rounds, each
a batch of 200 calls behind a spin, so the GPU never sets the pace), on the host-cost matrix
of bench.api_costs (uniform, 2,000 rows, 10,000 nonzeros, float32), for the four schedules.
Both calls' outputs are checked against cuSPARSE's A @ x first.

    PYTHONPATH=. python3 benchmarks/probes/native_call_probe.py --out native_call.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

import numpy as np

import teaal_loops.pipeline as pipeline
from teaal_loops.bench.api_costs import HOST_NNZ, HOST_ROWS, SCHEDULES, _spec
from teaal_loops.bench.timing import Timer
from teaal_loops.matrix import synthetic
from teaal_loops.runtime import backend, vector_call


def host_matrix(cupy: Any) -> tuple[Any, Any, Any]:
    """(the host-cost matrix of bench.api_costs, float32, on the host and as a cupyx matrix,
    and an x for it on the device)."""
    import cupyx.scipy.sparse as csp

    A = synthetic("uniform", rows=HOST_ROWS, nnz=HOST_NNZ, seed=1).astype(np.float32)
    x = cupy.asarray(np.random.default_rng(0).uniform(-1, 1, A.shape[1]).astype(np.float32))
    return A, csp.csr_matrix(A), x


def one_step_calls(cupy: Any, name: str, A_dev: Any, x: Any) -> tuple[Any, ...]:
    """(kernel, prepared matrix, its raw launcher, the Python one-step call, the runtime's
    choice of one-step call) of schedule ``name`` on ``A_dev``, after one warm call."""
    kernel: Any = pipeline.compile(_spec(name), dtype="float32")
    prepared = kernel.prepare(A_dev)
    kernel(prepared, x)
    raw = prepared._raw[False]
    rows, cols = A_dev.shape
    common = dict(zeroed=prepared.accumulates, owner=prepared.no_owner.data.ptr,
                  scratch=prepared.scratch)
    python = vector_call.VectorCall(cupy, raw, rows, cols, np.float32, **common)
    native = vector_call.vector_call(cupy, raw, rows, cols, np.float32, **common)
    return kernel, prepared, raw, python, native


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    cupy = backend.cupy_module()
    _A, A_dev, x = host_matrix(cupy)
    want = (A_dev @ x).get()
    ops: dict[Any, Any] = {}
    errors: dict[str, float] = {}
    for name in SCHEDULES:
        kernel, prepared, raw, python, native = one_step_calls(cupy, name, A_dev, x)
        if isinstance(native, vector_call.VectorCall):
            print(f"no native call: {vector_call.native_unavailable()}", file=sys.stderr)
            return 2
        y = kernel.new_output(prepared)
        stream_ptr = cupy.cuda.get_current_stream().ptr
        pointers = (x.data.ptr, y.data.ptr, prepared.no_owner.data.ptr)
        if prepared.scratch is not None:
            pointers += (prepared.scratch.pointer(stream_ptr),)
        for label, call in (("python", python), ("native", native)):
            errors[f"{name}/{label}"] = float(np.abs(call(x).get() - want).max())
        ops[(name, "python_call")] = lambda _, c=python: c(x)
        ops[(name, "native_call")] = lambda _, c=native: c(x)
        ops[(name, "kernel(prepared, x)")] = lambda _, k=kernel, p=prepared: k(p, x)
        ops[(name, "launch alone (Python launcher)")] = (
            lambda _, r=raw, s=stream_ptr, p=pointers: r.launch_on(s, p))
        stream = cupy.cuda.get_current_stream()
        ops[(name, "output alone")] = (
            lambda _, o=python.outputs, s=stream, p=stream_ptr: o.new(s, p))
    timer = Timer(cupy)
    hosts = timer.host_rounds(ops, rounds=args.rounds)
    rows = []
    for (name, call), cost in hosts.items():
        rows.append({"schedule": name, "call": call, "median_us": cost.median_us,
                     "min_us": cost.min_us, "rounds_us": list(cost.us), "queued": cost.queued})
    ratios = {}
    for name in SCHEDULES:
        a = hosts[(name, "native_call")].us
        b = hosts[(name, "python_call")].us
        ratios[name] = statistics.median(p / q for p, q in zip(a, b, strict=True))
    report = {"device": backend.device_info().name, "matrix": f"uniform:rows={HOST_ROWS},"
              f"nnz={HOST_NNZ},seed=1", "dtype": "float32", "rounds": args.rounds,
              "max_abs_error": errors, "native_over_python_paired": ratios, "rows": rows}
    with open(args.out, "w") as fh:
        json.dump(report, fh, indent=1)
    for row in rows:
        print(f"{row['schedule']:14s} {row['call']:32s} {row['median_us']:6.2f} us "
              f"(min {row['min_us']:.2f})")
    print("native / python, paired by round:", {k: round(v, 3) for k, v in ratios.items()})
    print("max abs error:", max(errors.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
