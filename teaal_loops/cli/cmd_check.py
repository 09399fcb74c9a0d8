"""``teaal-loops check``: the HiFiber reference against the CPU simulation or the GPU kernel.

Runs the spec's HiFiber program (on fibertree when importable, else on the built-in fibers)
and the other side on one matrix and seeded random dense operands without zeros (SpMV's
vector, SpMM's ``B``, SDDMM's ``A`` and ``B``: shapes from the matrix and ``--rank``, bound by
their names in the spec), then reports whether the values agree (SpMV and SpMM: every output
element within the tolerances; SDDMM: the value of every atom of the sampler) and whether
every nonzero (times every dense index) is owned by the same thread: the reference's space
stamps are mapped to threads through the IR's binding and compared with the simulation's (or
the trace kernel's) owners. Exit status 0 when both agree, 1 when not.

A spec ending with TeAAL's scalar epilogue (``Z = a * T1 + b * C``) also gets a seeded addend
``C`` and seeded scalars, bound by their names in the spec for the reference; ``Z`` is
compared, and owners are the product's (the reference's multiplies of ``T1``).

The reference runs at Python speed: above ``--max-nnz`` multiplies (nonzeros for SpMV,
nonzeros x D for SpMM and SDDMM; TeAAL's two-einsum SDDMM computes the whole dense product
first) it is not run; the values are then compared with a NumPy/SciPy oracle and owners are
not checked.
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
    add_rank_option,
    add_seed_option,
    dense_operands,
    dense_size_for,
    load_matrix_from_args,
    parse_params,
    parse_ranks,
)
from teaal_loops.ir import recognise_einsum
from teaal_loops.ir.model import BoundSchedule, Schedule
from teaal_loops.layouts import tile_view
from teaal_loops.lowering import lower
from teaal_loops.lowering.simulate import operand_shape, rank_sizes, sparse_operand
from teaal_loops.reference import compare_arrays, run_reference
from teaal_loops.reference.compare import Comparison
from teaal_loops.reference.execute import load_engine
from teaal_loops.reference.names import comment
from teaal_loops.reference.ownership import compare_owners
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec

ORDER = 45
MAX_NNZ = 200_000
SDDMM_CHUNK = 1 << 18  # nonzeros of the oracle's sampled product computed at a time


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "check",
        help="check a spec's schedule against its HiFiber reference (values and owners)",
        description=(
            "Run the HiFiber reference of SPEC (fibertree if importable, else the built-in "
            "fibers) and the CPU simulation (--against simulate, default) or the GPU kernel "
            "(--against gpu) on a matrix and seeded random dense operands; print whether "
            "values and the owning thread of every nonzero (and dense index) agree, and which "
            "engine ran. Exit status 1 on disagreement. Above --max-nnz multiplies of the "
            f"reference (default {MAX_NNZ}) the Python-speed reference is replaced by a NumPy "
            "oracle for the values, and owners are not checked."
        ),
    )
    p.add_argument(
        "spec", metavar="SPEC",
        help="a TeAAL spec (YAML) of one sparse operand times dense ones (SpMV, SpMM, SDDMM)",
    )
    add_matrix_options(p, required=True)
    add_param_option(p)
    add_rank_option(p)
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
        help=(
            "most multiplies the reference runs (nonzeros for SpMV, nonzeros x D for SpMM and "
            f"SDDMM), e.g. 200000 or 2e5 (default {MAX_NNZ})"
        ),
    )
    add_seed_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    args.max_nnz = parse_count(args.max_nnz, "--max-nnz")
    ranks = parse_ranks(args.rank)
    spec = load_spec(args.spec)
    params = parse_params(args.param)
    schedule = lower(spec, params=params)
    dense_size = dense_size_for(schedule, ranks)
    if args.reference == "fibertree":
        load_engine("fibertree")  # fail now, with the install hint, before any work
    name, A = load_matrix_from_args(args)
    A = A.tocsr(copy=True)
    stored = A.nnz
    A.eliminate_zeros()  # fibertree treats zeros as absent: both sides see the same nonzeros
    A.sort_indices()
    # bound to the layout's tiles and atoms (for CSR: rows and nonzeros) of the matrix the
    # layout holds (A^T for a transposed form)
    bound = bind(schedule, operand_shape(schedule, A), params=params, dense_size=dense_size)
    held = sparse_operand(schedule, A)
    operands = dense_operands(bound, held.shape[0], held.shape[1], args.seed)
    addend, scalars = _epilogue_inputs(schedule, bound, held.shape, args.seed)

    # a file name may hold line breaks and anything else: shown as one printable line
    print(f"spec: {comment(args.spec)} ({schedule.kind}{_form_words(schedule)})")
    print(f"matrix: {comment(name)} ({A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros)")
    if stored != A.nnz:
        print(f"note: {stored - A.nnz} explicit zeros dropped (zeros are absent in fibertree)")
    if schedule.form.dense is not None:
        shown = ", ".join(
            f"{n} {' x '.join(map(str, np.shape(v)))}"
            for n, v in zip(schedule.form.operands, operands, strict=True)
        )
        print(f"dense: rank {schedule.form.dense.name} = {bound.dense_size}; operands {shown} "
              f"(seed {args.seed})")
    if schedule.form.epilogue is not None:
        print(_epilogue_line(schedule, addend, scalars, args.seed))

    if args.against == "gpu":
        other_y, other_owner, bound, label = _gpu_side(
            args, A, operands, params, bound, addend, scalars
        )
    else:  # a module attribute: tests replace it
        extra = {"scalars": scalars} if scalars else {}
        sim = lowering.simulate(bound, A, *operands, *addend, **extra)
        other_y, other_owner, label = sim.y, sim.owner, "CPU simulation"
    sizes = {p: int(v) for p, v in bound.params.items()}
    print(f"parameters: {', '.join(f'{k}={v}' for k, v in sizes.items()) or 'none'}")

    work, what = _reference_work(spec, schedule, held, bound.dense_size)
    if work > args.max_nnz:
        print(
            f"reference: skipped ({work} {what} > --max-nnz {args.max_nnz}: the HiFiber "
            "reference runs at Python speed); values checked against the NumPy oracle instead"
        )
        oracle = _with_epilogue(schedule, _oracle(schedule, held, operands), addend, scalars)
        cmp = _compare_values(schedule, held, oracle, other_y)
        print(f"values ({label} vs NumPy oracle): {cmp.summary()}")
        print("owners: not checked (no reference run)")
        print("result: " + ("AGREE" if cmp.ok else "DISAGREE"))
        return 0 if cmp.ok else 1

    s = schedule
    ref_params = {p: sizes[p] for p in spec.parameters if p in sizes}
    ref_params.update({p: v for p, v in params.items() if p in spec.parameters})
    tensors = {s.matrix: A, **dict(zip(_operand_names(s), operands, strict=True)), **scalars}
    if s.form.epilogue is not None and s.form.epilogue.addend is not None:
        tensors[s.form.epilogue.addend] = addend[0]
    result = run_reference(spec, tensors, params=ref_params, engine=args.reference)
    how = "the fibertree package" if result.engine == "fibertree" else "teaal_loops.fibers"
    print(f"reference: {result.engine} (HiFiber on {how}; {len(result.stamps)} multiplies)")
    cmp = _compare_values(s, held, result.outputs[s.output], other_y)
    print(f"values ({label} vs reference): {cmp.summary()}")
    owners = compare_owners(spec, bound, A, result.stamps, other_owner)
    print(f"owners ({label} vs reference): {owners.text}")
    ok = cmp.ok and owners.ok
    print("result: " + ("AGREE" if ok else "DISAGREE"))
    return 0 if ok else 1


def _form_words(schedule: Schedule) -> str:
    """Nothing for SpMV (its line is as before), else the form and whether it is transposed."""
    form = schedule.form
    if form.kind == "spmv" and not form.transposed:
        return ""
    return f", {form.kind}" + (", transposed" if form.transposed else "")


def _operand_names(schedule: Schedule) -> tuple[str, ...]:
    return schedule.form.operands or (schedule.vector,)


def _reference_work(
    spec: Any, schedule: Schedule, held: Any, dense_size: int
) -> tuple[int, str]:
    """How many multiplies the reference stamps (and dense output elements it fills)."""
    form = schedule.form
    rows, cols = held.shape
    if form.dense is None:
        return int(held.nnz) + (rows if form.epilogue else 0), "nonzeros"
    work = int(held.nnz) * dense_size
    if form.kind == "sddmm" and recognise_einsum(spec).intermediate is not None:
        work += rows * cols * dense_size  # TeAAL's T1 = A * B: the whole dense product
    if form.kind == "sddmm":
        work = max(work, rows * cols)  # its output is dense in the reference
    if form.epilogue is not None:
        work += rows * dense_size  # one update of every element of Z
    return work, f"reference multiplies ({held.nnz} nonzeros, {form.dense.name} = {dense_size})"


def _compare_values(schedule: Schedule, held: Any, expected: Any, got: Any) -> Comparison:
    """SpMV/SpMM: every output element; SDDMM: the value of every atom of the layout (the
    expected output read at each atom's entry)."""
    if schedule.form.kind != "sddmm":
        exp = np.asarray(expected)
        res = np.asarray(got)
        if res.size == exp.size and res.shape != exp.shape:
            res = res.reshape(exp.shape)
        return compare_arrays(exp, res)
    view = tile_view(schedule.layout, held)
    per_atom = np.zeros(view.num_atoms, dtype=np.float64)
    values = expected[view.entries.row, view.entries.col]
    per_atom[view.entries.atom] = np.asarray(values, dtype=np.float64).ravel()
    return compare_arrays(per_atom, np.asarray(got).ravel())


def _epilogue_inputs(
    schedule: Schedule, bound: BoundSchedule, held: tuple[int, int], seed: int
) -> tuple[list[Any], dict[str, float]]:
    """A scalar epilogue's addend ``C`` (a list of one array, or empty) and scalars by name:
    seeded, ``+-[0.5, 1.5)`` (no zeros, like the operands), the scalars exact in float32 so
    that every dtype runs with the values the reference gets."""
    epi = schedule.form.epilogue
    if epi is None:
        return [], {}
    rng = np.random.default_rng([seed, 1])
    scalars = {
        name: float(np.float32(rng.uniform(0.5, 1.5) * rng.choice([-1.0, 1.0])))
        for name in epi.scalars
    }
    if epi.addend is None:
        return [], scalars
    sizes = rank_sizes(schedule, held[0], held[1], bound.dense_size)
    shape = tuple(sizes[r] for r in epi.addend_ranks)
    size = int(np.prod(shape))
    values = rng.uniform(0.5, 1.5, size=size) * rng.choice([-1.0, 1.0], size=size)
    return [values.reshape(shape)], scalars


def _epilogue_line(schedule: Schedule, addend: list[Any], scalars: dict[str, float],
                   seed: int) -> str:
    epi = schedule.form.epilogue
    assert epi is not None
    bound = [f"{n} = {v:.6g}" for n, v in scalars.items()]
    if addend:
        bound.append(f"{epi.addend} {' x '.join(map(str, np.shape(addend[0])))}")
    return f"epilogue: {epi.text}; {', '.join(bound)} (seed {seed})"


def _with_epilogue(schedule: Schedule, product: Any, addend: list[Any],
                   scalars: dict[str, float]) -> Any:
    """The oracle's ``Z = alpha * T1 + beta * C`` (the product alone without an epilogue)."""
    epi = schedule.form.epilogue
    if epi is None:
        return product
    z = np.asarray(product, dtype=np.float64) * (scalars[epi.alpha] if epi.alpha else 1.0)
    if addend:
        z = z + np.asarray(addend[0], dtype=np.float64) * (scalars[epi.beta] if epi.beta else 1.0)
    return z


def _oracle(schedule: Schedule, held: Any, operands: list[Any]) -> Any:
    """The product with SciPy, from the matrix alone (no layout, no schedule): SpMV and SpMM
    ``A @ B`` (``A^T`` for a transposed form), SDDMM the sampled product as a sparse matrix."""
    form = schedule.form
    csr = held.tocsr().astype(np.float64)
    if form.kind == "spmv":
        return csr @ np.asarray(operands[0], dtype=np.float64)
    if form.kind == "spmm":
        b = np.asarray(operands[0], dtype=np.float64)
        dense = form.dense
        if dense is not None and form.operand_ranks and form.operand_ranks[0][0] == dense.name:
            b = b.T  # declared [N, K]
        return np.asarray(csr @ b)
    u, v = (np.asarray(o, dtype=np.float64) for o in operands)
    coo = csr.tocoo()
    sampled = np.empty(coo.nnz, dtype=np.float64)
    for lo in range(0, coo.nnz, SDDMM_CHUNK):
        rows, cols = coo.row[lo:lo + SDDMM_CHUNK], coo.col[lo:lo + SDDMM_CHUNK]
        sampled[lo:lo + SDDMM_CHUNK] = (u[rows] * v[:, cols].T).sum(axis=1)
    coo.data = coo.data * sampled
    return coo.tocsr()


def _gpu_side(
    args: argparse.Namespace, A: Any, operands: list[Any], params: dict[str, int],
    bound: BoundSchedule, addend: list[Any], scalars: dict[str, float],
) -> tuple[Any, ...]:
    """(values, owners, bound, label) of the GPU kernel: what the simulation gives, in the
    same shapes (the dense forms: owners atoms x D, or flat atom-major). A scalar epilogue
    runs after the product; owners are the product's."""
    if bound.schedule.form.kind != "spmv":
        return _gpu_dense_side(args, A, operands, params, bound)
    (x,) = operands
    kernel = pipeline.compile_for(args.spec, A, dtype=DTYPES[args.dtype], params=params)
    runtime.cupy_module()  # no GPU: one clear line (DeviceError)
    prepared = kernel.prepare(A)
    y = kernel(prepared, x, *addend, **scalars).get()
    owner = kernel.trace(prepared, x).get().astype(np.int64)
    return y, owner, prepared.bound, f"GPU {kernel.dtype.name}"


def _gpu_dense_side(
    args: argparse.Namespace, A: Any, operands: list[Any], params: dict[str, int],
    bound: BoundSchedule,
) -> tuple[Any, ...]:
    """SpMM and SDDMM on the GPU: run the kernel of ``args.spec`` on ``A`` (as the spec declares
    it: the kernel transposes it itself for a transposed form) and ``operands`` (seeded, in
    ``schedule.form.operands`` order and declaration axis order, the dense rank of size
    ``bound.dense_size``). Returns its values (SpMM: M x D; SDDMM: one per atom, in the
    layout's atom order, the kernel's output array itself), the trace build's owner of every
    (atom, dense index) (``Kernel.trace_dense``: atoms x D, atom-major, the atoms of the
    matrix the layout holds, ``A^T`` for a transposed form, in the layout's order: what
    ``compare_owners`` reads), the kernel's binding for that size, and a label."""
    kernel = pipeline.compile_for(args.spec, A, dtype=DTYPES[args.dtype], params=params)
    cupy = runtime.cupy_module()  # no GPU: one clear line (DeviceError)
    prepared = kernel.prepare(A)
    dense = _kernel_operands(kernel.schedule, operands)
    if kernel.schedule.form.kind == "sddmm":
        y = cupy.empty(prepared.bound.matrix.nnz, dtype=kernel.dtype)
        kernel.call_dense(prepared, dense, out=y)  # the per-atom values, not a sparse matrix
    else:
        y = kernel.call_dense(prepared, dense)
    owner = kernel.trace_dense(prepared, dense)
    gpu_bound = bind(kernel.schedule, prepared.bound.matrix, None, kernel.params,
                     dense_size=bound.dense_size)
    values = cupy.asnumpy(y)
    owners = np.asarray(cupy.asnumpy(owner), dtype=np.int64)
    return values, owners, gpu_bound, f"GPU {kernel.dtype.name}"


def _kernel_operands(schedule: Schedule, operands: list[Any]) -> tuple[Any, ...]:
    """The dense operands in the axis order the kernels take (SpMM: ``B`` as ``(K, N)``;
    SDDMM: ``(M, K)``, ``(K, N)``), from the declaration's axis order the check draws them in
    (a ``B`` declared ``[N, K]`` is passed transposed: a view, read through its strides)."""
    form = schedule.form
    dense = form.dense
    if (form.kind == "spmm" and dense is not None and form.operand_ranks
            and form.operand_ranks[0][0] == dense.name):
        return (np.asarray(operands[0]).T,)
    return tuple(operands)
