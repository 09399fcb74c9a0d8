"""Run a benchmark: every matrix x kernel x dtype x dense width x variant, against the best
cuSPARSE and a one-line second column, in one process.

A *case* is one matrix with one kernel (SpMV, SpMM, SDDMM), one dtype and, for the dense
kernels, one width (SpMM's N, SDDMM's K). Each matrix is loaded (or generated on the GPU)
once for all of its cases. How a case runs: :mod:`teaal_loops.bench.case_spmv` and
:mod:`teaal_loops.bench.case_dense`; how each side is timed: :mod:`teaal_loops.bench.sides`;
the baselines: :mod:`teaal_loops.bench.baselines`; what the document holds:
:mod:`teaal_loops.bench.schema`. ``best`` is the valid variant with the lowest ``kernel``
time.

Results are written as JSON after every case, so a run that is stopped keeps what it measured.
"""

from __future__ import annotations

import datetime as _dt
import math
import platform
import time
from typing import Any

from teaal_loops.bench import baselines, case_dense, case_spmv, l2_probe, records, sides, timing
from teaal_loops.bench.context import ROTATE_FACTOR, BenchOptions, Context, rotation_copies
from teaal_loops.bench.loading import load_entry
from teaal_loops.bench.progress import Progress
from teaal_loops.bench.results import summarize
from teaal_loops.bench.schema import SCHEMA
from teaal_loops.bench.sides import CAPPED_REPS, SLOW_FACTOR, SLOW_MS
from teaal_loops.bench.suite import PlanItem
from teaal_loops.errors import TeaalLoopsError
from teaal_loops.matrix.limit_model import GatherCurve
from teaal_loops.runtime import backend

LOOP_CALLS = 200  # back-to-back calls of a loop timing (host overhead) ...
LOOP_BUDGET_MS = 20.0  # ... fewer where they would take longer than this

TIMING_NOTES = {
    "kernel": "CUDA events around each call, every call queued behind a spin kernel: device "
    "time alone (what best and the device speedups compare)",
    "throughput": "calls back to back between one pair of events, per call (batches of up to "
    "40 calls, median of the batches): what an iterative solver sees, the host's issuing "
    "rate where that is slower than the GPU",
    "latency": "one call between a pair of events, the GPU idle before it: from the call's "
    "start to its result",
    "graph": "the same call captured in a CUDA graph (one per input copy) and replayed: "
    "throughput and latency of the replays",
    "call": "SpMV only: the convenient call kernel(prepared, x), which allocates y, for "
    "throughput (the second column's one-line call is compared with it)",
    "ours": "generated kernels: SpMV's lean Kernel.launch into a pre-allocated y, the dense "
    "kernels' call_dense(prepared, operands, out=...), the zeroing an accumulating schedule "
    "needs included",
}

__all__ = ["CAPPED_REPS", "ROTATE_FACTOR", "SCHEMA", "SLOW_FACTOR", "SLOW_MS", "BenchOptions",
           "loop_calls", "rotation_copies", "run_bench"]


def run_bench(options: BenchOptions, progress: Progress | None = None) -> dict[str, Any]:
    """Run every case of ``options`` and return the results document (module docstring)."""

    if options.reps < 1 or options.warmup < 0:
        raise TeaalLoopsError(f"--reps {options.reps} / --warmup {options.warmup}: out of range")
    cp = backend.cupy_module()
    device = backend.device_info()
    timer = timing.Timer(cp)
    started = time.perf_counter()
    doc = _document(cp, device, options, timer)
    l2 = doc.get("l2") or {}
    gathers = GatherCurve.of((l2.get("gather") or {}).get("curve"))  # None: not measured
    ctx = Context(cp, timer, device, options, float(doc["copy"]["gbps"]), progress,
                  l2_gbps=l2.get("gbps"), gathers=gathers)
    items = options.items()
    if progress:
        progress.start(sum(_steps(options, item) for item in items))
    for item in items:
        if _over_budget(options, started):
            doc["incomplete"] = True
            doc.setdefault("skipped", []).append(item.entry.name)
            continue
        _run_item(ctx, item, doc, started)
        doc["elapsed_s"] = round(time.perf_counter() - started, 1)
        if options.json_path:
            records.write_json(doc, options.json_path)
    doc["summary"] = summarize(doc)
    if progress:
        progress.finish()
    if options.json_path:
        records.write_json(doc, options.json_path)
    return doc


def _document(cp: Any, device: Any, options: BenchOptions, timer: Any) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": options.command,
        "device": records.device_json(cp, device),
        "host": {"python": platform.python_version(), "machine": platform.machine()},
        "settings": {
            "reps": options.reps,
            "warmup": options.warmup,
            "rotate_factor": ROTATE_FACTOR,
            "max_copies": options.max_copies,
            "capped_reps": CAPPED_REPS,
            "slow_ms": SLOW_MS,
            "choice_reps": baselines.CHOICE_REPS,
            "widths": {k: list(options.widths_of(k)) for k in ("spmm", "sddmm")},
            "check": "every entry within the rounding bound 2 (n + 2) eps (|A| |x|) of the "
            "reference (n: the terms summed), outputs poisoned with NaN first; wrong results "
            "are not timed",
            "timing": dict(TIMING_NOTES),
            **options.extra,
        },
        "libraries": baselines.libraries(),
        "copy": timing.copy_bandwidth(cp, timer),
        "l2": _l2(cp, timer),
        "cases": [],
        "incomplete": False,
    }


def _l2(cp: Any, timer: Any) -> dict[str, Any]:
    """The L2 read rate and random-gather curve the limit model divides gathers by, or why
    they were not measured."""
    try:
        out = l2_probe.l2_bandwidth(cp, timer)
    except Exception as exc:  # a probe that cannot run here: the model falls back, saying so
        return {"error": sides.first_line(exc)}
    try:
        out["gather"] = l2_probe.gather_curve(cp, timer)
    except Exception as exc:  # the model then divides every gather by the read rate
        out["gather"] = {"error": sides.first_line(exc)}
    return out


def _steps(options: BenchOptions, item: PlanItem) -> int:
    total = 0
    for kernel in item.kernels:
        variants = len(options.variants_of(kernel)) + (1 if kernel == "spmv" else 0)
        variants += len(options.splits) if kernel in ("spmv", "spmm") else 0
        total += len(options.dtypes) * len(options.widths_of(kernel)) * (variants + 1)
    return total


def _over_budget(options: BenchOptions, started: float) -> bool:
    budget = options.time_budget_s
    return bool(budget) and time.perf_counter() - started > float(budget or 0)


def _run_item(ctx: Context, item: PlanItem, doc: dict[str, Any], started: float) -> None:
    """Every case of one matrix; a matrix that cannot be loaded is one error case."""
    cp, entry, options = ctx.cp, item.entry, ctx.options
    base = {"matrix": entry.name, "group": entry.group}
    try:
        t0 = time.perf_counter()
        indptr, indices, data, shape, stats = load_entry(cp, entry, options.seed)
        load_s = round(time.perf_counter() - t0, 2)
    except Exception as err:  # a bad file, an out-of-memory: record it, go on
        # one error case per kernel, so that every target over the matrix counts the miss
        doc["cases"] += [{**base, "kernel": kernel, "width": None, **_error(err)}
                         for kernel in item.kernels]
        cp.get_default_memory_pool().free_all_blocks()
        return
    for kernel in item.kernels:
        for dtype in options.dtypes:
            values = data.astype(dtype, copy=False)
            loaded = (indptr, indices, values, shape, stats)
            for width in options.widths_of(kernel):
                if _over_budget(options, started):
                    doc["incomplete"] = True
                    doc.setdefault("skipped", []).append(_case_name(entry.name, kernel, width,
                                                                    dtype))
                    continue
                header = {**base, "source": entry.source, "kernel": kernel, "width": width,
                          "dtype": dtype, "rows": int(shape[0]), "cols": int(shape[1]),
                          "nnz": int(indices.size), "stats": records.stats_json(stats),
                          "load_s": load_s}
                doc["cases"].append(_run_case(ctx, kernel, width, dtype, loaded, header, item))
                if options.json_path:
                    records.write_json(doc, options.json_path)
            del values
    del indptr, indices, data
    cp.get_default_memory_pool().free_all_blocks()


def _run_case(ctx: Context, kernel: str, width: int | None, dtype: str, loaded: Any,
              header: dict[str, Any], item: PlanItem) -> dict[str, Any]:
    try:
        if kernel == "spmv":
            case = case_spmv.run_case(ctx, item.entry, dtype, loaded, header)
        else:
            assert width is not None
            case = case_dense.run_case(ctx, item.entry, kernel, dtype, width, loaded, header)
    except Exception as err:  # a bug or an out-of-memory: record it, go on with the next
        case = {**header, **_error(err)}
    finally:
        ctx.cp.get_default_memory_pool().free_all_blocks()
    if ctx.progress:
        ctx.progress.note(records.case_line(case) if "error" not in case
                          else f"{header['matrix']} {kernel}: {case['error']}")
    return case


def _error(err: BaseException) -> dict[str, Any]:
    if isinstance(err, TeaalLoopsError):
        return {"error": str(err)}
    return {"bug": True, "error": f"{type(err).__name__}: {records.first_line(err)}"}


def _case_name(matrix: str, kernel: str, width: int | None, dtype: str) -> str:
    name = {"spmm": "N", "sddmm": "K"}.get(kernel)
    return f"{matrix} {kernel}" + (f" {name}={width}" if name else "") + f" {dtype}"


def loop_calls(reps: int, ms_per_call: float) -> int:
    """Calls for a ``loop`` timing: LOOP_CALLS, fewer for slow calls (LOOP_BUDGET_MS), at
    least ``reps``."""
    if not ms_per_call or ms_per_call <= 0 or math.isnan(ms_per_call):
        return reps
    return max(reps, min(LOOP_CALLS, int(LOOP_BUDGET_MS / ms_per_call)))
