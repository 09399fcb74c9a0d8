"""``teaal-loops validate``: the large-matrix release gate (rigorous verdict, repeats, owners)."""

from __future__ import annotations

import argparse

from teaal_loops.auto import library_dir
from teaal_loops.bench import large_validation as lv
from teaal_loops.bench.large_validation import KINDS, SPECS
from teaal_loops.bench.records import check_output_path

ORDER = 55


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]

    p = sub.add_parser(
        "validate",
        help="validate every library spec on large synthetic matrices (needs a GPU)",
        description=(
            "For each size (10x steps from 1e6 nonzeros up to --max-nnz), synthetic kind, "
            "library spec and dtype: the rigorous verdict against a float64 reference, a "
            "repeated launch (bitwise equal unless the schedule accumulates with atomics) and "
            "the trace build's owner of every nonzero against the CPU simulation (up to "
            "--trace-max-nnz). Writes a JSON summary; exits 1 when any case fails."
        ),
    )
    p.add_argument("--max-nnz", default="1e8", metavar="N",
                   help="largest size, a whole number such as 100000000 or 1e8 (default 1e8)")
    p.add_argument("--min-nnz", metavar="N", help="skip sizes below N (default 1e6)")
    p.add_argument("--trace-max-nnz", default="2e7", metavar="N",
                   help="compare owners only up to N nonzeros (default 2e7)")
    p.add_argument("--kind", action="append", default=[], metavar="KIND",
                   help=f"synthetic kind, repeatable (default all: {', '.join(KINDS)})")
    p.add_argument("--spec", action="append", default=[], metavar="NAME",
                   help=f"library spec, repeatable (default {', '.join(SPECS)})")
    p.add_argument("--dtype", action="append", default=[], choices=["f32", "f64"],
                   help="repeatable (default both)")
    p.add_argument("-o", "--output", default="validate-large.json", metavar="JSON",
                   help="summary JSON (default validate-large.json)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    library = library_dir()
    options = lv.make_options(
        max_nnz=args.max_nnz, min_nnz=args.min_nnz, trace_max_nnz=args.trace_max_nnz,
        kinds=args.kind, specs=args.spec, dtypes=args.dtype, output=args.output,
        library=library,
    )
    check_output_path(options.output)  # before hours of checking
    doc = lv.run(options, library, say=lambda line: print(line, flush=True))
    return 1 if doc["failed"] else 0
