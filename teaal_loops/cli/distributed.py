"""``run --distributed`` and ``explain --ranks P``: the command line of teaal_loops.distributed.

``teaal-loops run SPEC ... --distributed`` is one rank of a distributed product, started by
``mpiexec -n P`` (mpi4py) or ``teaal-loops launch -n P`` (one host, no MPI); alone it is a
world of one. Every rank reads the matrix, plans the partition and the exchange the same way,
joins NCCL, and runs its shard with the spec's generated kernel; rank 0 prints. ``explain
--ranks P`` prints the same plan on the CPU: the partition, each shard's load, both
exchanges' volumes and modelled times, the choice (docs/distributed.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from typing import Any

import numpy as np

from teaal_loops import pipeline, runtime
from teaal_loops.cli.common import (
    DTYPES,
    dense_size_for,
    load_matrix_from_args,
    parse_params,
    parse_ranks,
)
from teaal_loops.distributed import plan as dplan
from teaal_loops.distributed.device import select_device
from teaal_loops.distributed.exchange import gather_rows
from teaal_loops.distributed.generated import check_rows
from teaal_loops.distributed.model import H100, H200, Fabric
from teaal_loops.distributed.partition import MAX_PARTS
from teaal_loops.distributed.run import (
    device_product,
    generated_product,
    owned_block,
    time_phases,
)
from teaal_loops.distributed.world import World, detect_world
from teaal_loops.errors import ParameterError
from teaal_loops.ir.model import Schedule
from teaal_loops.matrix import rowwise
from teaal_loops.runtime import validation
from teaal_loops.schedules.binding import DEFAULT_DENSE_SIZE
from teaal_loops.spec import load_spec
from teaal_loops.spec.model import Extensions

EXCHANGE_CHOICES = ("auto", "allgather", "halo")


# -- options --------------------------------------------------------------------------------
def add_run_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("distributed (docs/distributed.md)")
    group.add_argument(
        "--distributed", action="store_true",
        help="run as one rank of a row-partitioned product: start P ranks with "
        "'mpiexec -n P teaal-loops run ...' or 'teaal-loops launch -n P -- run ...'",
    )
    group.add_argument(
        "--exchange", choices=EXCHANGE_CHOICES, default="auto",
        help="how x is exchanged: the cost model's choice (auto), or force one",
    )
    group.add_argument(
        "--report", metavar="FILE", default=None,
        help="with --distributed: rank 0 writes the run (partition, exchange, every rank's "
        "times and checks) as JSON",
    )


def add_explain_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("distributed (docs/distributed.md)")
    group.add_argument("--ranks", type=int, default=None, metavar="P",
                       help="also plan a product over P ranks: partition, load, exchange")
    group.add_argument("--exchange", choices=EXCHANGE_CHOICES, default="auto",
                       help="with --ranks: force an exchange (default: the model's choice)")
    group.add_argument("--gpus-per-node", type=int, default=8, metavar="N",
                       help="with --ranks: GPUs a node in the model (default 8)")
    group.add_argument("--gpu", choices=["h100", "h200"], default="h200",
                       help="with --ranks: the GPU of the model (default h200)")


def _ranks_count(value: int | None, option: str) -> int:
    if value is None or not 1 <= value <= MAX_PARTS:
        raise ParameterError(f"{option} {value}: must be in 1..{MAX_PARTS}")
    return value


# -- explain --ranks ------------------------------------------------------------------------
def explain_report(
    args: argparse.Namespace, schedule: Schedule, A: Any, dense_size: int | None
) -> dict[str, Any] | None:
    """The plan of ``explain --ranks P`` (None without ``--ranks``)."""
    if args.ranks is None:
        return None
    ranks = _ranks_count(args.ranks, "--ranks")
    if A is None:
        raise ParameterError("--ranks needs a matrix: -m FILE or --synthetic KIND:...")
    if not 1 <= args.gpus_per_node <= MAX_PARTS:
        raise ParameterError(f"--gpus-per-node {args.gpus_per_node}: must be in 1..{MAX_PARTS}")
    fabric = Fabric(gpus_per_node=args.gpus_per_node, device=H100 if args.gpu == "h100" else H200)
    value_bytes = np.dtype(DTYPES[getattr(args, "dtype", None) or "f32"]).itemsize
    width = 1 if schedule.form.dense is None else (dense_size or DEFAULT_DENSE_SIZE)
    return dplan.explain(
        schedule, A, ranks, params=parse_params(args.param), value_bytes=value_bytes,
        width=width, fabric=fabric, exchange=args.exchange,
    )


def explain_lines(doc: dict[str, Any]) -> str:
    return "\n".join(dplan.report_lines(doc))


# -- run --distributed ----------------------------------------------------------------------
def _kernel(args: argparse.Namespace, dtype: str, params: dict[str, int]) -> Any:
    spec = load_spec(args.spec)
    if args.schedule == "auto":
        spec = dataclasses.replace(
            spec, extensions=dataclasses.replace(spec.extensions or Extensions(), schedule="auto")
        )
    return pipeline.compile(
        spec, layout=args.layout, dtype=dtype, params=params, padding_limit=args.padding_limit
    )


def _operand(cols: int, dtype: str, seed: int, width: int | None) -> Any:
    if width is None:
        return validation.random_vector(cols, dtype, seed)
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (cols, width)).astype(dtype)


def run_distributed(args: argparse.Namespace) -> int:
    """One rank of ``run --distributed`` (module docstring)."""
    if args.repeat < 1 or args.warmup < 0:
        raise ParameterError("--repeat must be at least 1 and --warmup at least 0")
    if getattr(args, "device_synthetic", None):
        return run_generated(args)
    dtype = DTYPES[args.dtype]
    params = parse_params(args.param)
    kernel = _kernel(args, dtype, params)
    width = None
    if isinstance(kernel, pipeline.AutoKernel):  # auto chooses among SpMV kernels
        if args.rank:
            raise ParameterError("--rank: schedule auto runs SpMV specs, which have no dense rank")
    else:
        dplan.check_form(kernel.schedule)
        width = _dense_width(args, kernel)
    _check_report_path(args.report)
    world, device, fabric = _join()  # no GPU: one line now, before reading a large matrix
    name, A = load_matrix_from_args(args)
    if isinstance(kernel, pipeline.AutoKernel):
        kernel = kernel.kernel_for(A)
    plan = dplan.plan_product(
        kernel.schedule, A, world.size, params=kernel.params,
        value_bytes=kernel.dtype.itemsize, width=width or 1, fabric=fabric,
        exchange=args.exchange,
    )
    product = device_product(world, kernel, A, plan, width=width)
    cupy = runtime.cupy_module()
    x = _operand(A.shape[1], dtype, args.seed, width)
    x_own = cupy.asarray(owned_block(x, plan, world.rank))
    y_own = product.new_output()
    y_own.fill(float("nan"))  # rows the product fails to write stay NaN and count as errors
    product(x_own, y_own)
    y = gather_rows(product.exchange.transport, plan.partition, y_own, width=width)
    y_host = y.get() if world.rank == 0 else None
    times = time_phases(product, x_own, y_own, repeat=args.repeat, warmup=args.warmup)
    every = world.channel.allgather(times.as_dict())
    if world.rank == 0:
        _print_run(args, world, name, A, plan, every)
        _print_checks(args, kernel, A, x, y_host, width)
        if args.report:
            _write_report(args.report, _run_document(
                args, world, device.name, name, A.shape, int(A.nnz), width, plan.partition,
                plan.choice, [int(g) for g in plan.volume.ghosts],
                [{"times": t} for t in every]))
    world.channel.barrier()  # the others wait while rank 0 validates
    return 0


def _dense_width(args: argparse.Namespace, kernel: Any) -> int | None:
    """SpMM's columns of B and Z (``--rank``, else the default); None for SpMV, which takes
    no ``--rank``."""
    if kernel.schedule.form.dense is None:
        if args.rank:
            raise ParameterError(f"--rank: {args.spec} is SpMV, which has no dense rank")
        return None
    return dense_size_for(kernel.schedule, parse_ranks(args.rank)) or DEFAULT_DENSE_SIZE


def _join() -> tuple[World, Any, Fabric]:
    """This rank's world, on its own GPU (chosen before anything touches one), the GPU, and
    the fabric the cost model sees (the host's ranks on NVLink)."""
    world = detect_world()
    runtime.cupy_module()
    select_device(world)
    device = runtime.device_info()
    gpu = H100 if "H100" in device.name.upper() else H200
    return world, device, Fabric(gpus_per_node=world.local_size, device=gpu)


def _run_document(
    args: argparse.Namespace, world: World, device: str, matrix: str, shape: Any, nnz: int,
    width: int | None, partition: Any, choice: Any, ghosts: list[int],
    per_rank: list[dict[str, Any]],
) -> dict[str, Any]:
    """``--report``'s JSON of a distributed run, either path: the run, its plan, and each
    rank's times (and, generated, its load and check)."""
    times = [r["times"] for r in per_rank]
    return {
        "matrix": matrix, "spec": args.spec, "dtype": args.dtype, "device": device,
        "rows": int(shape[0]), "cols": int(shape[1]), "nnz": nnz,
        "ranks": world.size, "launcher": world.launcher, "width": width,
        "repeat": args.repeat, "partition": partition.as_dict(),
        **choice.as_dict(), **({"exchange": "none"} if world.size == 1 else {}),
        "halo_recv_entries": ghosts,
        "elapsed_ms": max(t["product_ms"] for t in times),
        "mean_ms": max(t["product_mean_ms"] for t in times),
        "per_rank": per_rank,
    }


def _print_run(args: argparse.Namespace, world: World, name: str, A: Any,
               plan: dplan.ProductPlan, every: list[dict[str, float]]) -> None:
    part = plan.partition
    print(f"Matrix: {name}")
    print(f"Dimensions: {A.shape[0]} x {A.shape[1]} ({A.nnz})")
    print(f"Ranks: {world.size} ({world.launcher}; {world.local_size} on this host)")
    print(f"Partition: imbalance max/mean {part.imbalance:.4f} (schedule cost, "
          f"G = {part.group_size})")
    print(f"Exchange: {plan.choice.reason}")
    print(f"Elapsed (ms): {max(t['product_ms'] for t in every):.6f}")
    if args.verbose:
        print("  rank  product_ms  exchange_ms  diag_ms  offd_ms   ghosts")
        for r, t in enumerate(every):
            print(f"  {r:>4} {t['product_ms']:>11.4f} {t['exchange_ms']:>12.4f} "
                  f"{t['diag_ms']:>8.4f} {t['offd_ms']:>8.4f} {plan.plans[r].ghosts:>8}")


def _print_checks(args: argparse.Namespace, kernel: Any, A: Any, x: Any, y: Any,
                  width: int | None) -> None:
    """Rank 0: the distributed result against float64 (``--validate``, ``--rigorous``) and
    against one GPU running the same kernel on the whole matrix, within the Wilkinson bound."""
    if not (args.validate or args.rigorous):
        return
    dtype = kernel.dtype.name
    if width is None:
        report = validation.rigorous(A, x, y, dtype)
        bound = validation.wilkinson_bound(A, x, dtype)
    else:
        report = validation.spmm_check(A, x, y, dtype)
        bound = None
    if args.validate:
        print(f"Errors: {report.naive_mismatches}")
    if args.rigorous:
        for line in report.lines():
            print(line)
    single = kernel(A, runtime.cupy_module().asarray(x)).get()
    if bound is None:  # SpMM: each one within its bound of the reference
        agree = validation.spmm_check(A, x, single, dtype).gpu_overruns == 0
        print(f"SingleGPU: {'agrees' if agree and report.gpu_overruns == 0 else 'DISAGREES'} "
              "(both within the Wilkinson bound of float64)")
        return
    diff = np.abs(np.asarray(y, dtype=np.float64) - np.asarray(single, dtype=np.float64))
    apart = int(np.count_nonzero(~(diff <= 2 * bound)))
    print(f"SingleGPUDisagreements: {apart} (rows further apart than twice the Wilkinson bound)")


# -- run --distributed --device-synthetic -----------------------------------------------------
def _generated_kernel(args: argparse.Namespace, dtype: str, params: dict[str, int]) -> Any:
    """The spec's kernel for a generated matrix: SpMV or SpMM on CSR (the shard's arrays are
    handed to it as they are made)."""
    if args.schedule == "auto":
        raise ParameterError(
            "--device-synthetic: schedule auto chooses from the whole matrix, which no rank "
            "holds; name the spec's own schedule"
        )
    kernel = _kernel(args, dtype, params)
    dplan.check_form(kernel.schedule)  # SDDMM and transposed forms: refused in one line
    if kernel.layout != "csr":
        raise ParameterError(
            f"--device-synthetic: layout {kernel.layout} is not supported; the csr layout takes "
            "the generated shards as they are"
        )
    return kernel


def run_generated(args: argparse.Namespace) -> int:
    """One rank of ``run --distributed --device-synthetic``: the matrix is made shard by shard,
    each rank its own rows on its own GPU (teaal_loops.distributed.generated)."""
    family = rowwise.parse_family(args.device_synthetic)
    _check_report_path(args.report)
    dtype = DTYPES[args.dtype]
    kernel = _generated_kernel(args, dtype, parse_params(args.param))
    width = _dense_width(args, kernel)
    world, device, fabric = _join()
    made = generated_product(world, kernel, family, fabric=fabric, exchange=args.exchange,
                             width=width)
    product, part = made.product, made.partition
    cupy = runtime.cupy_module()
    lo, hi = part.cols_of(world.rank)
    x_own = rowwise.operand(cupy, args.seed, lo, hi, kernel.dtype, width)
    y_own = product.new_output()
    y_own.fill(float("nan"))  # rows the product fails to write stay NaN and count as errors
    product(x_own, y_own)
    check = None
    if args.validate or args.rigorous:
        check = check_rows(cupy, family, made.shard, args.seed, y_own, kernel.dtype,
                           width=width).as_dict()
    times = time_phases(product, x_own, y_own, repeat=args.repeat, warmup=args.warmup)
    shard = made.shard
    mine = {"times": times.as_dict(), "check": check, "setup_s": made.setup_s,
            "nnz": shard.nnz, "diag_nnz": shard.diag.nnz, "offd_nnz": shard.offd.nnz,
            "offd_rows": len(shard.offd_rows), "ghosts": shard.ghosts}
    every = world.channel.allgather(mine)
    if world.rank == 0:
        doc = _run_document(args, world, device.name, family.describe(),
                            (made.shape.rows, made.shape.cols), made.shape.nnz, width,
                            made.partition, made.choice, [c.ghosts for c in made.counts], every)
        for line in _generated_lines(args, doc):
            print(line)
        if args.report:
            _write_report(args.report, doc)
    world.channel.barrier()
    return 0


def _check_report_path(path: str | None) -> None:
    """``--report FILE``'s folder exists, checked before anything is made (not after minutes
    of generation and timing)."""
    if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise ParameterError(f"--report {path!r}: its folder does not exist")


def _write_report(path: str, doc: dict[str, Any]) -> None:
    try:
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    except OSError as err:
        raise ParameterError(f"--report {path!r}: {err.strerror or err}") from None


def _generated_lines(args: argparse.Namespace, doc: dict[str, Any]) -> list[str]:
    part = doc["partition"]
    lines = [
        f"Matrix: {doc['matrix']} (each rank made its rows on its own GPU)",
        f"Dimensions: {doc['rows']} x {doc['cols']} ({doc['nnz']})"
        + ("" if doc["width"] is None else f"; B and Z of {doc['width']} columns"),
        f"Ranks: {doc['ranks']} ({doc['launcher']})",
        f"Partition: imbalance max/mean {part['imbalance']:.4f} (schedule cost, "
        f"G = {part['group_size']})",
        "Exchange: none (one rank owns all of x)" if doc["exchange"] == "none" else
        f"Exchange: {doc['exchange']}{' (asked for)' if doc['forced'] else ''}: modelled "
        f"{doc['model_allgather_us']:.1f} us allgather, {doc['model_halo_us']:.1f} us halo",
        f"Elapsed (ms): {doc['elapsed_ms']:.6f}",
        f"Mean (ms): {doc['mean_ms']:.6f} (the slowest rank, {doc['repeat']} products back to "
        "back)",
    ]
    if args.verbose:
        lines.append("  rank         nnz    diag_nnz    offd_nnz   ghosts  product_ms  "
                     "exchange_ms  diag_ms  offd_ms  setup_s")
        for r, e in enumerate(doc["per_rank"]):
            t = e["times"]
            lines.append(
                f"  {r:>4} {e['nnz']:>11} {e['diag_nnz']:>11} {e['offd_nnz']:>11} "
                f"{e['ghosts']:>8} {t['product_ms']:>11.4f} {t['exchange_ms']:>12.4f} "
                f"{t['diag_ms']:>8.4f} {t['offd_ms']:>8.4f}  "
                + " ".join(f"{k}={v:.2f}" for k, v in e["setup_s"].items()))
    checks = [e["check"] for e in doc["per_rank"]]
    if checks[0] is not None:
        if args.validate:
            lines.append(f"Errors: {sum(c['naive_mismatches'] for c in checks)}")
        if args.rigorous:
            overruns = sum(c["overruns"] for c in checks)
            lines += [
                f"WilkinsonK: {validation.WILKINSON_K}",
                f"NaiveMismatches: {sum(c['naive_mismatches'] for c in checks)}",
                f"GPUOverruns: {overruns}",
                f"MaxAbsError: {max(c['max_abs_error'] for c in checks):.6e}",
                f"MaxRelError: {max(c['max_rel_error'] for c in checks):.6e}",
                f"Verdict: {'NOT_A_BUG' if overruns == 0 else 'POTENTIAL_BUG'}",
            ]
        operand = "x" if doc["width"] is None else "B"
        lines.append(f"Checked: every rank's rows against float64, the rows and {operand} "
                     "regenerated on the rank (nothing gathered)")
    return lines
