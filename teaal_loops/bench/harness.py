"""Run a benchmark: every matrix x dtype x variant, against cuSPARSE, in one process.

For each matrix and dtype (a *case*):

1. The matrix goes to the GPU once as a ``cupyx.scipy.sparse.csr_matrix``; the generated kernels
   are prepared on the very same device arrays, so both sides read identical data. When the
   matrix, ``x`` and ``y`` together fit ``ROTATE_FACTOR`` times in the L2 cache, ``copies``
   identical sets are made and repetition ``i`` uses set ``i % copies``, so no repetition finds
   its inputs in L2 (at most ``max_copies`` sets; a matrix that small is launch-bound anyway).
2. cuSPARSE through CuPy (``A @ x``, as users call it) gives the reference ``y`` and three
   times: ``call`` (events around each call: what a Python loop sees), ``kernel`` (queued
   behind a spin kernel: device time alone) and ``loop`` (wall clock of back-to-back calls:
   the host overhead per call). See :mod:`teaal_loops.bench.timing`.
3. Each variant is compiled once (per dtype), prepared on the matrix, validated against the
   reference (outputs poisoned with NaN first unless the schedule zeroes them; loops' rule
   ``|y - y_ref| <= atol + rtol |y_ref|``), warmed up and timed three ways:
   ``launch`` (the lean path ``Kernel.launch`` on pre-uploaded arrays and a pre-allocated ``y``,
   per-launch events: zeroing of ``y`` inside the interval for accumulating schedules, because
   a caller must pay it), ``kernel`` (the same work queued behind a spin: device time including
   that zeroing) and ``call`` (``kernel(prepared, x)``, the convenient call that allocates ``y``);
   ``loop`` gives the wall-clock cost per call of both the lean launch and the convenient call.
   A variant may run at another block size, or launch a source file or a patched source with
   the generated kernel's arguments (:mod:`teaal_loops.bench.variants`).
4. ``auto`` picks a variant from the row statistics; if that exact variant was not in the set it
   is timed as well. ``best`` is the valid variant with the lowest ``kernel`` time.

Results are written as JSON after every case, so a run that is stopped keeps what it measured.
"""

from __future__ import annotations

import datetime as _dt
import math
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teaal_loops import auto
from teaal_loops.bench import records, timing
from teaal_loops.bench.loading import load_entry
from teaal_loops.bench.progress import Progress
from teaal_loops.bench.results import summarize
from teaal_loops.bench.roofline import compulsory_bytes
from teaal_loops.bench.suite import MatrixEntry
from teaal_loops.bench.variants import Variant, compile_variant, prepare_variant
from teaal_loops.errors import TeaalLoopsError
from teaal_loops.runtime import backend

SCHEMA = "teaal-loops-bench/1"
ROTATE_FACTOR = 3.0  # inputs are rotated until the sets span this many L2 caches
ATOL, RTOL = 1e-2, 1e-3  # the loops library's --validate tolerances
SLOW_FACTOR = 10.0  # a variant this much slower than cuSPARSE ...
SLOW_MS = 20.0  # ... and slower than this per launch is timed with CAPPED_REPS only
CAPPED_REPS = 3
INT32_MAX = 2**31 - 1
LOOP_CALLS = 200  # back-to-back calls of the loop timing (host overhead) ...
LOOP_BUDGET_MS = 20.0  # ... fewer where they would take longer than this


@dataclass
class BenchOptions:
    entries: Sequence[MatrixEntry]
    variants: Sequence[Variant]
    dtypes: Sequence[str] = ("float32",)
    reps: int = 25
    warmup: int = 5
    auto: bool = True  # time the auto choice too (and report auto / best)
    only_auto: bool = False  # time only the auto choice (plus cuSPARSE)
    max_copies: int = 32
    seed: int = 0
    command: str = ""
    time_budget_s: float | None = None  # start no new case after this many seconds
    json_path: Path | None = None  # written after every case
    extra: dict[str, Any] = field(default_factory=dict)


def run_bench(options: BenchOptions, progress: Progress | None = None) -> dict[str, Any]:
    """Run every case of ``options`` and return the results document (see module docstring)."""

    if options.reps < 1 or options.warmup < 0:
        raise TeaalLoopsError(f"--reps {options.reps} / --warmup {options.warmup}: out of range")
    cp = backend.cupy_module()
    device = backend.device_info()
    timer = timing.Timer(cp)
    started = time.perf_counter()
    doc: dict[str, Any] = {
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
            "atol": ATOL,
            "rtol": RTOL,
            "capped_reps": CAPPED_REPS,
            "slow_ms": SLOW_MS,
            "timing": {
                "call": "CUDA events around each call, calls back to back (host cost included "
                "where it exceeds the GPU work)",
                "kernel": "CUDA events around each repetition, all queued behind a spin kernel "
                "(device time only)",
                "launch": "generated kernel: lean path Kernel.launch on pre-uploaded arrays, "
                "per-launch events (zeroing of y included for accumulating schedules)",
                "loop": "wall-clock time of back-to-back calls (lean launch, convenient call, "
                "cuSPARSE's A @ x) with one synchronisation at the end, per call: the host "
                "overhead a Python loop pays where it exceeds the GPU work",
            },
            **options.extra,
        },
        "copy": timing.copy_bandwidth(cp, timer),
        "cases": [],
        "incomplete": False,
    }
    copy_gbps = float(doc["copy"]["gbps"])
    runner = _Runner(cp, timer, device, options, copy_gbps, progress)
    total = len(options.entries) * len(options.dtypes)
    if progress:
        progress.start(total * (len(options.variants) + 2))
    for entry in options.entries:
        if options.time_budget_s and time.perf_counter() - started > options.time_budget_s:
            doc["incomplete"] = True
            doc["skipped"] = doc.get("skipped", []) + [entry.name]
            continue
        try:
            doc["cases"] += runner.run_entry(entry)
        except TeaalLoopsError as err:
            doc["cases"].append({"matrix": entry.name, "group": entry.group, "error": str(err)})
        except Exception as err:  # a bug or an out-of-memory: record it, go on with the next
            doc["cases"].append({"matrix": entry.name, "group": entry.group, "bug": True,
                                 "error": f"{type(err).__name__}: {records.first_line(err)}"})
        finally:
            cp.get_default_memory_pool().free_all_blocks()
        doc["elapsed_s"] = round(time.perf_counter() - started, 1)
        if options.json_path:
            records.write_json(doc, options.json_path)

    doc["summary"] = summarize(doc)
    if progress:
        progress.finish()
    if options.json_path:
        records.write_json(doc, options.json_path)
    return doc


# --------------------------------------------------------------------------------------------


class _Runner:
    def __init__(
        self,
        cp: Any,
        timer: Any,
        device: Any,
        options: BenchOptions,
        copy_gbps: float,
        progress: Progress | None,
    ) -> None:
        self.cp = cp
        self.timer = timer
        self.device = device
        self.options = options
        self.copy_gbps = copy_gbps
        self.progress = progress
        self.kernels: dict[tuple[str, str], Any] = {}

    # -- matrices -----------------------------------------------------------------------
    def run_entry(self, entry: MatrixEntry) -> list[dict[str, Any]]:
        t0 = time.perf_counter()
        indptr, indices, data, shape, stats = load_entry(self.cp, entry, self.options.seed)
        load_s = time.perf_counter() - t0
        cases = []
        for dtype in self.options.dtypes:
            values = data.astype(dtype, copy=False)
            cases.append(
                self._run_case(entry, dtype, indptr, indices, values, shape, stats, load_s)
            )
            del values
        return cases

    # -- one matrix and dtype -------------------------------------------------------------
    def _run_case(
        self,
        entry: MatrixEntry,
        dtype: str,
        indptr: Any,
        indices: Any,
        values: Any,
        shape: tuple[int, int],
        stats: Any,
        load_s: float,
    ) -> dict[str, Any]:
        import cupyx.scipy.sparse as csp

        cp, options = self.cp, self.options
        rows, cols = shape
        nnz = int(indices.size)
        rng = cp.random.RandomState(options.seed + 1)
        x0 = (rng.random_sample(cols) * 2.0 - 1.0).astype(dtype)
        working_set = (
            indptr.nbytes + indices.nbytes + values.nbytes + x0.nbytes + rows * x0.itemsize
        )
        copies = rotation_copies(working_set, self.device.l2_bytes, options.max_copies)
        mats = [csp.csr_matrix((values, indices, indptr), shape=shape, copy=False)]
        xs = [x0]
        for _ in range(copies - 1):
            mats.append(csp.csr_matrix((values.copy(), indices.copy(), indptr.copy()), shape=shape))
            xs.append(x0.copy())
        nbytes = compulsory_bytes(rows, cols, nnz, dtype, offset_bytes=indptr.itemsize)
        case: dict[str, Any] = {
            "matrix": entry.name,
            "group": entry.group,
            "source": entry.source,
            "dtype": dtype,
            "rows": rows,
            "cols": cols,
            "nnz": nnz,
            "stats": records.stats_json(stats),
            "compulsory_bytes": nbytes,
            "working_set_bytes": working_set,
            "copies": copies,
            "load_s": round(load_s, 2),
        }
        if self.progress:
            self.progress.update(f"{entry.name} {dtype}: cuSPARSE")
        y_ref, case["cusparse"] = self._cusparse(mats, xs, nbytes)
        if self.progress:
            self.progress.advance()
        results: list[dict[str, Any]] = []
        variants = [] if options.only_auto else list(options.variants)
        choice = None
        if options.auto or options.only_auto:

            choice = auto.choose(stats, self.device)
            case["auto_choice"] = {"label": choice.label, "rule": choice.rule,
                                   "reason": choice.reason, "schedule": choice.schedule}
            if not any(v.label == choice.label and v.layout == "csr" for v in variants):
                variants.append(Variant(auto.spec_path(choice), dict(choice.params), "csr"))
        cusparse_kernel = case["cusparse"]["kernel"]["median_ms"]
        for variant in variants:
            if self.progress:
                self.progress.update(f"{entry.name} {dtype}: {variant.label}")
            result = self._run_variant(variant, dtype, mats, xs, y_ref, nbytes, cusparse_kernel)
            if choice is not None and variant.label == choice.label and variant.layout == "csr":
                result["auto"] = True
            results.append(result)
            if self.progress:
                self.progress.advance()
                self.progress.detail(records.variant_line(result))
        case["results"] = results
        records.add_speedups(case)
        if self.progress:
            self.progress.advance()
            self.progress.note(records.case_line(case))
        del mats, xs, y_ref
        return case

    def _cusparse(self, mats: list[Any], xs: list[Any], nbytes: int) -> tuple[Any, dict[str, Any]]:
        options, timer, k = self.options, self.timer, len(mats)

        def op(i: int) -> Any:
            return mats[i % k] @ xs[i % k]

        # every copy once: CuPy checks a matrix's canonical format (a synchronising reduction) on
        # its first product only; users call the same matrix again and again
        for i in range(max(options.warmup, 2, k)):
            op(i)
        y_ref = mats[0] @ xs[0]
        call = timer.per_call(op, options.reps)
        kernel = timer.queued(op, options.reps, host_ms_per_rep=call.host_ms / options.reps)
        calls = loop_calls(options.reps, call.median)
        out = {
            "call": call.as_dict(),
            "kernel": {**kernel.as_dict(), "queued": kernel.queued},
            "host_ms_per_call": call.host_ms / options.reps,
            "loop": {"call_ms": timer.loop(op, calls), "calls": calls},
            "what": "cupyx.scipy.sparse.csr_matrix @ cupy vector (cusparseSpMV through CuPy)",
        }
        out.update(records.roof(nbytes, kernel.median, self.copy_gbps))
        return y_ref, out

    def _kernel(self, variant: Variant, dtype: str) -> Any:
        key = (f"{variant.spec}|{variant.label}|{variant.layout}", dtype)
        kernel = self.kernels.get(key)
        if kernel is None:
            kernel = self.kernels[key] = compile_variant(variant, dtype)
        return kernel

    def _run_variant(
        self,
        variant: Variant,
        dtype: str,
        mats: list[Any],
        xs: list[Any],
        y_ref: Any,
        nbytes: int,
        cusparse_kernel_ms: float,
    ) -> dict[str, Any]:
        result: dict[str, Any] = {
            "label": variant.label,
            "spec": variant.spec_name,
            "params": dict(variant.params),
            "layout": variant.layout,
        }
        try:
            result.update(self._time_variant(variant, dtype, mats, xs, y_ref, nbytes,
                                             cusparse_kernel_ms))
        except TeaalLoopsError as err:
            result["error"] = str(err)
        except Exception as err:  # a template or runtime bug: record it, keep benchmarking
            result["error"] = f"{type(err).__name__}: {records.first_line(err)}"
            result["bug"] = True
        return result

    def _time_variant(
        self,
        variant: Variant,
        dtype: str,
        mats: list[Any],
        xs: list[Any],
        y_ref: Any,
        nbytes: int,
        cusparse_kernel_ms: float,
    ) -> dict[str, Any]:
        timer, options, k = self.timer, self.options, len(mats)
        kernel = self._kernel(variant, dtype)
        prepared = prepare_variant(kernel, variant, mats)
        p0 = prepared[0]
        out: dict[str, Any] = {
            "schedule": kernel.kind,
            "accumulates": bool(p0.accumulates),
            "bound": records.bound_json(p0),
        }
        threads = p0.bound.launch.total_threads
        if p0.bound.index_bits == 32 and threads > INT32_MAX:
            # The templates form the global thread id in offset_t (int32 here): past 2**31
            # threads it wraps negative and the kernel reads out of bounds or runs for minutes.
            out["skipped"] = (
                f"launch of {threads} threads overflows the kernels' 32-bit thread index"
            )
            return out
        out.update(self._validate(kernel, p0, xs[0], y_ref))
        ys = [kernel.new_output(p) for p in prepared]

        def launch(i: int) -> None:
            j = i % k
            kernel.zero_output(prepared[j], ys[j])
            kernel.launch(prepared[j], xs[j], ys[j])

        def call(i: int) -> Any:
            return kernel(prepared[i % k], xs[i % k])

        # The validation launch compiled and ran the kernel once; one probe decides whether
        # the variant is so slow that repeating it would only burn device time.
        probe = timer.probe(launch)
        out["probe_ms"] = probe
        reps = options.reps
        if probe > SLOW_MS and probe > SLOW_FACTOR * cusparse_kernel_ms:
            reps = CAPPED_REPS
            out["capped"] = True
        else:
            for i in range(max(options.warmup, k)):
                launch(i)
            for i in range(k):
                call(i)
        lean = timer.per_call(launch, reps)
        queued = timer.queued(launch, reps, host_ms_per_rep=lean.host_ms / reps)
        called = timer.per_call(call, reps)
        out["launch"] = lean.as_dict()
        out["kernel"] = {**queued.as_dict(), "queued": queued.queued}
        out["call"] = called.as_dict()
        out["host_ms_per_launch"] = lean.host_ms / reps
        calls = loop_calls(reps, probe)
        out["loop"] = {"launch_ms": timer.loop(launch, calls), "call_ms": timer.loop(call, calls),
                       "calls": calls}
        out.update(records.roof(nbytes, queued.median, self.copy_gbps))
        return out

    def _validate(self, kernel: Any, prepared: Any, x: Any, y_ref: Any) -> dict[str, Any]:
        cp = self.cp
        y = kernel.new_output(prepared)
        if not prepared.accumulates:
            y.fill(float("nan"))  # poison: every row the kernel fails to write shows
        kernel.launch(prepared, x, y)
        ref = y_ref.astype(cp.float64)
        got = y.astype(cp.float64)
        diff = cp.abs(got - ref)
        bad = ~(diff <= ATOL + RTOL * cp.abs(ref))  # NaN compares false: counted as bad
        norm = float(cp.linalg.norm(ref))
        err = float(cp.linalg.norm(cp.nan_to_num(got - ref, nan=1e30)))
        mismatches = int(bad.sum())
        return {
            "valid": mismatches == 0,
            "mismatches": mismatches,
            "rel_error": err / norm if norm else err,
            "max_abs_error": float(cp.nan_to_num(diff, nan=math.inf).max()) if y.size else 0.0,
        }


# --------------------------------------------------------------------------------------------


def loop_calls(reps: int, ms_per_call: float) -> int:
    """Calls for the ``loop`` timing: LOOP_CALLS, fewer for slow calls (LOOP_BUDGET_MS), at
    least ``reps``."""
    if not ms_per_call or ms_per_call <= 0 or math.isnan(ms_per_call):
        return reps
    return max(reps, min(LOOP_CALLS, int(LOOP_BUDGET_MS / ms_per_call)))


def rotation_copies(working_set: int, l2_bytes: int, max_copies: int) -> int:
    """Input sets to rotate so that they span ROTATE_FACTOR x L2 (1 if one set already does)."""
    if working_set <= 0:
        return 1
    need = math.ceil(ROTATE_FACTOR * l2_bytes / working_set)
    return int(max(1, min(max_copies, need)))
