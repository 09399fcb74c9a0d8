"""Timing one dense (SpMM, SDDMM) kernel the way every case does: operands in the order its
spec stores them, bound once per input copy (``bind_dense``), checked into a poisoned output
before any timing, then timed by launches, their throughput and latency, and a CUDA graph's
replay (:mod:`teaal_loops.bench.sides`). The whole-matrix variants of a case
(:mod:`.case_dense`) and the two parts of a split (:mod:`.case_split`) share it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from teaal_loops.bench import records, sides
from teaal_loops.bench.context import Context
from teaal_loops.bench.cusparse.choice import capture
from teaal_loops.bench.variants import Variant, prepare_variant
from teaal_loops.runtime.operands import stored_transposed

INT32_MAX = 2**31 - 1


def operand_orders(kernel: Any, dense: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[str]]:
    """``dense`` (C-ordered, in the shapes the kernel's call takes: the einsum's index order)
    arranged as the spec stores each operand, and a note per transposed copy."""
    form = kernel.schedule.form
    out, notes = [], []
    for i, array in enumerate(dense):
        if array.ndim == 2 and stored_transposed(form, i):
            out.append(array.T.copy().T)  # the transpose, C-ordered, viewed in the call's shape
            stored = form.operand_storage[i]
            notes.append(f"{form.operands[i]} stored [{', '.join(stored)}]: a transposed copy "
                         "made once before timing")
        else:
            out.append(array)
    return tuple(out), notes


def time_variant(ctx: Context, variant: Variant, dtype: str, width: int, mats: list[Any],
                 denses: list[Any], check: sides.Check, nbytes: int,
                 baseline_ms: float | None) -> dict[str, Any]:
    """The record of ``variant`` on the input copies ``mats`` and ``denses`` at dense width
    ``width``: its launch geometry, its check, and its timings (``baseline_ms`` caps the
    repetitions of a slow variant)."""
    k = len(mats)
    kernel = ctx.kernel(variant, dtype)
    prepared = prepare_variant(kernel, variant, mats)
    p0 = prepared[0]
    grid, block, space, time = kernel.dense_launch(p0, width)
    out: dict[str, Any] = {
        "schedule": kernel.kind,
        "accumulates": bool(p0.accumulates),
        "bound": records.bound_json(p0),
        "dense_launch": {"blocks": int(grid[0]), "threads_per_block": int(block[0]),
                         "dense_space": int(space), "dense_time": int(time)},
    }
    if p0.bound.index_bits == 32 and int(grid[0]) * int(block[0]) > INT32_MAX:
        out["skipped"] = (f"launch of {int(grid[0]) * int(block[0])} threads overflows the "
                          "kernels' 32-bit thread index")
        return out
    ops, notes = zip(*(operand_orders(kernel, d) for d in denses), strict=True)
    if notes[0]:
        out["operands"] = list(notes[0])
    first = kernel.call_dense(p0, ops[0])  # compiles; the output in the spec's storage order
    z0 = first.data if kernel.form == "sddmm" else first
    outs = [ctx.cp.empty_like(z0) for _ in prepared]
    # bound once per copy: each call is the zeroing (where accumulating) and one launch, as
    # cuSPARSE's side reuses its descriptors; no result object (SDDMM's would read the device)
    launches = [kernel.bind_dense(prepared[j], ops[j], outs[j]) for j in range(k)]

    def op(i: int) -> None:
        launches[i % k].launch()

    return checked_and_timed(ctx, op, k, outs[0], check, nbytes, baseline_ms, out)


def checked_and_timed(ctx: Context, op: Callable[[int], None], k: int, output: Any,
                      check: sides.Check, nbytes: int, baseline_ms: float | None,
                      out: dict[str, Any]) -> dict[str, Any]:
    """``op(i)`` (one operation on input copy ``i % k``, writing ``output`` for copy 0) checked
    into a poisoned output, then timed: launches, throughput, latency, graph replay, roofline.
    A wrong result is recorded in ``out`` and not timed."""
    timer, options = ctx.timer, ctx.options
    output.fill(float("nan"))  # poison: every entry the operation fails to write shows
    op(0)
    if not records.checked(out, check(output)):
        return out
    reps, out["probe_ms"], capped = sides.repetitions(timer, op, options.reps, baseline_ms)
    if capped:
        out["capped"] = True
    warmup = 0 if capped else max(options.warmup, k)
    out.update(sides.time_side(timer, op, reps, warmup))
    out["graph"] = sides.graph_side(
        timer, [_capturer(ctx.cp, op, j) for j in range(k)], output, check, reps,
        0 if capped else options.warmup)
    out.update(records.roof(nbytes, out["kernel"]["median_ms"], ctx.copy_gbps))
    return out


def _capturer(cp: Any, op: Callable[[int], None], j: int) -> Callable[[], Any]:
    return lambda: capture(cp, lambda: op(j))
