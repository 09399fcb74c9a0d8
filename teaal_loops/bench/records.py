"""The pieces of a results document: JSON of devices, statistics, bounds and speedups; log lines.

:mod:`teaal_loops.bench.harness` measures; this module shapes what it measured into the
document (the schema :mod:`teaal_loops.bench.schema` checks) and writes it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from teaal_loops.bench.results import WAYS, case_best_and_auto, graph_ms, median, ratio
from teaal_loops.bench.roofline import roofline
from teaal_loops.errors import Location, TeaalLoopsError
from teaal_loops.schedules import describe_sizes


def check_output_path(path: Path) -> None:
    """Refuse, before any work, an output path that cannot be written as a file: a folder, or
    a path under something that is not a folder (one line, no traceback later)."""

    where = Location(str(path))
    if path.is_dir():
        raise TeaalLoopsError("is a directory, expected a file to write", location=where)
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise TeaalLoopsError(f"{parent} is not a directory", location=where)
            break


def write_json(doc: dict[str, Any], path: Path) -> None:
    """Write ``doc`` to ``path`` atomically (a temporary file, then a rename); an OS error, such
    as a full disk, is one :class:`~teaal_loops.errors.TeaalLoopsError` line."""

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1, default=json_default) + "\n")
        tmp.replace(path)
    except OSError as err:
        raise TeaalLoopsError(f"cannot write: {err.strerror or err}",
                              location=Location(str(path))) from None


def json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def device_json(cp: Any, device: Any) -> dict[str, Any]:
    free, total = cp.cuda.runtime.memGetInfo()
    return {
        "name": device.name,
        "sm_count": device.sm_count,
        "l2_bytes": device.l2_bytes,
        "memory_bytes": int(total),
        "driver_version": int(cp.cuda.runtime.driverGetVersion()),
        "runtime_version": int(cp.cuda.runtime.runtimeGetVersion()),
        "cupy_version": str(cp.__version__),
        "compute_capability": str(cp.cuda.Device().compute_capability),
    }


def stats_json(stats: Any) -> dict[str, Any]:
    keys = ("rows", "cols", "nnz", "mean", "max", "min", "std", "cv", "empty_rows", "p50", "p90",
            "p99")
    return {k: getattr(stats, k) for k in keys if hasattr(stats, k)}


def bound_json(prepared: Any) -> dict[str, Any]:
    out = describe_sizes(prepared.bound)
    out["group_size"] = prepared.bound.group_size
    out["index_bits"] = prepared.bound.index_bits
    return {k: int(v) for k, v in out.items()}


def roof(nbytes: int, ms: float, copy_gbps: float) -> dict[str, Any]:
    if not ms or ms <= 0 or math.isnan(ms):
        return {"gbps": None, "copy_fraction": None}
    r = roofline(nbytes, ms, copy_gbps)
    return {"gbps": r.gbps, "copy_fraction": r.copy_fraction}


def add_limit_fractions(case: dict[str, Any]) -> None:
    """How close each timed result and the best cuSPARSE come to the case's limit model
    (limit / device median: 1.0 is at the limit)."""
    limit = case.get("limit") or {}
    limit_us = limit.get("limit_us")
    if not limit_us:
        return

    def fraction(record: dict[str, Any]) -> float | None:
        ms = (record.get("kernel") or {}).get("median_ms")
        return limit_us / (ms * 1e3) if ms and ms > 0 else None

    for record in [case.get("cusparse") or {}, *case.get("results", [])]:
        if record and "error" not in record:
            record["of_limit"] = fraction(record)


def add_speedups(case: dict[str, Any]) -> None:
    """Per timed result: the best cuSPARSE's medians over ours (``speedup``) and the second
    column's (``second_speedup``), for every way both sides were timed
    (:mod:`teaal_loops.bench.results`); then the case's ``best`` and ``auto``."""
    best = case.get("cusparse") or {}
    second = case.get("second") or {}
    for r in case.get("results", []):
        if "kernel" not in r:
            continue
        r["speedup"] = {way: ratio(median(best.get(way)), median(r.get(way))) for way in WAYS}
        r["speedup"]["graph"] = ratio(graph_ms(best), graph_ms(r))
        r["second_speedup"] = {way: ratio(median(second.get(way)), median(r.get(way)))
                               for way in WAYS}
        r["second_speedup"]["call"] = ratio(median(second.get("throughput")),
                                            median(r.get("call")))
    case.update(case_best_and_auto(case))


def baseline_kernel_ms(case: dict[str, Any]) -> float | None:
    """The device time a slow variant is compared with: the best cuSPARSE's, else the second
    column's, else None."""
    for side in ("cusparse", "second"):
        ms = median((case.get(side) or {}).get("kernel"))
        if ms is not None:
            return ms
    return None


def guarded_variant(variant: Any, measure: Any) -> dict[str, Any]:
    """A variant's result: its names, then ``measure()``'s record; a user error (a parameter
    refused for this matrix, say) is its one line, anything else a bug's one line."""
    result: dict[str, Any] = {
        "label": variant.label,
        "spec": variant.spec_name,
        "params": dict(variant.params),
        "layout": variant.layout,
    }
    if not getattr(variant, "generated", True):  # launches a source file or a patched text
        result["experiment"] = True
    try:
        result.update(measure())
    except TeaalLoopsError as err:
        result["error"] = str(err)
    except Exception as err:  # a template or runtime bug: record it, keep benchmarking
        result["error"] = f"{type(err).__name__}: {first_line(err)}"
        result["bug"] = True
    return result


def checked(out: dict[str, Any], check: dict[str, Any]) -> bool:
    """Record a validation in ``out``; a wrong result gets an ``error`` naming how wrong, and
    is not timed (a wrong kernel is never reported as fast)."""
    out["valid"] = bool(check.get("valid"))
    for key in ("mismatches", "max_abs_error", "max_error_over_bound"):
        if key in check:
            out[key] = check[key]
    if not out["valid"]:
        out["error"] = (f"wrong result: {check.get('mismatches')} entries outside the rounding "
                        f"bound (worst {check.get('max_error_over_bound', math.inf):.3g}x the "
                        "bound); not timed")
    return out["valid"]


def case_line(case: dict[str, Any]) -> str:
    best = case.get("best") or {}
    auto = case.get("auto") or {}
    width = case.get("width")
    name = f"{case['matrix']} {case.get('kernel', 'spmv')}" + (
        f" {width}" if width is not None else "") + f" ({case.get('dtype')})"
    if not best:
        return f"{name}: no valid result"
    speed = (best.get("speedup") or {}).get("kernel")
    line = (f"{name}: best {best.get('label', '-')} {fmt(best.get('kernel_ms'), 1e3, 'us')}"
            + (f", x{speed:.2f} the best cuSPARSE's device time" if speed else ""))
    over = auto.get("over_best")
    return line + (f"; auto {auto.get('label')} {over:.2f}x best" if over else "")


def variant_line(r: dict[str, Any]) -> str:
    if "kernel" not in r:
        return f"  {r['label']}: {r.get('error') or r.get('skipped') or 'not timed'}"
    flags = " capped" if r.get("capped") else ""
    return (
        f"  {r['label']}: kernel {r['kernel']['median_ms'] * 1e3:.1f} us, throughput "
        f"{r['throughput']['median_ms'] * 1e3:.1f} us, latency "
        f"{r['latency']['median_ms'] * 1e3:.1f} us{flags}"
    )


def fmt(value: float | None, scale: float, unit: str) -> str:
    return "-" if value is None else f"{value * scale:.1f} {unit}"


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
