"""``teaal-loops explain``: what the generated kernel does, and how balanced it is on a matrix."""

from __future__ import annotations

import argparse
import json

import numpy as np

from teaal_loops.cli.common import (
    add_matrix_options,
    add_param_option,
    load_matrix_from_args,
    parse_params,
)
from teaal_loops.lowering import (
    bound_json,
    explain_text,
    schedule_json,
    schedule_shape,
    simulate,
)
from teaal_loops.pipeline.stages import load_schedule
from teaal_loops.schedules import bind

ORDER = 20


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "explain",
        help="print the schedule IR of a spec and, given a matrix, its load balance",
        description=(
            "Lower SPEC to the schedule IR and print which rank is which GPU level, the loops "
            "and the combine strategy. With a matrix, also bind the sizes and simulate the "
            "schedule on the CPU to report atoms per thread, split rows and atomics."
        ),
    )
    p.add_argument("spec", metavar="SPEC", help="a TeAAL spec (YAML)")
    add_param_option(p)
    add_matrix_options(p, required=False)
    p.add_argument("--layout", help="override the layout the spec's format selects")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    schedule = load_schedule(args.spec, params=parse_params(args.param), layout=args.layout)
    bound = sim = None
    name = None
    if args.matrix or args.synthetic:
        name, A = load_matrix_from_args(args)
        # bound to the layout's tiles and atoms (for CSR: rows and nonzeros)
        bound = bind(schedule, schedule_shape(schedule.layout, A))
        x = np.random.default_rng(0).uniform(-1.0, 1.0, A.shape[1])
        sim = simulate(bound, A, x)
    if args.json:
        out = schedule_json(schedule)
        if bound is not None and sim is not None:
            out["matrix"] = {"name": name, **bound_json(bound)}
            out["load_balance"] = sim.stats.as_dict()
        print(json.dumps(out, indent=2, sort_keys=False))
    else:
        print(explain_text(schedule, bound, sim))
    return 0
