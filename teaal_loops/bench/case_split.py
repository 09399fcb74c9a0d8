"""A case run split at its heavy rows (``bench --split W[:MIN]``; SpMV and SpMM): two launches,
each under the schedule that suits its rows.

The matrix is split on the device (:func:`teaal_loops.split_heavy`, rows of at least MIN
nonzeros heavy, 4,096 by default): the light rows as CSR (heavy rows empty), the heavy rows
as ``pieces:W``. Every variant of the run is timed on each part alone (checked against that
part's own product; the pieces also in blocks of :data:`PIECES_BLOCK_THREADS`), the fastest
of each is kept, and then the pair is prepared once and timed as one operation: the light
launch storing every row, the pieces' launch adding into it (SpMM: ``bind_dense(...,
accumulate=True)``; SpMV: the raw ``launch``, which never zeroes), checked against the whole
matrix's product. That pair is the case's result
``split:W[light + pieces]`` (``split:W:MIN[...]`` for another MIN); the parts' times (each
variant's, and the fastest) ride along in its ``split`` record. A matrix with no heavy row is
recorded as skipped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from teaal_loops.bench import dense_timing, records, sides
from teaal_loops.bench.context import Context, SplitAt
from teaal_loops.bench.cusparse import checks
from teaal_loops.bench.variants import Variant, prepare_variant
from teaal_loops.errors import TeaalLoopsError
from teaal_loops.layouts.pieces import panel_width
from teaal_loops.matrix.heavy_rows import min_nnz_option

# The pieces part is also timed in blocks of this many threads: the pieces of one panel are
# neighbouring tiles gathering from the same rows of B, and a larger block walks more of them
# together, finding those rows in its SM's L1. On longrows-r20 at N = 128 on an H100 the
# fastest pieces kernel (lanes_over_n_vec) took 696 us at 512 threads, 751 at 1,024, 886 at
# 256 and 1,000 at its default 128; at N = 8 group_lanes_vec 116 at 512 against 129
# (benchmarks/spmm_h100_split_blocks.json.gz). The light rows gained nothing from it.
PIECES_BLOCK_THREADS = 512


def parse_split(value: int | str | SplitAt) -> SplitAt:
    """``--split``'s ``W`` or ``W:MIN`` (panel width, fewest nonzeros of a heavy row), each
    read as ``pieces:W`` and ``split_heavy`` read theirs; else one line naming the value."""
    if isinstance(value, SplitAt):
        return value
    width, sep, low = str(value).partition(":")
    if not sep:
        return SplitAt(panel_width(value if isinstance(value, int) else width))
    if not low.strip().isdecimal():
        raise TeaalLoopsError(f"--split {value}: MIN after the colon must be a whole number "
                              "of nonzeros, e.g. --split 65536:128")
    return SplitAt(panel_width(width), min_nnz_option(int(low), f"--split {value}"))


# (variant, the part's matrices, the part's check) -> the variant's record on that part
TimePart = Callable[[Variant, list[Any], sides.Check], dict[str, Any]]


def split_result(ctx: Context, at: SplitAt, kind: str, dtype: str, mats: list[Any],
                 inputs: list[Any], check: sides.Check, nbytes: int,
                 baseline_ms: float | None, time_part: TimePart) -> dict[str, Any]:
    """The record of the split ``at`` (module docstring). ``kind``: ``spmv`` (``inputs``: x,
    a copy per matrix) or ``spmm`` (``inputs``: the dense operand tuples); ``time_part`` times
    one variant on one part as the case times its variants."""
    from teaal_loops.runtime.split import split_heavy

    layout = f"pieces:{at.width}"
    result: dict[str, Any] = {"label": at.name, "spec": "split", "params": {},
                              "layout": at.name}
    parts = [split_heavy(m, at.width, min_nnz=at.min_nnz) for m in mats]
    lights, heavies = [p[0] for p in parts], [p[1] for p in parts]
    heavy_nnz = int(heavies[0].nnz)
    info: dict[str, Any] = {"panel_width": at.width, "min_nnz": at.min_nnz,
                            "light_nnz": int(lights[0].nnz), "heavy_nnz": heavy_nnz,
                            "heavy_rows": int((ctx.cp.diff(heavies[0].indptr) > 0).sum())}
    result["split"] = info
    if heavy_nnz == 0:
        result["skipped"] = (f"no row is heavy at panels of {at.width} columns from "
                             f"{at.min_nnz} nonzeros")
        return result
    # the run's variants, each spec and parameters once, in CSR for the light rows (the
    # persisting-L2 experiment and other layouts aside)
    variants = list({v.label: v for v in (dataclasses.replace(v, layout="csr")
                                          for v in ctx.options.variants_of(kind)
                                          if not v.persist_x)}.values())
    best = {}
    for part, matrices, candidates in (
        ("light", lights, variants),
        ("pieces", heavies, [dataclasses.replace(v, layout=layout, block_threads=b)
                             for v in variants
                             for b in dict.fromkeys((v.block_threads, PIECES_BLOCK_THREADS))]),
    ):
        operand = inputs[0] if kind == "spmv" else inputs[0][0]
        ref = matrices[0] @ operand
        bound = (checks.spmv_bound if kind == "spmv" else checks.spmm_bound)(
            ctx.cp, matrices[0], operand)

        def part_check(got: Any, ref: Any = ref, bound: Any = bound) -> dict[str, Any]:
            return checks.compare(ctx.cp, got, ref, bound)

        timed = []
        for variant in candidates:
            ctx.say(f"{at.name} {part}: {variant.label}")
            record = records.guarded_variant(
                variant, lambda v=variant, m=matrices, c=part_check: time_part(v, m, c))
            ctx.forget(variant, dtype, matrices)
            if record.get("valid") and "kernel" in record:
                timed.append((record["kernel"]["median_ms"], variant, record["label"]))
        if not timed:
            result["error"] = f"no variant ran the {part} rows"
            return result
        ms, variant, label = min(timed, key=lambda t: t[0])
        best[part] = variant
        info[part] = {"label": label, "median_ms": ms, "variants": len(timed),
                      "times_ms": {lab: t for t, _, lab in timed}}
    result["label"] = (f"{at.name}[{best['light'].label} + "
                       f"{best['pieces'].label.replace('@' + layout, '')}]")
    pair = _spmv_pair if kind == "spmv" else _spmm_pair
    try:
        op, output = pair(ctx, best["light"], best["pieces"], dtype, lights, heavies, inputs)
        # the light launch must write every row of the poisoned output, the pieces add into it
        result.update(dense_timing.checked_and_timed(ctx, op, len(mats), output, check, nbytes,
                                                     baseline_ms, {}))
        ctx.forget(best["light"], dtype, lights)
        ctx.forget(best["pieces"], dtype, heavies)
    except Exception as err:  # a refusal or a bug: recorded, the case goes on
        result["error"] = f"{type(err).__name__}: {sides.first_line(err)}"
    return result


def _spmm_pair(ctx: Context, light: Variant, pieces: Variant, dtype: str,
               lights: Sequence[Any], heavies: Sequence[Any], denses: list[Any]) -> Any:
    """(op(i), the output op(0) writes): both launches bound once per input copy."""
    k = len(lights)
    k_light, k_pieces = ctx.kernel(light, dtype), ctx.kernel(pieces, dtype)
    p_light = prepare_variant(k_light, light, list(lights))
    p_pieces = prepare_variant(k_pieces, pieces, list(heavies))
    ops_light = [dense_timing.operand_orders(k_light, d)[0] for d in denses]
    ops_pieces = [dense_timing.operand_orders(k_pieces, d)[0] for d in denses]
    first = k_light.call_dense(p_light[0], ops_light[0])  # compiles; the output's shape
    outs = [ctx.cp.empty_like(first) for _ in range(k)]
    pairs = [(k_light.bind_dense(p_light[j], ops_light[j], outs[j]),
              k_pieces.bind_dense(p_pieces[j], ops_pieces[j], outs[j], accumulate=True))
             for j in range(k)]

    def op(i: int) -> None:
        stores, adds = pairs[i % k]
        stores.launch()
        adds.launch()

    return op, outs[0]


def _spmv_pair(ctx: Context, light: Variant, pieces: Variant, dtype: str,
               lights: Sequence[Any], heavies: Sequence[Any], xs: list[Any]) -> Any:
    """(op(i), the output op(0) writes): the light launch (its output zeroed first where its
    schedule adds), then the pieces' raw launch, which adds and never zeroes."""
    k = len(lights)
    k_light, k_pieces = ctx.kernel(light, dtype), ctx.kernel(pieces, dtype)
    p_light = prepare_variant(k_light, light, list(lights))
    p_pieces = prepare_variant(k_pieces, pieces, list(heavies))
    ys = [k_light.new_output(p) for p in p_light]

    def op(i: int) -> None:
        j = i % k
        k_light.zero_output(p_light[j], ys[j])
        k_light.launch(p_light[j], xs[j], ys[j])
        k_pieces.launch(p_pieces[j], xs[j], ys[j])

    return op, ys[0]
