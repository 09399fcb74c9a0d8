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
MAX_INDENT = 16


def _indent(text: str) -> int:
    """``--indent``: a small number (a huge one would make every line that long)."""
    value = text.strip()
    if not (value.isascii() and value.isdigit() and len(value) <= 3 and int(value) <= MAX_INDENT):
        raise argparse.ArgumentTypeError(f"expected a number from 0 to {MAX_INDENT}, got {text!r}")
    return int(value)


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
    p.add_argument(
        "--indent",
        type=_indent,
        default=2,
        help=f"JSON indentation, 0 to {MAX_INDENT} (default 2; 0 prints one line)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec, strict=args.strict)
    for warning in spec.warnings:
        print(str(warning), file=sys.stderr)
    text = json.dumps(spec_to_json(spec), indent=args.indent if args.indent > 0 else None)
    sys.stdout.write(text + "\n")  # a closed pipe (`| head`) is handled by the dispatcher
    sys.stdout.flush()
    return 0
