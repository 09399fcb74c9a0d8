"""Measure the cuSPARSE baselines of one matrix: JSON-ready records for the benchmark.

    from teaal_loops.bench.cusparse import measure_baselines
    doc = measure_baselines(A, "float32", (8, 32, 128), Timer(cupy))

For SpMV (once), SpMM (each width N) and SDDMM (each width K) a record holds: every
algorithm's queued (device) and per-call medians, whether its result agreed with the
reference, the winner (lowest queued median among the valid ones), the winner replayed from a
CUDA graph (or why it cannot be captured), cupyx's one-line ``A @ x`` / ``A @ B`` (SDDMM:
``torch.sparse.sampled_addmm`` where nvmath-python runs the baseline) and GB/s on the
compulsory bytes. Results are checked against cupyx (SpMV, SpMM) and a float64 reference
(SDDMM) within a rounding bound: ``|got - ref| <= 2 (n + 2) eps (|A| |x|)`` per entry, ``n``
the number of terms summed (:mod:`teaal_loops.bench.cusparse.checks`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from teaal_loops.bench.cusparse import checks
from teaal_loops.bench.cusparse.choice import GraphError, time_algorithms, time_graphs
from teaal_loops.bench.cusparse.descriptors import (
    CusparseBaselineError,
    cupy_binding_available,
    cupy_sddmm_entry_points,
    first_line,
    nvmath_available,
    nvmath_handle,
)
from teaal_loops.bench.cusparse.sddmm import backends as sddmm_backends
from teaal_loops.bench.cusparse.sddmm import make_sddmm
from teaal_loops.bench.cusparse.spmm import SpMM
from teaal_loops.bench.cusparse.spmv import SpMV
from teaal_loops.bench.cusparse.torch_sddmm import TorchSDDMM, torch_available
from teaal_loops.bench.roofline import gbps
from teaal_loops.runtime import backend

SCHEMA = "teaal-loops-cusparse-baselines/1"
KINDS = ("spmv", "spmm", "sddmm")


def measure_baselines(
    matrix: Any,
    dtype: Any,
    widths: Sequence[int],
    timer: Any,
    *,
    kinds: Sequence[str] = KINDS,
    sddmm_widths: Sequence[int] | None = None,
    reps: int = 25,
    warmup: int = 3,
    copies: int = 1,
    seed: int = 0,
) -> dict[str, Any]:
    """Records for every baseline of ``matrix`` (SciPy or cupyx sparse) in ``dtype``: SpMV,
    SpMM at each of ``widths`` and SDDMM at each of ``sddmm_widths`` (default ``widths``).
    ``copies`` identical input sets are rotated through (as the harness does for matrices that
    fit in L2). A record that fails holds ``error`` (one line) instead of times."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise CusparseBaselineError(f"unknown baseline kind(s) {unknown} (valid: {KINDS})")
    widths = checks.widths(widths, "widths")
    sddmm_widths = widths if sddmm_widths is None else checks.widths(sddmm_widths,
                                                                     "sddmm_widths")
    if copies < 1 or reps < 1 or warmup < 0:
        raise CusparseBaselineError(f"copies {copies}, reps {reps}, warmup {warmup}: out of range")
    cp = backend.cupy_module()
    mats = checks.device_copies(cp, matrix, dtype, copies)
    A = mats[0]
    rows, cols = A.shape
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "matrix": {"rows": rows, "cols": cols, "nnz": int(A.nnz), "dtype": str(A.dtype),
                   "offset_bytes": int(A.indptr.itemsize)},
        "copies": copies,
        "settings": {"reps": reps, "warmup": warmup, "seed": seed},
        "libraries": libraries(),
        "records": [],
    }
    common = {"reps": reps, "warmup": warmup, "seed": seed}
    jobs: list[tuple[str, int | None, Callable[[], dict[str, Any]]]] = []
    if "spmv" in kinds:
        jobs.append(("spmv", None, partial(measure_spmv, cp, timer, mats, **common)))
    for n in widths if "spmm" in kinds else ():
        jobs.append(("spmm", n, partial(measure_spmm, cp, timer, mats, n, **common)))
    for k in sddmm_widths if "sddmm" in kinds else ():
        jobs.append(("sddmm", k, partial(measure_sddmm, cp, timer, mats, k, **common)))
    for kind, width, job in jobs:
        try:
            record = job()
        except Exception as exc:  # one failing baseline must not lose the others
            record = {"kernel": kind, "width": width, "error": first_line(exc)}
        finally:
            cp.get_default_memory_pool().free_all_blocks()
        doc["records"].append(record)
    return doc


def libraries() -> dict[str, Any]:
    """Which bindings run here (``True`` or the one-line reason) and cuSPARSE's version."""
    out: dict[str, Any] = {}
    cupy_ok = cupy_binding_available()
    out["cupy"] = True if cupy_ok else cupy_ok.reason
    nv = nvmath_available()
    out["nvmath"] = True if nv else nv.reason
    th = torch_available()
    out["torch"] = True if th else th.reason
    out["cupy_sddmm_entry_points"] = cupy_sddmm_entry_points()
    out["preprocess"] = ("ran (nvmath-python's cusparseSpMV/SpMM/SDDMM_preprocess)" if nv
                         else f"not run: {nv.reason}")
    if cupy_ok:
        import cupy
        from cupy_backends.cuda.libs import cusparse as lib

        out["cusparse_version_cupy"] = int(lib.getVersion(cupy.cuda.device.get_cusparse_handle()))
    if nv:
        import nvmath
        from nvmath.bindings import cusparse as nvlib

        out["cusparse_version_nvmath"] = int(nvlib.get_version(nvmath_handle()))
        out["nvmath_version"] = str(getattr(nvmath, "__version__", "?"))
    return out


# --------------------------------------------------------------------------------------------


def measure_spmv(cp: Any, timer: Any, mats: Sequence[Any], reps: int, warmup: int,
                 seed: int) -> dict[str, Any]:
    rows, cols = mats[0].shape
    x = checks.random_dense(cp, (cols,), mats[0].dtype, seed)
    operands = [(x.copy(), cp.zeros(rows, dtype=x.dtype)) for _ in mats]
    bases = [SpMV(m, x=ops[0], y=ops[1]) for m, ops in zip(mats, operands, strict=True)]
    ref = mats[0] @ operands[0][0]
    bound = checks.spmv_bound(cp, mats[0], operands[0][0])
    record: dict[str, Any] = {"kernel": "spmv", "width": None,
              "compulsory_bytes": checks.spmv_bytes(mats[0])}
    record.update(_measure(cp, timer, bases, operands,
                           lambda got: checks.compare(cp, got, ref, bound), reps, warmup))
    k = len(mats)
    record["cupyx"] = {"what": "cupyx.scipy.sparse.csr_matrix @ x (descriptors per call)",
                       **_time_plain(timer, lambda i: mats[i % k] @ operands[i % k][0],
                                     reps, warmup)}
    return _with_gbps(record)


def measure_spmm(cp: Any, timer: Any, mats: Sequence[Any], n: int, reps: int, warmup: int,
                 seed: int) -> dict[str, Any]:
    rows, cols = mats[0].shape
    B = checks.random_dense(cp, (cols, n), mats[0].dtype, seed)
    operands = [(B.copy(), cp.zeros((rows, n), dtype=B.dtype)) for _ in mats]
    bases = [SpMM(m, n, B=ops[0], C=ops[1]) for m, ops in zip(mats, operands, strict=True)]
    ref = mats[0] @ operands[0][0]
    bound = checks.spmm_bound(cp, mats[0], operands[0][0])
    record: dict[str, Any] = {"kernel": "spmm", "width": n,
              "compulsory_bytes": checks.spmm_bytes(mats[0], n)}
    record.update(_measure(cp, timer, bases, operands,
                           lambda got: checks.compare(cp, got, ref, bound), reps, warmup))
    k = len(mats)
    record["cupyx"] = {"what": "cupyx.scipy.sparse.csr_matrix @ B (B copied to Fortran order, "
                               "descriptors per call)",
                       **_time_plain(timer, lambda i: mats[i % k] @ operands[i % k][0],
                                     reps, warmup)}
    return _with_gbps(record)


def measure_sddmm(cp: Any, timer: Any, mats: Sequence[Any], k: int, reps: int, warmup: int,
                  seed: int) -> dict[str, Any]:
    rows, cols = mats[0].shape
    dtype = mats[0].dtype
    A = checks.random_dense(cp, (rows, k), dtype, seed)
    B = checks.random_dense(cp, (k, cols), dtype, seed + 1)
    operands = [(A.copy(), B.copy(), cp.zeros(int(m.nnz), dtype=dtype)) for m in mats]
    ref, bound = checks.sddmm_reference(cp, mats[0], A, B)

    def check(got: Any) -> dict[str, Any]:
        return checks.compare(cp, got, ref, bound)

    bases = [make_sddmm(m, k, A=ops[0], B=ops[1], out=ops[2])
             for m, ops in zip(mats, operands, strict=True)]
    record: dict[str, Any] = {"kernel": "sddmm", "width": k, "backends": sddmm_backends(),
                              "compulsory_bytes": checks.sddmm_bytes(mats[0], k)}
    record.update(_measure(cp, timer, bases, operands, check, reps, warmup))
    record["sddmm_only"] = _sddmm_only(timer, bases, operands, reps, warmup)
    if not isinstance(bases[0], TorchSDDMM) and torch_available():
        try:
            torch_bases = [TorchSDDMM(m, k, A=ops[0], B=ops[1], out=ops[2])
                           for m, ops in zip(mats, operands, strict=True)]
            record["torch"] = _with_gbps({"compulsory_bytes": record["compulsory_bytes"],
                                          **_measure(cp, timer, torch_bases, operands, check,
                                                     reps, warmup)})
        except Exception as exc:
            record["torch"] = {"error": first_line(exc)}
    return _with_gbps(record)


def _sddmm_only(timer: Any, bases: Sequence[Any], operands: Sequence[Any], reps: int,
                warmup: int) -> dict[str, Any]:
    """The winner's launch without ``Z *= C.data`` (the cuSPARSE call; for the ``BT_*``
    layouts the copy of B into its transposed buffer stays in)."""
    k = len(bases)
    for b in bases:
        b.scale = False
    try:
        return _time_plain(timer, lambda i: bases[i % k].launch(*operands[i % k]), reps, warmup)
    finally:
        for b in bases:
            b.scale = True


# --------------------------------------------------------------------------------------------


def _measure(cp: Any, timer: Any, bases: Sequence[Any], operands: Sequence[Any],
             check: Callable[[Any], dict[str, Any]], reps: int, warmup: int) -> dict[str, Any]:
    """Validate every algorithm of ``bases[0]`` (output poisoned with NaN first), time them
    all over the rotated copies, select the winner everywhere, replay it from graphs."""
    b0, ops0 = bases[0], operands[0]
    k = len(bases)
    validity = {}
    for algorithm in b0.algorithms:
        ops0[-1].fill(math.nan)
        b0.launch(*ops0, algorithm=algorithm)
        validity[algorithm.label] = check(ops0[-1])
    invalid = [label for label, v in validity.items() if not v["valid"]]
    choice = time_algorithms(
        timer, b0.algorithms,
        lambda a: (lambda i: bases[i % k].launch(*operands[i % k], algorithm=a)),
        reps=reps, warmup=warmup, invalid=invalid,
    )
    out: dict[str, Any] = choice.as_dict()
    for entry in out["algorithms"]:
        entry["check"] = validity.get(entry["label"])
    out["skipped"] = dict(b0.skipped)
    if choice.winner is None:
        out["baseline"] = b0.describe()
        out["graph"] = {"reason": "no valid algorithm"}
        return out
    for b in bases:
        b.select(choice.winner)
    out["baseline"] = b0.describe()
    winner = choice.time_of(choice.winner)
    out["queued_ms"], out["per_call_ms"] = winner.queued_ms, winner.per_call_ms
    out["valid"] = validity[choice.winner]["valid"]
    out["graph"] = _graph(cp, timer, bases, operands, check, reps, warmup)
    return out


def _graph(cp: Any, timer: Any, bases: Sequence[Any], operands: Sequence[Any],
           check: Callable[[Any], dict[str, Any]], reps: int, warmup: int) -> dict[str, Any]:
    try:
        graphs = [b.capture(*ops) for b, ops in zip(bases, operands, strict=True)]
    except GraphError as exc:
        return {"reason": str(exc)}
    except Exception as exc:
        return {"reason": f"not capturable: {first_line(exc)}"}
    out = operands[0][-1]
    out.fill(math.nan)
    graphs[0].launch()
    result: dict[str, Any] = {"check": check(out)}
    captured = getattr(bases[0], "captured", None)
    if captured is not None:
        result["captured"] = {"label": captured.label, "binding": captured.binding}
    result.update(time_graphs(timer, graphs, reps=reps, warmup=warmup))
    return result


def _time_plain(timer: Any, op: Callable[[int], Any], reps: int, warmup: int) -> dict[str, Any]:
    for i in range(max(warmup, 2)):  # cupyx checks the canonical format on a first product
        op(i)
    call = timer.per_call(op, reps)
    queued = timer.queued(op, reps, host_ms_per_rep=call.host_ms / reps)
    return {"queued_ms": queued.median, "queued": bool(queued.queued),
            "per_call_ms": call.median, "host_ms_per_call": call.host_ms / reps}


def _with_gbps(record: dict[str, Any]) -> dict[str, Any]:
    """GB/s on the compulsory bytes for every queued time in the record (winner, graph,
    cupyx, sddmm_only)."""
    nbytes = record.get("compulsory_bytes")
    if not nbytes:
        return record

    def rate(ms: Any) -> float | None:
        return gbps(nbytes, ms) if isinstance(ms, float) and ms > 0 and np.isfinite(ms) else None

    record["gbps"] = rate(record.get("queued_ms"))
    for key in ("graph", "cupyx", "sddmm_only"):
        part = record.get(key)
        if isinstance(part, dict) and "queued_ms" in part:
            part["gbps"] = rate(part["queued_ms"])
    return record
