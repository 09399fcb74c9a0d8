"""Does the garbage collector set the prepared call's host cost? Runs bench.api_costs'
host_costs with the collector as is ("normal"), disabled ("off") or after gc.freeze()
("freeze") around the timed rounds, and writes each schedule's median host us of
``kernel(prepared, x)``, ``kernel(A, x)`` and ``launch``.

    PYTHONPATH=. python3 benchmarks/probes/gc_probe.py normal|off|freeze gc.json
    TEAAL_LOOPS_NATIVE=0 PYTHONPATH=. python3 benchmarks/probes/gc_probe.py normal gc.json
"""

import gc
import json
import sys

import teaal_loops.bench.timing as timing
from teaal_loops.bench import api_costs
from teaal_loops.runtime import backend

mode, out = sys.argv[1], sys.argv[2]
timed_rounds = timing.Timer.host_rounds


def host_rounds(self, *args, **kwargs):
    if mode == "off":
        gc.collect()
        gc.disable()
    elif mode == "freeze":
        gc.collect()
        gc.freeze()
    try:
        return timed_rounds(self, *args, **kwargs)
    finally:
        gc.enable()


timing.Timer.host_rounds = host_rounds
cupy = backend.cupy_module()
print("objects tracked:", len(gc.get_objects()), "thresholds", gc.get_threshold())
host = api_costs.host_costs(cupy, False)


def column(call):
    return {n: round(k[call]["host_us"], 2) for n, k in host["kernels"].items()}


report = {"mode": mode, "prepared": column("call_prepared"),
          "cupyx_matrix": column("call_cupyx_matrix"), "launch": column("launch")}
print(report)
with open(out, "w") as fh:
    json.dump(report, fh)
