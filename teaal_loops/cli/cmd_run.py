"""``teaal-loops run``: run a spec's kernel on a matrix, time it, optionally validate it.

A spec ending with TeAAL's scalar epilogue (``Z = a * T1 + b * C``) runs the product and the
epilogue kernel on seeded operands: ``C`` and the scalars are drawn like the dense operands
(the scalars rounded to the run's dtype, so the reference sees what the kernel gets), and the
rigorous bound is the epilogue's (:func:`teaal_loops.runtime.validation.epilogue_check`).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import numpy as np
import scipy.sparse as sp

from teaal_loops import pipeline, runtime
from teaal_loops.bench.timing import Timer
from teaal_loops.cli.common import (
    DTYPES,
    add_dtype_option,
    add_matrix_options,
    add_param_option,
    add_rank_option,
    add_seed_option,
    dense_size_for,
    load_matrix_from_args,
    padding_limit,
    parse_params,
    parse_ranks,
)
from teaal_loops.cli.distributed import add_run_options, run_distributed
from teaal_loops.errors import ParameterError
from teaal_loops.runtime import backend, validation
from teaal_loops.runtime.operands import stored_transposed
from teaal_loops.schedules.binding import DEFAULT_DENSE_SIZE
from teaal_loops.spec import load_spec
from teaal_loops.spec.model import Extensions

ORDER = 50


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "run",
        help="run a spec's kernel on the GPU (time it, validate it)",
        description=(
            "Generate, compile and launch the kernel of SPEC on a matrix; print its dimensions "
            "and the median time of --repeat launches (CUDA events, after warm-up). "
            "--validate counts entries off the float64 SciPy reference (atol 1e-2, rtol 1e-3); "
            "--rigorous applies the per-row Wilkinson bound. Needs a CUDA GPU and CuPy."
        ),
    )
    p.add_argument("spec", metavar="SPEC", help="spec YAML file")
    add_matrix_options(p, required=True, device_synthetic=True)
    add_dtype_option(p)
    add_param_option(p)
    p.add_argument(
        "--layout", default=None, help="sparse layout (default: the spec's format, else csr)"
    )
    p.add_argument(
        "--schedule",
        choices=["spec", "auto"],
        default="spec",
        help="spec: the spec's own mapping (default); auto: choose the schedule and its "
        "parameters from the matrix's row statistics",
    )
    p.add_argument("--validate", action="store_true", help="count errors against SciPy float64")
    p.add_argument("--rigorous", action="store_true", help="Wilkinson-bound validation")
    p.add_argument("--repeat", type=int, default=20, metavar="N", help="timed launches (20)")
    p.add_argument(
        "--padding-limit",
        type=padding_limit,
        default="default",
        metavar="X|none",
        help="padded layouts (ell, dia, bcsr) may take X times the CSR bytes (default 20, "
        "loops' SKIP_TOO_LARGE); none lifts the limit",
    )
    p.add_argument("--warmup", type=int, default=3, metavar="N", help="untimed launches (3)")
    add_seed_option(p)
    add_rank_option(p)  # the dense operands are random, seeded by --seed
    p.add_argument("-v", "--verbose", action="store_true", help="schedule, launch, bandwidth")
    add_run_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.distributed:
        return run_distributed(args)
    if args.report:
        raise ParameterError("--report writes a distributed run's JSON: it needs --distributed")
    if args.device_synthetic:
        raise ParameterError(
            "--device-synthetic makes each rank's rows on its GPU: it needs --distributed "
            "(alone, a world of one)"
        )
    if args.repeat < 1 or args.warmup < 0:
        raise ParameterError("--repeat must be at least 1 and --warmup at least 0")
    dtype = DTYPES[args.dtype]
    params = parse_params(args.param)
    spec = load_spec(args.spec)
    if args.schedule == "auto":
        spec = dataclasses.replace(
            spec, extensions=dataclasses.replace(spec.extensions or Extensions(), schedule="auto")
        )
    # Compile (and so validate spec, layout and parameters) before touching the GPU.
    kernel = pipeline.compile(
        spec, layout=args.layout, dtype=dtype, params=params, padding_limit=args.padding_limit
    )
    if args.rank or getattr(kernel, "form", "spmv") != "spmv":
        dense_rank_size(kernel, args.rank)  # refuse a bad --rank before touching the GPU
    runtime.cupy_module()  # no GPU: one line now, before reading a large matrix
    name, A = load_matrix_from_args(args)
    if isinstance(kernel, pipeline.AutoKernel):
        chooser = kernel
        kernel = chooser.kernel_for(A)
        choice = chooser.last_choice
        print(f"Auto: {choice.label} (rule {choice.rule}): {choice.reason}")
    prepared = kernel.prepare(A)
    shape = prepared.shape
    print(f"Matrix: {name}")
    print(f"Dimensions: {shape.rows} x {shape.cols} ({shape.nnz})")
    if kernel.form != "spmv" or kernel.schedule.form.epilogue is not None:
        return run_dense(args, kernel, prepared, A)
    x = validation.random_vector(shape.cols, dtype, args.seed)
    xd = kernel.vector(prepared, x)

    # One checked launch into a poisoned output: rows a STORE kernel fails to write stay NaN
    # and count as errors (accumulating schedules start from the zeros they need).
    y = kernel.new_output(prepared)
    if not prepared.accumulates:
        y.fill(float("nan"))
    kernel.launch(prepared, xd, y)
    y_host = y.get() if (args.validate or args.rigorous) else None

    # Warm-up launches, then each repetition between its own pair of events behind a spin
    # kernel (the events time the kernels, not the Python launches), y re-zeroed outside them.
    for _ in range(max(args.warmup, 1)):
        kernel.zero_output(prepared, y)
        kernel.launch(prepared, xd, y)
    samples = Timer(runtime.cupy_module()).queued(
        lambda _: kernel.launch(prepared, xd, y),
        args.repeat,
        before=lambda _: kernel.zero_output(prepared, y),
    )
    elapsed = samples.median
    if args.verbose:
        _print_details(kernel, prepared, elapsed)
    print(f"Elapsed (ms): {elapsed:.6f}")
    if y_host is not None and args.validate:
        print(f"Errors: {validation.count_errors(y_host, validation.reference(A, x))}")
    if y_host is not None and args.rigorous:
        for line in validation.rigorous(A, x, y_host, dtype).lines():
            print(line)
    return 0


def _print_details(kernel: Any, prepared: Any, elapsed_ms: float) -> None:
    b = prepared.bound
    dev = backend.device_info()
    shape = prepared.shape
    value = kernel.dtype.itemsize
    offset = b.index_bits // 8
    compulsory = (
        shape.nnz * (value + 4) + (shape.rows + 1) * offset + shape.cols * value
        + shape.rows * value
    )
    print(f"Device: {dev.name} ({dev.sm_count} SMs)")
    print(
        f"Schedule: {b.kind} (spec {b.schedule.spec_name}, {kernel.layout}, "
        f"{kernel.dtype.name}, {b.index_bits}-bit offsets)"
    )
    sizes = ", ".join(f"{k}={v}" for k, v in sorted(b.params.items())) or "none"
    print(f"Parameters: {sizes}")
    print(
        f"Launch: {prepared.grid[0]} blocks x {prepared.block[0]} threads "
        f"({b.workers} workers, group {b.group_size})"
    )
    if elapsed_ms > 0:
        print(f"Bandwidth (GB/s, compulsory bytes): {compulsory / (elapsed_ms * 1e6):.1f}")


def dense_rank_size(kernel: Any, ranks: list[str]) -> int:
    """The dense rank's size from ``--rank NAME=SIZE`` (default 8; the shared rules of
    :func:`teaal_loops.cli.common.parse_ranks` and ``dense_size_for``)."""
    if isinstance(kernel, pipeline.AutoKernel):
        if ranks:
            raise ParameterError("--rank: schedule auto runs SpMV specs, which have no dense rank")
        return 1
    size = dense_size_for(kernel.schedule, parse_ranks(ranks))
    return DEFAULT_DENSE_SIZE if size is None else size


def run_dense(args: argparse.Namespace, kernel: Any, prepared: Any, A: Any) -> int:
    """SpMM / SDDMM, or any form with an epilogue: random dense operands, one checked call,
    timed calls, validation."""
    cupy = runtime.cupy_module()
    dtype = kernel.dtype
    form = kernel.schedule.form
    size = dense_rank_size(kernel, args.rank) if form.dense is not None else 1
    shape = prepared.shape
    rng = np.random.default_rng(args.seed)
    if kernel.form == "spmv":
        host: tuple[Any, ...] = (validation.random_vector(shape.cols, dtype.name, args.seed),)
    elif kernel.form == "spmm":
        host = (rng.uniform(-1, 1, (shape.cols, size)).astype(dtype),)
    else:
        host = (rng.uniform(-1, 1, (shape.rows, size)).astype(dtype),
                rng.uniform(-1, 1, (size, shape.cols)).astype(dtype))
    addend, scalars = _epilogue_operands(form, shape.rows, size, dtype, rng)
    placed = tuple(_in_storage_order(cupy, h, i, form) for i, h in enumerate(host))
    operands = (*placed, *(cupy.asarray(a) for a in addend))
    names = ", ".join(form.operands or (kernel.schedule.vector,))
    rank = f", {form.dense.name}={size}" if form.dense is not None else ""
    print(f"Form: {kernel.form} {form.text} ({names} dense{rank})")
    if form.epilogue is not None:
        print("Epilogue: " + ", ".join(
            [f"{n} = {v:.6g}" for n, v in scalars.items()]
            + [f"{form.epilogue.addend} dense"] * bool(addend)
        ))
    result = kernel(prepared, *operands, **scalars)
    values = result.data if kernel.form == "sddmm" else result
    for _ in range(max(args.warmup, 1)):
        kernel.call_dense(prepared, operands, out=values, scalars=scalars)
    samples = Timer(cupy).queued(
        lambda _: kernel.call_dense(prepared, operands, out=values, scalars=scalars),
        args.repeat,
    )
    print(f"Elapsed (ms): {samples.median:.6f}")
    if args.validate or args.rigorous:
        report = _dense_report(kernel, A, host, addend, scalars, result, dtype.name)
        if args.validate:
            print(f"Errors: {report.naive_mismatches}")
        if args.rigorous:
            for line in report.lines():
                print(line)
    return 0


def _epilogue_operands(form: Any, rows: int, size: int, dtype: Any, rng: Any
                       ) -> tuple[tuple[Any, ...], dict[str, float]]:
    """A scalar epilogue's addend ``C`` (shaped like ``Z``: rows, or rows x size, in ``C``'s
    storage order) and its scalars by name, in ``+-[0.5, 1.5)`` rounded to ``dtype``."""
    epi = form.epilogue
    if epi is None:
        return (), {}
    scalars = {n: float(dtype.type(rng.uniform(0.5, 1.5) * rng.choice([-1.0, 1.0])))
               for n in epi.scalars}
    if epi.addend is None:
        return (), scalars
    shape = (rows,) if form.dense is None else (rows, size)
    c = rng.uniform(-1, 1, shape).astype(dtype)
    if len(shape) == 2 and epi.addend_storage and epi.addend_storage[0] != epi.addend_ranks[0]:
        c = np.asfortranarray(c)  # stored column-major, as its rank-order says
    return (c,), scalars


def _in_storage_order(cupy: Any, array: Any, index: int, form: Any) -> Any:
    """Dense operand ``index`` on the device in the layout the spec stores it in
    (:func:`teaal_loops.runtime.operands.stored_transposed`)."""
    if array.ndim == 2 and stored_transposed(form, index):
        return cupy.asfortranarray(cupy.asarray(array))
    return cupy.asarray(array)


def _dense_report(kernel: Any, A: Any, host: Any, addend: Any, scalars: dict[str, float],
                  result: Any, dtype: str) -> Any:
    op = sp.csr_matrix(A)
    if kernel.schedule.form.transposed:
        op = op.T.tocsr()
    epi = kernel.schedule.form.epilogue
    if epi is not None:
        alpha = scalars[epi.alpha] if epi.alpha else 1.0
        beta = scalars[epi.beta] if epi.beta else 1.0
        return validation.epilogue_check(
            op, host[0], addend[0] if addend else None, alpha, beta, result.get(), dtype
        )
    if kernel.form == "spmm":
        return validation.spmm_check(op, host[0], result.get(), dtype)
    got = result.get().tocsr()
    got.sort_indices()
    op.sort_indices()
    return validation.sddmm_check(op, host[0], host[1], got.data, dtype)
