"""How much of a prepared SpMV call is the driver's launch, by stream: the driver called from
a C loop (launch_floor.c, no Python between launches), CuPy's binding through the Python
launcher, the native one-step call, the Python one-step call and ``kernel(prepared, x)``, on
CuPy's legacy default stream, a non-blocking stream and the per-thread default stream.

Each stream kind is one ``Timer.host_rounds`` (its calls interleaved, batches of 200 behind a
spin), the kinds in turn, twice. The host-cost matrix of bench.api_costs, float32.

    PYTHONPATH=. python3 benchmarks/probes/launch_floor_probe.py --out launch_floor.json
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from native_call_probe import host_matrix, one_step_calls  # beside this file

from teaal_loops.bench.timing import Timer
from teaal_loops.runtime import backend, launcher

SCHEDULES = ("thread_mapped", "merge_path")


def _floor_library() -> Any:
    out = Path(tempfile.mkdtemp()) / "launch_floor.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", str(Path(__file__).with_name(
        "launch_floor.c")), "-o", str(out)], check=True)
    lib = ctypes.CDLL(str(out))
    lib.launch_loop.restype = ctypes.c_int
    lib.launch_loop.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint, ctypes.c_uint,
                                ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int]
    return lib


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    cupy = backend.cupy_module()
    lib = _floor_library()
    address = launcher.launch_kernel_address()
    _A, A_dev, x = host_matrix(cupy)
    streams = {"legacy default": cupy.cuda.Stream.null,
               "non-blocking": cupy.cuda.Stream(non_blocking=True),
               "per-thread default": cupy.cuda.Stream.ptds}
    setups = {}
    for name in SCHEDULES:
        kernel, prepared, raw, python, native = one_step_calls(cupy, name, A_dev, x)
        y = kernel.new_output(prepared)
        setups[name] = (kernel, prepared, raw, python, native, y)
    rows = []
    timer = Timer(cupy)
    for repeat in range(2):
        for kind, stream in streams.items():
            with stream:
                ops: dict[Any, Any] = {}
                for name, (kernel, prepared, raw, python, native, y) in setups.items():
                    sp = stream.ptr
                    pointers = (x.data.ptr, y.data.ptr, prepared.no_owner.data.ptr)
                    if prepared.scratch is not None:
                        pointers += (prepared.scratch.pointer(sp),)
                    slots, params, params_address = raw._argument_array()
                    slots[:] = pointers
                    fn, grid, block, _ = raw.native_parts()
                    ops[(name, "driver from C, 1 launch")] = (
                        lambda _, a=(address, fn, grid, block, sp, params_address),
                        k=(slots, params):  # both kept alive: the driver reads through them
                        lib.launch_loop(*a, 1))
                    ops[(name, "launch alone (Python launcher)")] = (
                        lambda _, r=raw, s=sp, p=pointers: r.launch_on(s, p))
                    ops[(name, "native call")] = lambda _, c=native: c(x)
                    ops[(name, "python call")] = lambda _, c=python: c(x)
                    ops[(name, "kernel(prepared, x)")] = (
                        lambda _, k=kernel, p=prepared: k(p, x))
                # the C loop's own cost per launch, 200 launches a call
                fn, grid, block, _ = setups["thread_mapped"][2].native_parts()
                raw0 = setups["thread_mapped"][2]
                slots, params, params_address = raw0._argument_array()
                slots[:] = (x.data.ptr, setups["thread_mapped"][5].data.ptr,
                            setups["thread_mapped"][1].no_owner.data.ptr)
                loop_args = (address, fn, grid, block, stream.ptr, params_address)
                hosts = timer.host_rounds(ops, rounds=9)
                stream.synchronize()
                timer.spin(20.0)
                t = __import__("time").perf_counter()
                status = lib.launch_loop(*loop_args, 500)
                per_launch = (__import__("time").perf_counter() - t) / 500 * 1e6
                stream.synchronize()
            for (name, call), cost in hosts.items():
                rows.append({"repeat": repeat, "stream": kind, "schedule": name, "call": call,
                             "median_us": cost.median_us, "min_us": cost.min_us,
                             "queued": cost.queued})
            rows.append({"repeat": repeat, "stream": kind, "schedule": "thread_mapped",
                         "call": "driver from C, 500 launches in one loop",
                         "median_us": per_launch, "min_us": per_launch, "status": status,
                         "queued": None})
    report = {"device": backend.device_info().name, "rows": rows}
    Path(args.out).write_text(json.dumps(report, indent=1))
    for r in rows:
        print(f"{r['repeat']} {r['stream']:19s} {r['schedule']:14s} {r['call']:42s} "
              f"{r['median_us']:6.2f} (min {r['min_us']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
