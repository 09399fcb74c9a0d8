"""Options shared by several subcommands: ``--param``, ``--rank``, ``-m`` / ``--synthetic``,
``--dtype``, and the random dense operands of ``check`` and ``explain``."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from teaal_loops import matrix
from teaal_loops.errors import ParameterError, TeaalLoopsError
from teaal_loops.ir.model import BoundSchedule, Schedule
from teaal_loops.lowering.simulate import operand_shapes
from teaal_loops.matrix import rowwise


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


MAX_RANK_SIZE = 1 << 16  # a dense rank (SpMM's N, SDDMM's K) of at most 65536
MAX_HOST_DENSE_ELEMENTS = 1 << 27  # a host dense operand, output or owner array (1 GiB f64)


def add_rank_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rank",
        action="append",
        default=[],
        metavar="NAME=SIZE",
        help=(
            "the size of the spec's dense rank (SpMM's N, SDDMM's K; repeatable, default 8), "
            "e.g. --rank N=32; the sparse operand's ranks take the matrix's sizes"
        ),
    )


def parse_ranks(items: list[str]) -> dict[str, int]:
    """``["N=32"]`` -> ``{"N": 32}``: a rank name and a size in 1..65536, else one
    ParameterError line."""
    ranks: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not (name.isascii() and name.isidentifier()):
            raise ParameterError(f"--rank {item[:40]!r}: expected NAME=SIZE, e.g. N=32")
        if not value.isascii() or not value.isdigit() or len(value) > 12:
            raise ParameterError(
                f"--rank {name}: {value[:24]!r} is not a size (an integer in 1..{MAX_RANK_SIZE})"
            )
        size = int(value)
        if not 1 <= size <= MAX_RANK_SIZE:
            raise ParameterError(f"--rank {name}: size {size} is not in 1..{MAX_RANK_SIZE}")
        if name in ranks and ranks[name] != size:
            raise ParameterError(f"--rank {name} given twice with different sizes")
        ranks[name] = size
    return ranks


def dense_size_for(schedule: Schedule, ranks: dict[str, int]) -> int | None:
    """The dense rank's size from ``--rank`` (None: not given, the default); a name that is
    not the spec's dense rank is one ParameterError line."""
    form = schedule.form
    dense = form.dense.name if form.dense is not None else None
    matrix_ranks = {schedule.tile_rank, schedule.atom_rank, *form.output_ranks}
    for name in ranks:
        if name == dense:
            continue
        if dense is None:
            raise ParameterError(
                f"--rank {name}: this spec ({form.kind}) has no dense rank; the sizes of its "
                "ranks come from the matrix"
            )
        if name in matrix_ranks:
            raise ParameterError(
                f"--rank {name}: the size of {name} comes from the matrix; only the dense "
                f"rank {dense} can be given"
            )
        raise ParameterError(f"--rank {name}: not a rank of this spec (its dense rank: {dense})")
    return ranks.get(dense) if dense is not None else None


def dense_operands(
    bound: BoundSchedule, rows: int, cols: int, seed: int, *, low: float = 0.5
) -> list[Any]:
    """Seeded random dense operands of ``bound``'s form, in ``schedule.form.operands`` order,
    for a sparse operand of ``rows x cols`` (as the layout holds it): values in
    ``+-[low, low + 1)`` (``low=0.5``: no zeros, so that fibertree skips no multiply). An
    operand, output or owner array larger than :data:`MAX_HOST_DENSE_ELEMENTS` is refused first."""
    schedule = bound.schedule
    d = bound.dense_size
    shapes = operand_shapes(schedule, rows, cols, d)
    if schedule.form.dense is not None:
        arrays = {f"operand {n}": shape for n, shape in zip(
            schedule.form.operands or ("B",), shapes, strict=False
        )}
        arrays["owners (atoms x dense indices)"] = (bound.matrix.nnz, d)
        if schedule.form.kind == "spmm":
            arrays["output"] = (rows, d)
        for what, shape in arrays.items():
            elements = int(np.prod(shape, dtype=np.float64))
            if elements > MAX_HOST_DENSE_ELEMENTS:
                raise ParameterError(
                    f"the {what} would have {' x '.join(map(str, shape))} = {elements} "
                    f"elements, more than {MAX_HOST_DENSE_ELEMENTS}: give the dense rank "
                    f"{schedule.form.dense.name} a smaller size (--rank) or use a smaller matrix"
                )
    rng = np.random.default_rng(seed)
    out = []
    for shape in shapes:
        size = int(np.prod(shape))
        values = rng.uniform(low, low + 1.0, size=size) * rng.choice([-1.0, 1.0], size=size)
        out.append(values.reshape(shape))
    return out


def add_matrix_options(parser: argparse.ArgumentParser, *, required: bool,
                       device_synthetic: bool = False) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    if device_synthetic:  # run and explain: a row-wise family (teaal_loops.matrix.rowwise)
        group.add_argument(
            "--device-synthetic",
            metavar="KIND:key=value,...",
            help=(
                "a matrix made row by row from a counter-based hash, the same for any "
                "number of ranks: banded or powerlaw, e.g. powerlaw:rows=62500000,nnz=1e9,"
                "seed=7; run --distributed makes each rank's rows on its own GPU (it may "
                "exceed one GPU); explain makes the whole matrix on the host"
            ),
        )
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
    if getattr(args, "device_synthetic", None):  # the whole matrix, made on the host
        return args.device_synthetic, rowwise.host_matrix(rowwise.parse_family(
            args.device_synthetic))
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
