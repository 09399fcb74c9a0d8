"""Where the prepared SpMV call's last microseconds go: the ways to make its output (a new
CuPy vector around memory already allocated) and the dispatch of ``kernel(prepared, x)``
above the one-step call, in one process, interleaved rounds (bench.timing.Timer.host_rounds:
15 rounds, each a batch of 200 calls behind a spin).

    PYTHONPATH=. python3 benchmarks/probes/output_probe.py --out output_probe.json
"""

from __future__ import annotations

import argparse
import json
import sys
import weakref
from typing import Any

import numpy as np

from teaal_loops.bench.timing import Timer
from teaal_loops.runtime import backend, vector_call

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from native_call_probe import host_matrix, one_step_calls  # noqa: E402

BATCH = 64  # outputs a batch, as vector_call.OutputVectors cuts them for this matrix


def output_ops(cupy: Any, n: int) -> dict[str, Any]:
    """One op per way of making a float32 vector of length ``n`` in batch memory."""
    dtype = np.dtype(np.float32)
    slot = -(-n * 4 // 512) * 512
    count = BATCH
    memory = cupy.cuda.alloc(slot * count)
    mem = memory.mem
    ndarray = cupy.ndarray
    pointer = cupy.cuda.MemoryPointer
    shape = (n,)
    prebuilt = pointer(mem, slot)
    flat = ndarray((slot * count // 4,), dtype, memory)
    grid = flat.reshape(count, slot // 4)
    stream = cupy.cuda.get_current_stream()
    ref = weakref.ref(stream)
    get_device = cupy.cuda.runtime.getDevice
    current = cupy.cuda.get_current_stream
    empty = cupy.empty
    width = slot // 4
    # a batch's outputs and the padding between them as views, in one call: the boundaries
    # n, width, width + n, 2 width, ...
    bounds = [b for k in range(count) for b in (k * width, k * width + n)][1:]
    split = cupy._core.array_split
    return {
        f"per output: _core.array_split, {count} outputs and their padding":
            lambda i: split(flat, bounds, 0),
        f"per output: cupy.array_split, {count} outputs and their padding":
            lambda i: cupy.array_split(flat, bounds),
        "ndarray(shape, dtype, MemoryPointer(mem, off))":
            lambda i: ndarray(shape, dtype, pointer(mem, slot * (i % count))),
        "ndarray(n, dtype, MemoryPointer(mem, off))":
            lambda i: ndarray(n, dtype, pointer(mem, slot * (i % count))),
        "ndarray(shape, dtype, prebuilt pointer)": lambda i: ndarray(shape, dtype, prebuilt),
        "ndarray(shape, dtype, memory + off)":
            lambda i: ndarray(shape, dtype, memory + slot * (i % count)),
        "MemoryPointer(mem, off) alone": lambda i: pointer(mem, slot * (i % count)),
        "grid[i] (2-D batch, row view)": lambda i: grid[i % count],
        "flat[a:b] (slice view)": lambda i: flat[width * (i % count): width * (i % count) + n],
        "flat.view() (a bare view)": lambda i: flat.view(),
        "cupy.empty(shape, dtype) (pool)": lambda i: empty(shape, dtype),
        "getDevice()": lambda i: get_device(),
        "get_current_stream()": lambda i: current(),
        "get_current_stream().ptr": lambda i: current().ptr,
        "weakref deref": lambda i: ref(),
        "lambda alone": lambda i: None,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    cupy = backend.cupy_module()
    print("ndarray mro:", cupy.ndarray.__mro__, "heap type:",
          bool(cupy.ndarray.__flags__ & (1 << 9)), flush=True)
    capi = getattr(sys.modules[cupy.ndarray.__module__], "__pyx_capi__", {})
    print("core __pyx_capi__ (ndarray-ish):",
          sorted(k for k in capi if "ndarray" in k or "view" in k)[:40], flush=True)
    _A, A_dev, x = host_matrix(cupy)
    ops = output_ops(cupy, A_dev.shape[0])
    kernel, prepared, _raw, _python, native = one_step_calls(cupy, "thread_mapped", A_dev, x)

    def wrapper(A: Any, v: Any) -> Any:  # a Python frame and nothing else
        return native(v)

    stream = cupy.cuda.get_current_stream()
    outputs = native.outputs
    python_outputs = vector_call.OutputVectors(cupy, A_dev.shape[0], np.float32,
                                               zeroed=prepared.accumulates)
    # the native call once more, taking its outputs from the Python factory
    from teaal_loops.runtime import native as native_module
    from teaal_loops.runtime.launcher import launch_failed, launch_kernel_address

    function, grid, block, leading = _raw.native_parts()
    mixed = native_module.load().VectorCall(
        cupy.ndarray, np.dtype(np.float32), int(A_dev.shape[1]), cupy.cuda.get_current_stream,
        vector_call.OutputVectors(cupy, A_dev.shape[0], np.float32,
                                  zeroed=prepared.accumulates),
        None if prepared.scratch is None else prepared.scratch.pointer, launch_failed,
        launch_kernel_address(), function, grid, block, leading,
        int(prepared.no_owner.data.ptr), (_raw, prepared.scratch))
    want = (A_dev @ x).get()
    for call in (native, mixed):
        assert float(np.abs(call(x).get() - want).max()) < 1e-4
    ops.update({
        "native one-step call, Python outputs": lambda i: mixed(x),
        "OutputVectors.new(stream, ptr), native": lambda i: outputs.new(stream, stream.ptr),
        "OutputVectors.new(stream, ptr), Python":
            lambda i: python_outputs.new(stream, stream.ptr),
        "native one-step call": lambda i: native(x),
        "def wrapper(A, x): return call(x)": lambda i: wrapper(prepared, x),
        "kernel(prepared, x)": lambda i: kernel(prepared, x),
    })
    timer = Timer(cupy)
    hosts = timer.host_rounds(ops, rounds=args.rounds)
    rows = [{"call": name, "median_us": cost.median_us, "min_us": cost.min_us,
             "rounds_us": list(cost.us), "queued": cost.queued} for name, cost in hosts.items()]
    for row in rows:
        if row["call"].startswith("per output"):  # one call makes a whole batch
            for key in ("median_us", "min_us"):
                row[key] /= BATCH
            row["rounds_us"] = [u / BATCH for u in row["rounds_us"]]
    report = {"device": backend.device_info().name, "rows": rows, "rounds": args.rounds,
              "n": int(A_dev.shape[0])}
    with open(args.out, "w") as fh:
        json.dump(report, fh, indent=1)
    for row in rows:
        print(f"{row['call']:48s} {row['median_us']:6.2f} us (min {row['min_us']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
