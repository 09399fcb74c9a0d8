"""A hand-made results document in the schema run_bench writes (for report tests)."""

from __future__ import annotations

from typing import Any

from teaal_loops.bench.harness import SCHEMA
from teaal_loops.bench.records import add_speedups


def timing(ms: float, reps: int = 25) -> dict[str, Any]:
    return {"median_ms": ms, "min_ms": ms * 0.95, "max_ms": ms * 1.1, "reps": reps}


def result(label: str, kernel_ms: float, launch_ms: float, *, valid: bool = True,
           auto: bool = False, gbps: float | None = None, copy: float = 3000.0) -> dict[str, Any]:
    r: dict[str, Any] = {
        "label": label, "spec": label.split("[")[0], "params": {}, "layout": "csr",
        "schedule": label.split("[")[0].replace("_block", ""), "valid": valid,
        "mismatches": 0 if valid else 7, "launch": timing(launch_ms), "kernel": timing(kernel_ms),
        "call": timing(launch_ms * 3), "gbps": gbps, "copy_fraction": gbps / copy if gbps else None,
    }
    if auto:
        r["auto"] = True
    return r


def case(name: str, group: str, cusparse_call: float, cusparse_kernel: float,
         results: list[dict[str, Any]], *, source: str = "", rule: str = "R4") -> dict[str, Any]:
    c: dict[str, Any] = {
        "matrix": name, "group": group, "source": source or f"file:{name}.mtx",
        "dtype": "float32", "rows": 1000, "cols": 1000, "nnz": 10_000,
        "cusparse": {"call": timing(cusparse_call),
                     "kernel": {**timing(cusparse_kernel), "queued": True},
                     "gbps": 100.0, "copy_fraction": 0.03},
        "results": results,
    }
    auto = next((r for r in results if r.get("auto")), None)
    if auto:
        c["auto_choice"] = {"label": auto["label"], "rule": rule, "reason": "because"}
    add_speedups(c)
    return c


def document() -> dict[str, Any]:
    """Two corpus matrices (one misses 2x), two large ones (banded below 80% of copy)."""
    cases = [
        case("tiny", "corpus", 0.065, 0.006, [
            result("thread_mapped", 0.004, 0.010),
            result("group_mapped[BLOCK_SIZE=4]", 0.003, 0.009, auto=True),
            result("merge_path", 0.002, 0.012, valid=False),
        ]),
        case("slow", "corpus", 0.040, 0.030, [
            result("thread_mapped", 0.030, 0.035, auto=True),
            result("merge_path", 0.025, 0.028),
        ], rule="R6"),
        case("banded", "large", 0.75, 0.70, [
            result("group_mapped[BLOCK_SIZE=32]", 0.72, 0.72, gbps=2900.0, auto=True),
            result("merge_path", 0.90, 0.90, gbps=2300.0),
        ], source="gpu:banded:rows=8388608,width=32"),
        case("rmat-s23", "large", 1.10, 1.05, [
            result("merge_path", 1.00, 1.00, gbps=1300.0, auto=True),
        ], source="gpu:rmat:nnz=160000000,scale=23", rule="R2"),
    ]
    return {
        "schema": SCHEMA, "date": "2026-11-20T10:00:00+00:00",
        "command": "teaal-loops bench --suite corpus --suite large",
        "device": {"name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "l2_bytes": 52428800,
                   "compute_capability": "90", "cupy_version": "14.0", "runtime_version": 13000,
                   "driver_version": 13000},
        "settings": {"reps": 25, "warmup": 5, "timing": {"call": "events"}},
        "copy": {"gbps": 3000.0, "buffer_bytes": 2**30, "reps": 20},
        "cases": cases,
    }
