"""``teaal-loops check``: the HiFiber reference against the CPU simulation or the GPU kernel.

Runs the spec's HiFiber program (on fibertree when importable, else on the built-in fibers)
and the other side on one matrix and a random vector without zeros, then reports whether the
values agree and whether every nonzero is owned by the same thread: the reference's space
stamps are mapped to threads through the IR's binding and compared with the simulation's (or
the trace kernel's) owner of every atom. Exit status 0 when both agree, 1 when not.

The reference runs at Python speed: above ``--max-nnz`` nonzeros (default 200000) it is not
run; the values are then compared with a NumPy/SciPy oracle and owners are not checked.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from teaal_loops import lowering, pipeline, runtime
from teaal_loops.bench.large_validation import parse_count
from teaal_loops.cli.common import (
    DTYPES,
    add_dtype_option,
    add_matrix_options,
    add_param_option,
    add_seed_option,
    load_matrix_from_args,
    parse_params,
)
from teaal_loops.lowering import lower, schedule_shape
from teaal_loops.reference import compare_arrays, run_reference
from teaal_loops.reference.execute import load_engine
from teaal_loops.reference.names import comment
from teaal_loops.reference.ownership import compare_owners
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec

ORDER = 45
MAX_NNZ = 200_000


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "check",
        help="check a spec's schedule against its HiFiber reference (values and owners)",
        description=(
            "Run the HiFiber reference of SPEC (fibertree if importable, else the built-in "
            "fibers) and the CPU simulation (--against simulate, default) or the GPU kernel "
            "(--against gpu) on a matrix; print whether values and the owning thread of every "
            "nonzero agree, and which engine ran. Exit status 1 on disagreement. Above "
            f"--max-nnz nonzeros (default {MAX_NNZ}) the Python-speed reference is replaced "
            "by a NumPy oracle for the values, and owners are not checked."
        ),
    )
    p.add_argument("spec", metavar="SPEC", help="a TeAAL spec (YAML) of an SpMV schedule")
    add_matrix_options(p, required=True)
    add_param_option(p)
    add_dtype_option(p)
    p.add_argument(
        "--against",
        choices=["simulate", "gpu"],
        default="simulate",
        help="what to check the reference against (default simulate)",
    )
    p.add_argument(
        "--reference",
        choices=["auto", "fibertree", "builtin"],
        default="auto",
        help="engine of the HiFiber reference (default auto: fibertree if importable)",
    )
    p.add_argument(
        "--max-nnz",
        default=str(MAX_NNZ),
        metavar="N",
        help=f"largest matrix the reference runs on, e.g. 200000 or 2e5 (default {MAX_NNZ})",
    )
    add_seed_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    args.max_nnz = parse_count(args.max_nnz, "--max-nnz")
    spec = load_spec(args.spec)
    params = parse_params(args.param)
    schedule = lower(spec, params=params)
    if args.reference == "fibertree":
        load_engine("fibertree")  # fail now, with the install hint, before any work
    name, A = load_matrix_from_args(args)
    A = A.tocsr(copy=True)
    stored = A.nnz
    A.eliminate_zeros()  # fibertree treats zeros as absent: both sides see the same nonzeros
    A.sort_indices()
    x = _vector_without_zeros(A.shape[1], args.seed)

    # a file name may hold line breaks and anything else: shown as one printable line
    print(f"spec: {comment(args.spec)} ({schedule.kind})")
    print(f"matrix: {comment(name)} ({A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros)")
    if stored != A.nnz:
        print(f"note: {stored - A.nnz} explicit zeros dropped (zeros are absent in fibertree)")

    if args.against == "gpu":
        other_y, other_owner, bound, label = _gpu_side(args, A, x, params)
    else:
        # bound to the layout's tiles and atoms (for CSR: rows and nonzeros)
        bound = bind(schedule, schedule_shape(schedule.layout, A), params=params)
        sim = lowering.simulate(bound, A, x)  # a module attribute: tests replace it
        other_y, other_owner, label = sim.y, sim.owner, "CPU simulation"
    sizes = {p: int(v) for p, v in bound.params.items()}
    print(f"parameters: {', '.join(f'{k}={v}' for k, v in sizes.items()) or 'none'}")

    if A.nnz > args.max_nnz:
        print(
            f"reference: skipped ({A.nnz} nonzeros > --max-nnz {args.max_nnz}: the HiFiber "
            "reference runs at Python speed); values checked against the NumPy oracle instead"
        )
        cmp = compare_arrays(A @ x, other_y)
        print(f"values ({label} vs NumPy oracle): {cmp.summary()}")
        print("owners: not checked (no reference run)")
        print("result: " + ("AGREE" if cmp.ok else "DISAGREE"))
        return 0 if cmp.ok else 1

    s = schedule
    ref_params = {p: sizes[p] for p in spec.parameters if p in sizes}
    ref_params.update({p: v for p, v in params.items() if p in spec.parameters})
    result = run_reference(
        spec, {s.matrix: A, s.vector: x}, params=ref_params, engine=args.reference
    )
    how = "the fibertree package" if result.engine == "fibertree" else "teaal_loops.fibers"
    print(f"reference: {result.engine} (HiFiber on {how}; {len(result.stamps)} multiplies)")
    cmp = compare_arrays(result.outputs[s.output], other_y)
    print(f"values ({label} vs reference): {cmp.summary()}")
    owners = compare_owners(spec, bound, A, result.stamps, other_owner)
    print(f"owners ({label} vs reference): {owners.text}")
    ok = cmp.ok and owners.ok
    print("result: " + ("AGREE" if ok else "DISAGREE"))
    return 0 if ok else 1


def _vector_without_zeros(n: int, seed: int) -> Any:
    """Values in +-[0.5, 1.5): a zero would make fibertree skip the multiply (and its stamp)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(0.5, 1.5, size=n) * rng.choice([-1.0, 1.0], size=n)


def _gpu_side(args: argparse.Namespace, A: Any, x: Any, params: dict[str, int]) -> tuple[Any, ...]:
    kernel = pipeline.compile_for(args.spec, A, dtype=DTYPES[args.dtype], params=params)
    runtime.cupy_module()  # no GPU: one clear line (DeviceError)
    prepared = kernel.prepare(A)
    y = kernel(prepared, x).get()
    owner = kernel.trace(prepared, x).get().astype(np.int64)
    return y, owner, prepared.bound, f"GPU {kernel.dtype.name}"
