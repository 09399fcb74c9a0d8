"""Options shared by several subcommands: ``--param``, ``-m`` / ``--synthetic``, ``--dtype``."""

from __future__ import annotations

import argparse
from typing import Any

from teaal_loops import matrix
from teaal_loops.errors import ParameterError, TeaalLoopsError


def add_param_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--param",
        "-p",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="bind a size parameter of the spec (repeatable), e.g. --param NUM_THREADS=4096",
    )


MAX_PARAM = 2**62 - 1  # sizes meet in 64-bit index arithmetic: keep well inside int64
_MAX_PARAM_CHARS = 24  # 0x, underscores and 19 digits; int() never sees a longer string


def parse_params(items: list[str]) -> dict[str, int]:
    """``["A=1", "B=2"]`` -> ``{"A": 1, "B": 2}``; a malformed item is a ParameterError.

    A value is a positive integer below 2**62 (decimal, or 0x / 0o / 0b prefixed)."""
    params: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not (name.isascii() and name.isidentifier()):
            raise ParameterError(f"--param {item!r}: expected NAME=VALUE, e.g. NUM_THREADS=4096")
        if len(value) > _MAX_PARAM_CHARS:
            raise ParameterError(
                f"--param {name}: {value[:12]!r}... is too large (at most {MAX_PARAM})"
            )
        try:
            number = int(value, 0)
        except ValueError:
            raise ParameterError(f"--param {name}: {value!r} is not an integer") from None
        if number <= 0:
            raise ParameterError(f"--param {name}: must be a positive integer, got {number}")
        if number > MAX_PARAM:
            raise ParameterError(f"--param {name}: {number} is too large (at most {MAX_PARAM})")
        if name in params and params[name] != number:
            raise ParameterError(f"--param {name} given twice with different values")
        params[name] = number
    return params


def add_matrix_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument(
        "-m",
        "--matrix",
        metavar="FILE",
        help="a Matrix Market file (.mtx or .mtx.gz; general, symmetric, pattern)",
    )
    group.add_argument(
        "--synthetic",
        metavar="KIND:key=value,...",
        help=(
            "a seeded synthetic matrix: uniform, banded, rmat, longrows or emptyrows, e.g. "
            "rmat:rows=1000000,nnz=10000000,seed=7"
        ),
    )


def load_matrix_from_args(args: argparse.Namespace) -> tuple[str, Any]:
    """Return (display name, scipy.sparse.csr_matrix) for ``-m`` or ``--synthetic``."""

    if getattr(args, "matrix", None):
        return args.matrix, matrix.read_matrix_market(args.matrix)
    if getattr(args, "synthetic", None):
        return args.synthetic, matrix.synthetic_from_string(args.synthetic)
    raise TeaalLoopsError("no matrix given: use -m FILE or --synthetic KIND:key=value,...")


def padding_limit(text: str) -> float | None | str:
    """``--padding-limit``: a positive finite number, ``none`` for no limit, or ``default``
    (the layouts' own)."""
    value = text.strip().lower()
    if value == "none":
        return None
    if value == "default":
        return "default"
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value[:24]!r}: expected a number or none") from None
    if not (0 < number < float("inf")):
        raise argparse.ArgumentTypeError(f"{value[:24]!r}: expected a positive number or none")
    return number


MAX_SEED = 2**62


def seed(text: str) -> int:
    """``--seed``: an integer in 0..2^62 (NumPy's generators refuse negative seeds)."""
    value = text.strip()
    if not value.isdigit() or len(value) > 19 or int(value) > MAX_SEED:
        raise argparse.ArgumentTypeError(f"{value[:24]!r}: expected an integer in 0..2^62")
    return int(value)


def add_seed_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seed", type=seed, default=0, help="seed of the random x, 0..2^62 (default 0)"
    )


def add_dtype_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dtype",
        choices=["f32", "f64"],
        default="f32",
        help="value type of the matrix, vector and output (default f32)",
    )


DTYPES = {"f32": "float32", "f64": "float64", "float32": "float32", "float64": "float64"}
