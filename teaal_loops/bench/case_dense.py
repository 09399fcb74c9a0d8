"""One SpMM or SDDMM case (a matrix, a dtype, a dense width): the best cuSPARSE, the second
column and every generated variant, timed alike (:mod:`teaal_loops.bench.sides`).

SpMM ``Z = A B`` takes B of ``cols x N``; SDDMM ``Z = C * (A B)`` (sampled at C's nonzeros,
the case's matrix being C) takes A of ``rows x K`` and B of ``K x cols``. The dense operands
are random in [-1, 1), seeded, C-ordered (row-major: what cuSPARSE's SpMM baseline describes
as it is, and what the SDDMM baseline receives). A generated kernel gets each operand in the
order its spec stores it (``rank-order``): where that is the transpose (``specs/sddmm`` keeps
B as ``[N, K]``), a transposed copy is made once before timing, and the result says so
(``operands``); the SDDMM baseline's ``BT_*`` layouts make the same copy inside each launch,
its ``ROW`` and ``COL_T`` layouts need none, and the fastest of them is kept.

Reference and bound (:mod:`teaal_loops.bench.cusparse.checks`): SpMM against cupyx's ``A @ B``
within ``2 (n + 2) eps (|A| |B|)`` per entry (``n`` the row's nonzeros), SDDMM against a
float64 computation within ``2 (K + 2) eps |C| (|A| |B|)``. Every baseline algorithm and every
variant is checked, outputs poisoned with NaN first; a wrong variant is recorded as wrong and
not timed. Outputs are allocated before timing (``call_dense(prepared, operands, out=...)``),
so only the launch (and the zeroing an accumulating schedule needs) is timed, and the same
call is captured in a CUDA graph for the replay timings.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from teaal_loops.bench import baselines, case_split, dense_timing, records, sides
from teaal_loops.bench.context import Context
from teaal_loops.bench.cusparse import checks
from teaal_loops.bench.suite import MatrixEntry
from teaal_loops.matrix.limit_model import sddmm_limits, spmm_limits

CUPYX_SPMM = ("cupyx.scipy.sparse.csr_matrix @ B (cusparseSpMM; B copied to Fortran order and "
              "descriptors made every call)")
TORCH_SDDMM = ("torch.sparse.sampled_addmm on the same device arrays, then Z *= C's values "
               "(cuSPARSE SDDMM inside PyTorch)")


def run_case(ctx: Context, entry: MatrixEntry, kind: str, dtype: str, width: int,
             loaded: Any, header: dict[str, Any]) -> dict[str, Any]:
    """The case record of ``entry`` for ``kind`` (``spmm``, ``sddmm``) at ``width`` (N, K);
    ``loaded`` is ``(indptr, indices, values, shape, stats)`` on the device, values already in
    ``dtype`` (module docstring)."""
    import cupyx.scipy.sparse as csp

    cp, options = ctx.cp, ctx.options
    indptr, indices, values, shape, _stats = loaded
    rows, cols = shape
    nnz = int(indices.size)
    A0 = csp.csr_matrix((values, indices, indptr), shape=shape, copy=False)
    seed = options.seed + 1
    if kind == "spmm":
        dense0: tuple[Any, ...] = (checks.random_dense(cp, (cols, width), dtype, seed),)
        out_shape: tuple[int, ...] = (rows, width)
        nbytes = checks.spmm_bytes(A0, width)
    else:
        dense0 = (checks.random_dense(cp, (rows, width), dtype, seed),
                  checks.random_dense(cp, (width, cols), dtype, seed + 1))
        out_shape = (nnz,)
        nbytes = checks.sddmm_bytes(A0, width)
    itemsize = int(values.itemsize)
    working_set = (indptr.nbytes + indices.nbytes + values.nbytes
                   + sum(int(d.nbytes) for d in dense0) + _count(out_shape) * itemsize)
    copies = ctx.copies(working_set)
    mats = [A0] + [csp.csr_matrix((values.copy(), indices.copy(), indptr.copy()), shape=shape)
                   for _ in range(copies - 1)]
    denses = [dense0] + [tuple(d.copy() for d in dense0) for _ in range(copies - 1)]
    if kind == "spmm":
        ref, bound = A0 @ dense0[0], checks.spmm_bound(cp, A0, dense0[0])
    else:
        ref, bound = checks.sddmm_reference(cp, A0, *dense0)

    def check(got: Any) -> dict[str, Any]:
        return checks.compare(cp, got, ref, bound)

    case = {**header, "compulsory_bytes": nbytes, "working_set_bytes": working_set,
            "copies": copies}
    ctx.say(f"{entry.name} {kind} {width} {dtype}: cuSPARSE")
    case["cusparse"] = _guarded(lambda: _best(ctx, kind, width, mats, denses, out_shape,
                                              check, nbytes))
    second = _guarded(lambda: _second(ctx, kind, width, mats, denses, out_shape, check, nbytes,
                                      case["cusparse"]))
    if second:
        case["second"] = second
    ctx.advance()
    baseline_ms = records.baseline_kernel_ms(case)
    results = []
    for variant in options.variants_of(kind):
        ctx.say(f"{entry.name} {kind} {width} {dtype}: {variant.label}")
        result = records.guarded_variant(
            variant, lambda v=variant: dense_timing.time_variant(
                ctx, v, dtype, width, mats, denses, check, nbytes, baseline_ms))
        ctx.forget(variant, dtype, mats)
        results.append(result)
        ctx.advance(records.variant_line(result))
    for at in options.splits if kind == "spmm" else ():
        ctx.say(f"{entry.name} {kind} {width} {dtype}: {at.name}")
        result = case_split.split_result(
            ctx, at, kind, dtype, mats, denses, check, nbytes, baseline_ms,
            lambda v, m, c: dense_timing.time_variant(ctx, v, dtype, width, m, denses, c,
                                                      nbytes, None))
        results.append(result)
        ctx.advance(records.variant_line(result))
    case["results"] = results
    case["limit"] = _limit(ctx, kind, width, loaded, dtype)
    records.add_limit_fractions(case)  # first: the case's best summary copies of_limit
    records.add_speedups(case)
    return case


def _limit(ctx: Context, kind: str, width: int, loaded: Any, dtype: str) -> dict[str, Any]:
    """The limit model of this case (teaal_loops.matrix.limit_model) with this run's measured
    copy and L2 rates, its gathers counted on the device (the pattern is canonical CSR)."""
    indptr, indices, _values, shape, _stats = loaded
    pattern = SimpleNamespace(shape=shape, indptr=indptr, indices=indices)
    offset_bytes = int(indptr.itemsize)
    try:
        if kind == "spmm":
            lim = spmm_limits(pattern, width, dtype, copy_gbps=ctx.copy_gbps,
                              l2_gbps=ctx.l2_gbps, offset_bytes=offset_bytes, xp=ctx.cp)
        else:
            lim = sddmm_limits(pattern, width, dtype, copy_gbps=ctx.copy_gbps,
                               l2_gbps=ctx.l2_gbps, offset_bytes=offset_bytes)
    except ValueError as exc:  # unsorted rows: the gathers are not counted
        return {"error": str(exc)}
    return lim.as_dict()


def _count(shape: tuple[int, ...]) -> int:
    total = 1
    for n in shape:
        total *= int(n)
    return total


def _guarded(measure: Any) -> dict[str, Any]:
    try:
        out: dict[str, Any] = measure()
        return out
    except Exception as exc:  # a missing library or a refusal: the case goes on without it
        return {"error": sides.first_line(exc)}


def _best(ctx: Context, kind: str, width: int, mats: list[Any], denses: list[Any],
          out_shape: tuple[int, ...], check: sides.Check, nbytes: int) -> dict[str, Any]:
    cp, options = ctx.cp, ctx.options
    outs = [cp.zeros(out_shape, dtype=m.dtype) for m in mats]
    if kind == "spmm":
        bases = [baselines.make_spmm(m, width, d[0], o)
                 for m, d, o in zip(mats, denses, outs, strict=True)]
    else:
        bases = [baselines.make_sddmm(m, width, d[0], d[1], o)
                 for m, d, o in zip(mats, denses, outs, strict=True)]
    operands = [(*d, o) for d, o in zip(denses, outs, strict=True)]
    return baselines.best_cusparse(ctx.timer, bases, operands, check, reps=options.reps,
                                   warmup=options.warmup, nbytes=nbytes,
                                   copy_gbps=ctx.copy_gbps)


def _second(ctx: Context, kind: str, width: int, mats: list[Any], denses: list[Any],
            out_shape: tuple[int, ...], check: sides.Check, nbytes: int,
            best: dict[str, Any]) -> dict[str, Any]:
    """cupyx's ``A @ B`` for SpMM; for SDDMM PyTorch's, where the best is nvmath-python's and
    PyTorch runs here (``{}``: no second column)."""
    cp, options, k = ctx.cp, ctx.options, len(mats)
    common: dict[str, Any] = {"reps": options.reps, "warmup": options.warmup, "copies": k,
                              "nbytes": nbytes, "copy_gbps": ctx.copy_gbps}
    if kind == "spmm":
        return baselines.second_side(ctx.timer, lambda i: mats[i % k] @ denses[i % k][0],
                                     what=CUPYX_SPMM, **common)
    if best.get("library") == "torch" or baselines.libraries().get("torch") is not True:
        return {}
    outs = [cp.zeros(out_shape, dtype=m.dtype) for m in mats]
    bases = [baselines.make_torch_sddmm(m, width, d[0], d[1], o)
             for m, d, o in zip(mats, denses, outs, strict=True)]
    return baselines.second_side(
        ctx.timer, lambda i: bases[i % k].launch(*denses[i % k], outs[i % k]),
        what=TORCH_SDDMM, output=outs[0], check=check, **common)
