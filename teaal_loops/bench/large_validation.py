"""Validation on large synthetic matrices, the release gate (``teaal-loops validate``).

For each size (10x steps from 1e6 nonzeros up to ``max_nnz``, those below ``min_nnz`` left
out), each synthetic kind, each dtype and each library spec, one *case*:

* the rigorous verdict: every row's error against a float64 reference within Wilkinson's bound
  (``NOT_A_BUG``; :func:`teaal_loops.runtime.validation.rigorous`);
* a repeated launch: bitwise equal for schedules that store each row once, within the bound
  for those that accumulate with atomics (their order of additions may differ);
* the trace build's owner of every nonzero equal to the CPU simulation's (``lowering.simulate``),
  up to ``trace_max_nnz`` nonzeros (the simulation's time grows with the matrix).

A case fails when any of these fails; the command then exits with status 1. The results go to
a JSON document (``{"failed": N, "cases": [...]}``), rewritten after every matrix so that a run
that is stopped keeps what it checked. Planning, parsing and the summary run without a GPU.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from teaal_loops import matrix, pipeline
from teaal_loops.errors import Location, TeaalLoopsError
from teaal_loops.lowering import simulate
from teaal_loops.runtime import backend, validation

KINDS = ("uniform", "rmat", "banded", "longrows", "emptyrows")
SPECS = ("thread_mapped", "group_mapped", "group_mapped_block", "work_oriented", "merge_path")
DTYPES = ("float32", "float64")
FIRST_SIZE = 1_000_000
MAX_NNZ = 10**9  # the CPU builds each matrix and its float64 reference: keep memory bounded
SEED = 11
VECTOR_SEED = 5
INT32_MAX = 2**31 - 1
BLOCK_GROUP_LANES = 256  # group_mapped_block's default group


def parse_count(text: str, flag: str) -> int:
    """A positive whole number, written ``100000000``, ``100_000_000`` or ``1e8``.

    Scientific notation is accepted when its value is a whole number (``2.5e6``); ``1.5e0`` is
    not a count and is refused, as is anything above :data:`MAX_NNZ`.
    """
    raw = str(text).strip().replace("_", "")
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise TeaalLoopsError(f"{flag} {text!r}: expected a whole number such as 1000000 or "
                              "1e6") from None
    if not value.is_finite() or value != value.to_integral_value():
        raise TeaalLoopsError(f"{flag} {text}: not a whole number")
    if value < 1:
        raise TeaalLoopsError(f"{flag} {text}: must be at least 1")
    if value > MAX_NNZ:
        raise TeaalLoopsError(f"{flag} {text}: at most {MAX_NNZ:,} nonzeros are supported")
    return int(value)


def sizes(max_nnz: int, min_nnz: int = FIRST_SIZE) -> list[int]:
    """1e6, 1e7, ... up to ``max_nnz``, without those below ``min_nnz``; ``[max_nnz]`` when that
    leaves none (a quick run below a million nonzeros)."""
    out, n = [], FIRST_SIZE
    while n <= max_nnz:
        if n >= min_nnz:
            out.append(n)
        n *= 10
    return out or [max_nnz]


def matrix_rows(kind: str, nnz: int) -> int:
    """Rows of a matrix of ``nnz`` nonzeros: ten nonzeros a row (a hundred for longrows, whose
    long rows need room), at least 1000."""
    return max(1000, nnz // (100 if kind == "longrows" else 10))


def matrix_text(kind: str, nnz: int, seed: int = SEED) -> str:
    """The ``--synthetic`` string of one matrix of the run."""
    return f"{kind}:rows={matrix_rows(kind, nnz)},nnz={nnz},seed={seed}"


def fit_params(spec: str, rows: int) -> dict[str, int]:
    """Bindings that keep a launch within 32-bit thread ids (``bind`` refuses larger ones): the
    block-group spec takes several rows a group once rows x 256 lanes would overflow."""
    if spec != "group_mapped_block":
        return {}
    rows_per_group = -(-rows * BLOCK_GROUP_LANES // INT32_MAX)
    return {"ROWS_PER_GROUP": rows_per_group} if rows_per_group > 1 else {}


@dataclass(frozen=True)
class Options:
    max_nnz: int = 10**8
    min_nnz: int = FIRST_SIZE
    trace_max_nnz: int = 2 * 10**7
    kinds: tuple[str, ...] = KINDS
    specs: tuple[str, ...] = SPECS
    dtypes: tuple[str, ...] = DTYPES
    output: Path = Path("validate-large.json")


@dataclass(frozen=True)
class PlannedMatrix:
    """One matrix of the run and the (dtype, spec, params) cases checked on it."""

    text: str
    nnz: int
    rows: int
    cases: tuple[tuple[str, str, tuple[tuple[str, int], ...]], ...]  # dtype, spec, params


def make_options(
    *,
    max_nnz: str = "1e8",
    min_nnz: str | None = None,
    trace_max_nnz: str = "2e7",
    kinds: Sequence[str] = (),
    specs: Sequence[str] = (),
    dtypes: Sequence[str] = (),
    output: str | Path = "validate-large.json",
    library: Path | None = None,
) -> Options:
    """Options from command-line text, every value checked (one-line errors)."""
    top = parse_count(max_nnz, "--max-nnz")
    low = FIRST_SIZE if min_nnz is None else parse_count(min_nnz, "--min-nnz")
    if min_nnz is not None and low > top:
        raise TeaalLoopsError(f"--min-nnz {min_nnz} is above --max-nnz {max_nnz}")
    for kind in kinds:
        if kind not in KINDS:
            raise TeaalLoopsError(f"--kind {kind!r}: expected one of {', '.join(KINDS)}")
    if library is not None:
        for spec in specs:
            if not spec.isidentifier() or not (library / f"{spec}.yaml").is_file():
                known = ", ".join(sorted(p.stem for p in library.glob("*.yaml")))
                raise TeaalLoopsError(f"--spec {spec!r}: not a library spec ({known})")
    short = {"f32": "float32", "f64": "float64", "float32": "float32", "float64": "float64"}
    for dtype in dtypes:
        if dtype not in short:
            raise TeaalLoopsError(f"--dtype {dtype!r}: expected f32 or f64")
    return Options(
        max_nnz=top,
        min_nnz=low,
        trace_max_nnz=parse_count(trace_max_nnz, "--trace-max-nnz"),
        kinds=tuple(dict.fromkeys(kinds)) or KINDS,
        specs=tuple(dict.fromkeys(specs)) or SPECS,
        dtypes=tuple(dict.fromkeys(short[d] for d in dtypes)) or DTYPES,
        output=Path(output),
    )


def plan(options: Options) -> list[PlannedMatrix]:
    """Every matrix of the run, in order, with its cases."""
    out = []
    for nnz in sizes(options.max_nnz, options.min_nnz):
        for kind in options.kinds:
            rows = matrix_rows(kind, nnz)
            cases = tuple(
                (dtype, spec, tuple(sorted(fit_params(spec, rows).items())))
                for dtype in options.dtypes
                for spec in options.specs
            )
            out.append(PlannedMatrix(matrix_text(kind, nnz), nnz, rows, cases))
    return out


def case_ok(verdict: str, repeat_ok: bool, trace_ok: bool | None) -> bool:
    """A case passes with the rigorous verdict NOT_A_BUG, an agreeing repeat and a trace that
    agrees or was not taken (``None``: above ``trace_max_nnz``)."""
    return verdict == "NOT_A_BUG" and repeat_ok and trace_ok is not False


def summary(cases: Sequence[dict[str, Any]], options: Options) -> dict[str, Any]:
    """The JSON document: failures first counted, the settings, every case."""
    return {
        "failed": sum(1 for c in cases if not c.get("ok")),
        "of": len(cases),
        "settings": {"max_nnz": options.max_nnz, "min_nnz": options.min_nnz,
                     "trace_max_nnz": options.trace_max_nnz, "kinds": list(options.kinds),
                     "specs": list(options.specs), "dtypes": list(options.dtypes)},
        "cases": list(cases),
    }


def write_summary(doc: dict[str, Any], path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(path)
    except OSError as err:
        raise TeaalLoopsError(f"cannot write: {err.strerror or err}",
                              location=Location(str(path))) from None


# -- on the GPU --------------------------------------------------------------------------------


def run(
    options: Options, library: Path, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Check every planned case on the GPU; return (and keep writing) the summary document."""

    backend.cupy_module()  # one line without a GPU, before anything is built
    cases: list[dict[str, Any]] = []
    for planned in plan(options):

        t0 = time.perf_counter()
        A = matrix.synthetic_from_string(planned.text)
        say(f"{planned.text}: built in {time.perf_counter() - t0:.1f}s")
        for dtype, spec, params in planned.cases:
            case = check_case(A, planned.text, dtype, library / f"{spec}.yaml", dict(params),
                              options.trace_max_nnz)
            cases.append(case)
            say(f"  {dtype} {spec:20s} {case['verdict']} repeat={case['repeat_ok']} "
                f"trace={case['trace_ok']} ({case['seconds']}s)")
        del A
        write_summary(summary(cases, options), options.output)
    doc = summary(cases, options)
    write_summary(doc, options.output)
    say(f"{doc['of']} cases, {doc['failed']} failed")
    return doc


def check_case(
    A: Any, text: str, dtype: str, spec: Path, params: dict[str, int], trace_max_nnz: int
) -> dict[str, Any]:
    """One case on the GPU (module docstring)."""
    import numpy as np


    t0 = time.perf_counter()
    x = validation.random_vector(A.shape[1], dtype, VECTOR_SEED)
    kernel: Any = pipeline.compile(spec, dtype=dtype, params=params)
    prepared = kernel.prepare(A)
    xd = kernel.vector(prepared, x)
    y1 = kernel(prepared, xd).get()
    y2 = kernel(prepared, xd).get()
    report = validation.rigorous(A, x, y1, dtype)
    if prepared.accumulates:
        bound = validation.wilkinson_bound(A, x, dtype)
        repeat_ok = bool(np.all(np.abs(y1.astype(np.float64) - y2) <= bound))
    else:
        repeat_ok = bool(np.array_equal(y1.view(np.uint8), y2.view(np.uint8)))
    trace_ok: bool | None = None
    if A.nnz <= trace_max_nnz:
        owner = kernel.trace(prepared, xd).get()
        trace_ok = bool(np.array_equal(owner, simulate(prepared.bound, A, x).owner))
    return {
        "matrix": text, "nnz": int(A.nnz), "dtype": dtype, "spec": spec.stem, "params": params,
        "verdict": report.verdict, "gpu_overruns": report.gpu_overruns,
        "max_abs_error": report.max_abs_error, "repeat_ok": repeat_ok, "trace_ok": trace_ok,
        "ok": case_ok(report.verdict, repeat_ok, trace_ok),
        "seconds": round(time.perf_counter() - t0, 2),
    }
