"""One SpMV case (a matrix in one dtype): the best cuSPARSE, cupyx's ``A @ x`` and every
generated variant, timed alike (:mod:`teaal_loops.bench.sides`).

1. The matrix goes to the GPU once as a ``cupyx.scipy.sparse.csr_matrix``; the generated
   kernels are prepared on the very same device arrays, so every side reads identical data.
   When the matrix, ``x`` and ``y`` together fit ``ROTATE_FACTOR`` times in the L2 cache,
   ``copies`` identical sets are made and call ``i`` uses set ``i % copies``, so no call finds
   its inputs in L2 (at most ``max_copies`` sets; a matrix that small is launch-bound anyway).
2. The reference is cupyx's ``A @ x``; a result is right when every entry lies within the
   rounding bound ``2 (n + 2) eps (|A| |x|)`` of it (``n`` the row's nonzeros: two sums of the
   same products in any order differ by at most that), outputs poisoned with NaN first unless
   the schedule zeroes them.
3. The best cuSPARSE (:func:`teaal_loops.bench.baselines.best_cusparse`: SpMV's DEFAULT,
   CSR_ALG1 and CSR_ALG2 through CuPy's binding, plus the preprocessed ones through
   nvmath-python where it is installed) and cupyx's ``A @ x`` (the second column).
4. Each variant is compiled once (per dtype), prepared on the matrix and checked; a wrong one
   is recorded as such and not timed. A right one is timed as ``launch`` (``Kernel.launch``
   on pre-uploaded arrays into a pre-allocated ``y``, its zeroing included where the schedule
   accumulates, because a caller must pay it) in the three ways of :mod:`.sides`, its
   convenient call ``kernel(prepared, x)`` for throughput, and ``kernel.capture`` graphs
   replayed. A variant may run at another block size, or launch a source file or a patched
   source with the generated kernel's arguments (:mod:`teaal_loops.bench.variants`).
5. ``auto`` picks a variant from the row statistics; if that exact variant was not in the set
   it is timed as well.
6. ``--split W`` times the matrix also as two launches, light rows and heavy pieces each
   under the fastest variant (:mod:`.case_split`).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from teaal_loops import auto
from teaal_loops.bench import baselines, case_split, records, sides
from teaal_loops.bench.context import Context
from teaal_loops.bench.cusparse import checks
from teaal_loops.bench.roofline import compulsory_bytes
from teaal_loops.bench.suite import MatrixEntry
from teaal_loops.bench.variants import DEFAULT_LAYOUT, Variant, prepare_variant
from teaal_loops.matrix.limit_model import spmv_limits, x_gather_counts_sorted
from teaal_loops.runtime.l2_persist import PersistingWindow

INT32_MAX = 2**31 - 1
CUPYX_WHAT = "cupyx.scipy.sparse.csr_matrix @ x (cusparseSpMV, descriptors made every call)"


def run_case(ctx: Context, entry: MatrixEntry, dtype: str, loaded: Any,
             header: dict[str, Any]) -> dict[str, Any]:
    """The case record of ``entry`` in ``dtype`` (module docstring); ``loaded`` is
    ``(indptr, indices, values, shape, stats)`` on the device, values already in ``dtype``."""
    import cupyx.scipy.sparse as csp

    cp, options = ctx.cp, ctx.options
    indptr, indices, values, shape, stats = loaded
    rows, cols = shape
    rng = cp.random.RandomState(options.seed + 1)
    x0 = (rng.random_sample(cols) * 2.0 - 1.0).astype(dtype)
    working_set = (indptr.nbytes + indices.nbytes + values.nbytes + x0.nbytes
                   + rows * x0.itemsize)
    copies = ctx.copies(working_set)
    mats = [csp.csr_matrix((values, indices, indptr), shape=shape, copy=False)]
    xs = [x0]
    for _ in range(copies - 1):
        mats.append(csp.csr_matrix((values.copy(), indices.copy(), indptr.copy()), shape=shape))
        xs.append(x0.copy())
    nbytes = compulsory_bytes(rows, cols, int(indices.size), dtype,
                              offset_bytes=indptr.itemsize)
    case = {**header, "compulsory_bytes": nbytes, "working_set_bytes": working_set,
            "copies": copies, "limit": _limit(ctx, indptr, indices, shape, dtype)}
    y_ref = mats[0] @ xs[0]
    bound = checks.spmv_bound(cp, mats[0], xs[0])

    def check(got: Any) -> dict[str, Any]:
        return checks.compare(cp, got, y_ref, bound)

    k = len(mats)
    ctx.say(f"{entry.name} {dtype}: cuSPARSE")
    case["second"] = _guarded(lambda: baselines.second_side(
        ctx.timer, lambda i: mats[i % k] @ xs[i % k], what=CUPYX_WHAT, reps=options.reps,
        warmup=options.warmup, copies=k, nbytes=nbytes, copy_gbps=ctx.copy_gbps))
    case["cusparse"] = _guarded(lambda: _best(ctx, mats, xs, check, nbytes))
    ctx.advance()
    variants = [] if options.only_auto else ctx.options.variants_of("spmv")
    choice = None
    if options.auto or options.only_auto:
        value_bytes = np.dtype(dtype).itemsize
        choice = auto.choose(stats, ctx.device, value_bytes=value_bytes,
                             columns=auto.column_stats(mats[0], value_bytes))
        auto_layout = choice.layout or DEFAULT_LAYOUT
        case["auto_choice"] = {"label": choice.label, "rule": choice.rule,
                               "reason": choice.reason, "schedule": choice.schedule,
                               "layout": auto_layout}
        # (labels name a layout other than CSR, as auto's do: equal labels, equal layouts)
        if not any(v.label == choice.label for v in variants):
            variants.append(Variant(auto.spec_path(choice), dict(choice.params), auto_layout))
    baseline_ms = records.baseline_kernel_ms(case)
    results = []
    for variant in variants:
        ctx.say(f"{entry.name} {dtype}: {variant.label}")
        result = records.guarded_variant(
            variant, lambda v=variant: _time_variant(ctx, v, dtype, mats, xs, check, nbytes,
                                                     baseline_ms))
        ctx.forget(variant, dtype, mats)
        if choice is not None and variant.label == choice.label:
            result["auto"] = True
        results.append(result)
        ctx.advance(records.variant_line(result))
    for at in [] if options.only_auto else options.splits:
        ctx.say(f"{entry.name} {dtype}: {at.name}")
        result = case_split.split_result(
            ctx, at, "spmv", dtype, mats, xs, check, nbytes, baseline_ms,
            lambda v, m, c: _time_variant(ctx, v, dtype, m, xs, c, nbytes, None))
        results.append(result)
        ctx.advance(records.variant_line(result))
    case["results"] = results
    records.add_limit_fractions(case)  # first: the case's best summary copies of_limit
    records.add_speedups(case)
    return case


def _limit(ctx: Context, indptr: Any, indices: Any, shape: Any, dtype: str) -> dict[str, Any]:
    """The limit model of this matrix (teaal_loops.matrix.limit_model), its x-gather sectors
    counted on the device, with this run's measured copy and L2 rates."""
    rows, cols = shape
    try:
        sectors = x_gather_counts_sorted(ctx.cp, indptr, indices, np.dtype(dtype).itemsize)
    except ValueError as exc:
        return {"error": str(exc)}
    lim = spmv_limits(rows, cols, sectors, int(indices.size), np.dtype(dtype).itemsize,
                      int(indptr.itemsize), copy_gbps=ctx.copy_gbps, l2_gbps=ctx.l2_gbps,
                      gathers=ctx.gathers)
    return lim.as_dict()


def _guarded(measure: Any) -> dict[str, Any]:
    """A baseline's record, or ``{"error": ...}`` in one line when it cannot run here."""
    try:
        out: dict[str, Any] = measure()
        return out
    except Exception as exc:  # a missing binding or a refusal: the case goes on without it
        return {"error": sides.first_line(exc)}


def _best(ctx: Context, mats: list[Any], xs: list[Any], check: sides.Check,
          nbytes: int) -> dict[str, Any]:
    cp, options = ctx.cp, ctx.options
    ys = [cp.zeros(m.shape[0], dtype=xs[0].dtype) for m in mats]
    bases = [baselines.make_spmv(m, x, y) for m, x, y in zip(mats, xs, ys, strict=True)]
    return baselines.best_cusparse(
        ctx.timer, bases, [(x, y) for x, y in zip(xs, ys, strict=True)], check,
        reps=options.reps, warmup=options.warmup, nbytes=nbytes, copy_gbps=ctx.copy_gbps)


def _time_variant(ctx: Context, variant: Variant, dtype: str, mats: list[Any], xs: list[Any],
                  check: sides.Check, nbytes: int, baseline_ms: float | None) -> dict[str, Any]:
    kernel = ctx.kernel(variant, dtype)
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
        out["skipped"] = f"launch of {threads} threads overflows the kernels' 32-bit thread index"
        return out
    y0 = kernel.new_output(p0)
    if not p0.accumulates:
        y0.fill(float("nan"))  # poison: every row the kernel fails to write shows
    kernel.launch(p0, xs[0], y0)
    if not records.checked(out, check(y0)):
        return out
    ys = [kernel.new_output(p) for p in prepared]
    with _persisting(ctx, variant, xs, out):
        if "skipped" in out:
            return out
        _time_launches(ctx, kernel, prepared, xs, ys, check, baseline_ms, out)
    out.update(records.roof(nbytes, out["kernel"]["median_ms"], ctx.copy_gbps))
    return out


def _persisting(ctx: Context, variant: Variant, xs: list[Any], out: dict[str, Any]) -> Any:
    """The L2 window over x for a ``+l2persist`` variant (else nothing). Rotated copies of a
    small matrix defeat L2 on purpose, so the experiment runs only where there is one copy."""
    if not variant.persist_x:
        return contextlib.nullcontext()
    if len(xs) > 1:
        out["skipped"] = (f"l2persist: the matrix is rotated over {len(xs)} copies to keep it "
                          "out of L2; the experiment runs on matrices too large for that")
        return contextlib.nullcontext()
    window = PersistingWindow(ctx.cp, xs[0])
    out["l2_window"] = {"set_aside_bytes": window.set_aside, "window_bytes": window.window,
                        "hit_ratio": window.hit_ratio}
    return window


def _time_launches(ctx: Context, kernel: Any, prepared: list[Any], xs: list[Any],
                   ys: list[Any], check: sides.Check, baseline_ms: float | None,
                   out: dict[str, Any]) -> None:
    """Device time, throughput, latency, the convenient call and graph replay, into ``out``."""
    timer, options, k = ctx.timer, ctx.options, len(prepared)

    def launch(i: int) -> None:
        j = i % k
        kernel.zero_output(prepared[j], ys[j])
        kernel.launch(prepared[j], xs[j], ys[j])

    def call(i: int) -> Any:
        return kernel(prepared[i % k], xs[i % k])

    reps, out["probe_ms"], capped = sides.repetitions(timer, launch, options.reps, baseline_ms)
    if capped:
        out["capped"] = True
    out.update(sides.time_side(timer, launch, reps, 0 if capped else max(options.warmup, k)))
    out["call"] = sides.time_throughput(timer, call, reps)
    out["graph"] = sides.graph_side(
        timer, [_capturer(kernel, p, x, y) for p, x, y in zip(prepared, xs, ys, strict=True)],
        ys[0], check, reps, 0 if capped else options.warmup)


def _capturer(kernel: Any, prepared: Any, x: Any, y: Any) -> Any:
    return lambda: kernel.capture(prepared, x, y)

