"""``teaal-loops explain``: what the generated kernel does, and how balanced it is on a matrix."""

from __future__ import annotations

import argparse
import json
from typing import Any

from teaal_loops.cli.common import (
    add_matrix_options,
    add_param_option,
    add_rank_option,
    dense_operands,
    dense_size_for,
    load_matrix_from_args,
    parse_params,
    parse_ranks,
)
from teaal_loops.cli.distributed import add_explain_options, explain_lines, explain_report
from teaal_loops.lowering import (
    bound_json,
    explain_text,
    schedule_json,
    simulate,
)
from teaal_loops.lowering.simulate import operand_shape, sparse_operand
from teaal_loops.matrix.limit_model import limit_lines, limits, sddmm_limits, spmm_limits
from teaal_loops.pipeline.stages import load_schedule
from teaal_loops.schedules import bind

ORDER = 20


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "explain",
        help="print the schedule IR of a spec and, given a matrix, its load balance",
        description=(
            "Lower SPEC to the schedule IR and print the form (SpMV, SpMM, SDDMM; which "
            "operand is sparse, transposed or not), which rank is which GPU level (the dense "
            "rank's too), the loops and the combine strategy. With a matrix, also bind the "
            "sizes and simulate the schedule on the CPU to report atoms per thread, split rows "
            "and atomics."
        ),
    )
    p.add_argument("spec", metavar="SPEC", help="a TeAAL spec (YAML)")
    add_param_option(p)
    add_rank_option(p)
    add_matrix_options(p, required=False, device_synthetic=True)
    p.add_argument("--layout", help="override the layout the spec's format selects")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_explain_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ranks = parse_ranks(args.rank)
    schedule = load_schedule(args.spec, params=parse_params(args.param), layout=args.layout)
    dense_size = dense_size_for(schedule, ranks)
    bound = sim = A = None
    name = None
    if args.matrix or args.synthetic or args.device_synthetic:
        name, A = load_matrix_from_args(args)
        # bound to the layout's tiles and atoms (for CSR: rows and nonzeros) of the matrix the
        # layout holds (A^T for a transposed form)
        bound = bind(schedule, operand_shape(schedule, A), dense_size=dense_size)
        rows, cols = (A.shape[1], A.shape[0]) if schedule.form.transposed else A.shape
        operands = dense_operands(bound, rows, cols, seed=0, low=0.0)
        sim = simulate(bound, A, *operands)
    lim, what = _limit(schedule, bound, A) if bound is not None else (None, None)
    dist = explain_report(args, schedule, A, dense_size)  # --ranks P: the distributed plan
    if args.json:
        out = schedule_json(schedule)
        if bound is not None and sim is not None:
            out["matrix"] = {"name": name, **bound_json(bound)}
            out["load_balance"] = sim.stats.as_dict()
        if lim is not None:
            out["limit_model"] = {"dtype": "float32", **lim.as_dict()}
        if dist is not None:
            out["distributed"] = dist
        print(json.dumps(out, indent=2, sort_keys=False))
    else:
        print(explain_text(schedule, bound, sim))
        if lim is not None:
            print("\n".join(limit_lines(lim, what or "")))
        if dist is not None:
            print(explain_lines(dist))
    return 0


def _limit(schedule: Any, bound: Any, A: Any) -> tuple[Any, str]:
    """The limit model of the matrix the layout holds, for this form (float32)."""
    held = sparse_operand(schedule, A).tocsr()
    offset = bound.index_bits // 8
    if schedule.form.kind == "spmm":
        lim = spmm_limits(held, bound.dense_size, "float32", offset_bytes=offset)
        return lim, f"float32 SpMM, N={bound.dense_size}"
    if schedule.form.kind == "sddmm":
        lim = sddmm_limits(held, bound.dense_size, "float32", offset_bytes=offset)
        return lim, f"float32 SDDMM, K={bound.dense_size}"
    return limits(held, "float32", offset_bytes=offset), "float32 SpMV"
