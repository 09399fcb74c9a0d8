"""``teaal-loops parse SPEC [--strict]``: check a spec and print it, normalized, as JSON.

The JSON lists each einsum with its expression tree and final ranks, the declaration, rank
orders, partitioning (functions with their sizes and the ranks they create), loop orders,
spacetime, formats, the size parameters found and the warnings. Warnings also go to stderr as
``FILE:LINE:COL: warning: ...``. A malformed spec raises :class:`SpecError`, which the
dispatcher prints as one line (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from teaal_loops.spec import load_spec, spec_to_json

ORDER = 10


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "parse",
        help="check a TeAAL spec and print it, normalized, as JSON",
        description=(
            "Parse and validate a TeAAL spec (einsum + mapping [+ format, architecture, "
            "bindings]) and print the normalized spec as JSON. Errors name the file, line, "
            "column and key; warnings go to stderr."
        ),
    )
    p.add_argument("spec", metavar="SPEC", help="the spec YAML file")
    p.add_argument(
        "--strict",
        action="store_true",
        help="accept only TeAAL's own dialect: reject teaal-loops extensions "
        "(the x-teaal-loops section, x_merge_path)",
    )
    p.add_argument("--indent", type=int, default=2, help="JSON indentation (default 2)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec, strict=args.strict)
    for warning in spec.warnings:
        print(str(warning), file=sys.stderr)
    text = json.dumps(spec_to_json(spec), indent=args.indent if args.indent > 0 else None)
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `teaal-loops parse x.yaml | head` is not an error
        return 0
    return 0
