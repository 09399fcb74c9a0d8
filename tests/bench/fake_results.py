"""Hand-made results documents (for report tests): ``document()`` in schema 1 (what the
committed BENCHMARKS.json.gz is), ``document_v2()`` in the schema run_bench writes now."""

from __future__ import annotations

from typing import Any

from teaal_loops.bench.records import add_speedups as add_speedups_v2
from teaal_loops.bench.results_v1 import add_speedups
from teaal_loops.bench.schema import SCHEMA, SCHEMA_V1


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
        "schema": SCHEMA_V1, "date": "2026-11-20T10:00:00+00:00",
        "command": "teaal-loops bench --suite corpus --suite large",
        "device": {"name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "l2_bytes": 52428800,
                   "compute_capability": "90", "cupy_version": "14.0", "runtime_version": 13000,
                   "driver_version": 13000},
        "settings": {"reps": 25, "warmup": 5, "timing": {"call": "events"}},
        "copy": {"gbps": 3000.0, "buffer_bytes": 2**30, "reps": 20},
        "cases": cases,
    }


# --------------------------------------------------------------------------------------------
# schema 2


def side(kernel: float, throughput: float, latency: float, *, graph: float | None = None,
         **extra: Any) -> dict[str, Any]:
    """A baseline's or a variant's timings (ms); ``graph``: its replay throughput."""
    out: dict[str, Any] = {"kernel": {**timing(kernel), "queued": True},
                           "throughput": {**timing(throughput), "batch": 4},
                           "latency": timing(latency), **extra}
    out["graph"] = ({"throughput": timing(graph), "latency": timing(graph * 2)}
                    if graph is not None else {"reason": "not capturable: refused (fake)"})
    return out


def variant(label: str, kernel: float, *, valid: bool = True, gbps: float | None = None,
            auto: bool = False, graph: float | None = None) -> dict[str, Any]:
    if not valid:
        return {"label": label, "spec": label.split("[")[0], "valid": False, "mismatches": 3,
                "error": "wrong result: 3 entries outside the rounding bound; not timed"}
    r = {"label": label, "spec": label.split("[")[0], "params": {}, "layout": "csr",
         "schedule": "thread_mapped", "valid": True, "mismatches": 0,
         **side(kernel, kernel * 1.2, kernel * 2, graph=graph),
         "call": timing(kernel * 1.5), "gbps": gbps,
         "copy_fraction": gbps / 3000.0 if gbps else None}
    if auto:
        r["auto"] = True
    return r


def case_v2(name: str, group: str, kernel: str, width: int | None,
            cusparse: dict[str, Any] | None, results: list[dict[str, Any]], *,
            source: str = "", second: dict[str, Any] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {
        "matrix": name, "group": group, "kernel": kernel, "width": width,
        "source": source or f"file:{name}.mtx", "dtype": "float32", "rows": 1000,
        "cols": 1000, "nnz": 10_000, "stats": {"rows": 1000, "nnz": 10_000, "mean": 10.0,
                                               "max": 30, "cv": 0.5},
        "results": results,
    }
    if cusparse is not None:
        c["cusparse"] = cusparse
    if second is not None:
        c["second"] = second
    if any(r.get("auto") for r in results):
        c["auto_choice"] = {"label": next(r["label"] for r in results if r.get("auto")),
                            "rule": "R1", "reason": "because"}
    add_speedups_v2(c)
    return c


def best_cusparse(kernel: float, *, winner: str = "CSR_ALG2", library: str = "cupy",
                  graph: float | None = None) -> dict[str, Any]:
    return side(kernel, kernel * 1.1, kernel * 1.5, graph=graph, winner=winner,
                library=library, baseline=f"cuSPARSE {winner}",
                preprocess={"ran": False, "why": "nvmath-python is not importable"},
                gbps=900.0, copy_fraction=0.3)


def document_v2() -> dict[str, Any]:
    """SpMV on two corpus matrices and banded; SpMM at N=8 and 32 on one corpus matrix and
    two large classes; SDDMM on one matrix at K=32 (numbers chosen so that each target's
    outcome is known: see test_report_v2)."""
    gpu = "gpu:{}:rows=1048576"
    cases = [
        case_v2("tiny", "corpus", "spmv", None, best_cusparse(0.010, graph=0.004), [
            variant("group_mapped[BLOCK_SIZE=4]", 0.004, auto=True, graph=0.002),
            variant("merge_path", 0.003, valid=False),
        ], second=side(0.012, 0.030, 0.040, what="cupyx A @ x")),
        case_v2("slow", "corpus", "spmv", None, best_cusparse(0.030), [
            variant("merge_path", 0.025, auto=True),
        ]),
        case_v2("banded", "large", "spmv", None, best_cusparse(0.700), [
            variant("group_mapped[BLOCK_SIZE=8]", 0.600, gbps=2700.0, auto=True),
        ], source=gpu.format("banded")),
        case_v2("tiny", "corpus", "spmm", 8, best_cusparse(0.020), [
            variant("lanes_over_n", 0.010), variant("group_lanes_over_k", 0.005, valid=False),
        ], second=side(0.050, 0.060, 0.070, what="cupyx A @ B")),
        case_v2("uniform-r20", "large", "spmm", 8, best_cusparse(0.900), [
            variant("lanes_over_n", 0.300)], source=gpu.format("uniform")),
        case_v2("uniform-r20", "large", "spmm", 32, best_cusparse(1.000), [
            variant("lanes_over_n", 0.800)], source=gpu.format("uniform")),
        case_v2("banded-r20", "large", "spmm", 8, best_cusparse(0.500), [
            variant("lanes_over_n", 0.400, gbps=2100.0)], source=gpu.format("banded")),
        case_v2("tiny", "corpus", "sddmm", 32,
                best_cusparse(1.000, winner="ROW+preprocess", library="nvmath"), [
                    variant("thread_per_nonzero", 2.500)]),
        case_v2("bad", "corpus", "sddmm", 32, {"error": "no SDDMM backend: fake"}, [
            variant("thread_per_nonzero", 2.000)]),
    ]
    return {
        "schema": SCHEMA, "date": "2026-11-24T10:00:00+00:00",
        "command": "teaal-loops bench --suite corpus --suite spmm --suite sddmm",
        "device": {"name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "l2_bytes": 52428800,
                   "compute_capability": "90", "cupy_version": "14.2", "runtime_version": 13000,
                   "driver_version": 13000},
        "settings": {"reps": 25, "warmup": 5, "timing": {"kernel": "device time"}},
        "libraries": {"cupy": True, "nvmath": "nvmath-python is not importable (fake)",
                      "torch": True, "preprocess": "not run: nvmath-python is not importable",
                      "sddmm": "torch"},
        "copy": {"gbps": 3000.0, "buffer_bytes": 2**30, "reps": 20},
        "cases": cases,
    }
