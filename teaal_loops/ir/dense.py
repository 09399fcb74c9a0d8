"""Where a spec's spacetime puts the dense rank (SpMM's ``N``, SDDMM's ``K``).

The sparse operand's tiles and atoms are mapped by the schedule definitions exactly as for
SpMV; the dense rank is read here, once, for every schedule, and taken out of the mapping the
definitions see:

* unsplit, in ``time``: every thread loops over the whole rank (the loops SpMM specs);
* unsplit, in ``space``: one thread per element of the rank within each worker;
* split by one ``uniform_shape(S)``: ``N1`` in time and ``N0`` in space (a worker's ``S``
  threads each loop over every ``S``-th element: ``n = step * DS + slot``), or both in time;
* split, ``N1`` in space and ``N0`` in time (*contiguous*): a worker's ``ceil(D / S)``
  threads each loop over ``S`` neighbouring elements, ``n = slot * S + step``. Where the ``S``
  elements of a row of ``B`` are 16 or 32 bytes and aligned, the register-blocked kernels
  read them with one or two vector loads (the runtime's build, ``TEAAL_DENSE_VECTOR``): at
  ``N = 32`` in float32, 8 threads a worker each load a ``float4``, four workers share a warp
  (specs/spmm/nonzero_split_vec.yaml says what that measured).

SDDMM's summed rank ``K`` goes in space only split, ``K: [uniform_shape(S)]`` with ``K0`` in
space and ``K1`` in time, ``S`` a power of two of at most 32 compiled into the kernel
(:func:`reduce_lanes`): the ``S`` threads of one (worker, atom) each sum every ``S``-th ``k``
(``k = k1 * S + k0``, so one warp-wide load reads ``S`` neighbouring elements of the atom's row
of ``A`` and column of ``B``), then add their partial sums with shuffles in a fixed tree and
the segment's ``k0 = 0`` thread stores the atom's value (one writer: combine stays STORE).
Or ``K`` is split twice, ``K: [uniform_shape(S * R), uniform_shape(R)]`` with ``K1`` in space
and ``K2``, ``K0`` in time (``S * R`` and ``R`` compiled in): thread ``k1`` of the ``S`` sums
the runs ``k = (k2 * S + k1) * R + k0`` in ``(k2, k0)`` order, ``R`` neighbouring elements a
run, which it reads with 16-byte loads where a run is 16 bytes or a multiple (float32
``R = 4``: one ``float4`` of ``A``'s row and one of ``B``'s column a run), then the same tree.

Within one thread the dense rank's loop runs outside the loop over the sparse operand's atoms
whatever the spec's time order says: every output element is still summed over the same atoms
in the same order by the same thread, so values and owners are those the spec's order gives.
Thread-mapped, group-mapped and work-oriented SpMM walk a thread's atoms once per block of up
to T of its dense steps (register blocking, T = ``TEAAL_DENSE_BLOCK`` = 4 in the kernel
source): T accumulators, each atom's value and column loaded once, the same atoms in the same
order for every element, so the rule above holds block by block; merge-path SpMM walks them
once per step. docs/design.md describes the blocked loop.
The dense rank's space part is numbered after the worker's ranks and before a group's lanes:
``thread = (worker * DS + slot) * G + lane`` with ``slot = n mod DS`` (``N0`` in space) or
``n div S`` (contiguous), which puts neighbouring elements of a dense row (or runs of them) in
neighbouring threads (coalesced loads); :func:`dense_slots` computes the slot. A spec that
orders the space ranks otherwise is refused, as are a dense rank in space on merge-path (its
blocks cut the merge of row ends and nonzeros into one share per thread and reduce rows across
the block's threads) and a summed dense rank (SDDMM's K) in space unsplit (its size, which
the shuffle tree's width would be, is known only at launch). Work-oriented SDDMM takes K's
threads as the row schedules do: chunk ``c`` is worker ``c``, whose ``S`` threads walk it
together, each atom's dot product summed by all ``S``. Work-oriented SpMM takes ``N`` or
``N0`` in space (nonzero splitting, as cuSPARSE's CSR_ALG2 and GE-SpMM do): chunk ``c`` of
``W`` nonzeros is worker ``c``, whose ``DS`` threads walk it once per block of the columns
they own; its block finds its workers as
``thread / DS`` and stages their rows behind barriers that every thread reaches before the
loop over the dense rank.

The reduction order of a summed rank in space, which the kernel's values follow: thread
``k0`` sums ``p[k0] = sum over k1 of A[m, k1 * S + k0] * B[k1 * S + k0, n]`` in ``k1`` order
(split twice: ``p[k1]`` over ``k = (k2 * S + k1) * R + k0`` in ``(k2, k0)`` order);
then for ``o = S/2, S/4, ..., 1`` every ``k0 < o`` adds ``p[k0] += p[k0 + o]``. For ``S = 4``:
``(p0 + p2) + (p1 + p3)``. :func:`lane_tree_sum` computes it on the host. nvcc may fuse each
product into the running sum (one rounding instead of two); the order of the terms is the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from teaal_loops.errors import ParameterError
from teaal_loops.ir.mapping import MappingContext
from teaal_loops.ir.model import DenseRank, GpuLevel, RankBinding, Schedule

WARP_SIZE = 32
MAX_REDUCE_LANES = 32  # a summed rank's threads reduce by warp shuffles: at most a warp


@dataclass(frozen=True)
class LoweredDense:
    rank: DenseRank
    bindings: tuple[RankBinding, ...]
    roles: dict[str, str]
    context: MappingContext  # the mapping without the dense rank's final ranks


def lower_dense(ctx: MappingContext) -> LoweredDense | None:
    """The dense rank's placement, or None for SpMV (module docstring)."""
    shape = ctx.shape
    name = shape.dense_rank
    if name is None:
        return None
    reduce = shape.kind == "sddmm"
    part = ctx.parts.get(name)
    split: int | str | None = None
    roles: dict[str, str] = {}
    names: tuple[str, ...] = (name,)
    run: int | str | None = None
    if part is not None:
        fns = part.functions
        shapes = all(f.kind == "uniform_shape" and f.size is not None for f in fns)
        if not shapes or len(fns) > (2 if reduce else 1):
            runs = (f"; or, summed, two: {name}: [uniform_shape(S * R), uniform_shape(R)] "
                    f"({name}1 in space, {name}2 and {name}0 in time)") if reduce else ""
            raise ctx.refuse(
                f"the dense rank {name} is split by "
                f"{', '.join(f.text or f.kind for f in fns)}; it takes one "
                f"uniform_shape(S) ({name}1 in time, {name}0 in space or time){runs}",
                key_path=ctx.key("partitioning", name),
            )
        split = fns[0].size
        names = (f"{name}1", f"{name}0")
        if len(fns) == 2:
            run = fns[1].size
            names = (f"{name}2", f"{name}1", f"{name}0")
    space = [r for r in names if r in ctx.space]
    if isinstance(split, str):
        roles[split] = "dense_lanes" if reduce and space else "dense_tile"
    if isinstance(run, str):
        roles[run] = "dense_run"
    if run is not None:
        return _lower_runs(ctx, name, split, run, names, roles)
    time = [r for r in names if r in ctx.time]
    final = set(ctx.spec.final_ranks.get(ctx.output, ()))
    if reduce and shape.intermediate is not None and name not in final and not space:
        # TeAAL's two-einsum SDDMM: K belongs to the fused product T1, not to Z's mapping;
        # it is summed per atom, in time.
        return LoweredDense(
            DenseRank(name, time=name, reduce=True),
            (RankBinding(name, name, GpuLevel.LOOP, "K", style="pos"),),
            roles, ctx,
        )
    missing = [r for r in names if r not in space and r not in time]
    if missing:
        raise ctx.refuse(
            f"rank {missing[0]} (the dense rank {name}) is in neither space nor time",
            key_path=ctx.key("spacetime"),
        )
    contiguous = split is not None and f"{name}1" in space
    if contiguous and (reduce or f"{name}0" in space):
        raise ctx.refuse(
            f"rank {name}1 is in space with {name}0 in space too or {name} summed per "
            f"nonzero: either {name}0 is in space ({name}1 in time: each thread handles every "
            f"S-th element), or {name}1 is in space and {name}0 in time (each thread handles "
            f"S neighbouring elements of {name}, not summed)",
            key_path=ctx.key("spacetime", "space"),
        )
    if space and reduce:
        _check_reduce_split(ctx, name, split)
    bindings = tuple(
        RankBinding(
            r, name,
            GpuLevel.DENSE if r in space else GpuLevel.LOOP,
            _extent(r, name, split),
            space_index=ctx.space.index(r) if r in space else None,
            time_index=ctx.time.index(r) if r in time else None,
            style=ctx.styles.get(r, "pos"),
        )
        for r in names
    )
    if contiguous:
        time_rank: str | None = f"{name}0"
    else:
        time_rank = f"{name}1" if split is not None else (name if time else None)
    rank = DenseRank(
        name,
        space=space[0] if space else None,
        time=time_rank,
        split=split,
        reduce=reduce,
        contiguous=contiguous,
    )
    return LoweredDense(rank, bindings, roles, _without(ctx, name, names))


def _without(ctx: MappingContext, name: str, names: tuple[str, ...]) -> MappingContext:
    """The mapping the schedule definitions lower: ``ctx`` without the dense rank's split and
    its final ranks ``names``."""
    return replace(
        ctx,
        parts={k: v for k, v in ctx.parts.items() if k != name},
        space=tuple(r for r in ctx.space if r not in names),
        time=tuple(r for r in ctx.time if r not in names),
    )


def _lower_runs(ctx: MappingContext, name: str, split: int | str | None, run: int | str,
                names: tuple[str, ...], roles: dict[str, str]) -> LoweredDense:
    """SDDMM's ``K: [uniform_shape(S * R), uniform_shape(R)]``: ``K1`` in space, ``K2`` and
    ``K0`` in time (module docstring). ``S = split / run`` threads sum an atom; literal sizes
    are checked here, parameters when the kernel is configured (:func:`reduce_lanes`)."""
    upper, lanes_rank, inner = names
    where = [r for r in names if r not in ctx.space and r not in ctx.time]
    if where or lanes_rank not in ctx.space or upper in ctx.space or inner in ctx.space:
        raise ctx.refuse(
            f"{name}: [uniform_shape(S * R), uniform_shape(R)] sums {name} by S threads an "
            f"atom, each over runs of R neighbouring {name}: put {lanes_rank} in space and "
            f"{upper} and {inner} in time",
            key_path=ctx.key("spacetime"),
        )
    if isinstance(split, int) and isinstance(run, int):
        _check_runs(ctx, name, split, run)
    bindings = tuple(
        RankBinding(
            r, name,
            GpuLevel.DENSE if r == lanes_rank else GpuLevel.LOOP,
            f"ceil({name}/{split})" if r == upper else (
                f"{split}/{run}" if r == lanes_rank else str(run)),
            space_index=ctx.space.index(r) if r == lanes_rank else None,
            time_index=ctx.time.index(r) if r != lanes_rank else None,
            style=ctx.styles.get(r, "pos"),
        )
        for r in names
    )
    rank = DenseRank(name, space=lanes_rank, time=upper, split=split, reduce=True, run=run)
    return LoweredDense(rank, bindings, roles, _without(ctx, name, names))


def _check_runs(ctx: MappingContext | None, name: str, step: int, run: int) -> int:
    """``S = step / run``, the threads that sum an atom's runs: ``run`` must divide ``step``
    and ``S`` be a power of two <= 32. ``ctx`` None: a parameter's value (ParameterError)."""
    lanes = step // run if run > 0 and step % run == 0 else 0
    if not _lanes_ok(lanes):
        message = (f"{name}: [uniform_shape({step}), uniform_shape({run})]: the threads that "
                   f"sum {name}, {step} / {run}, must be a whole power of two <= "
                   f"{MAX_REDUCE_LANES} (they reduce with warp shuffles)")
        if ctx is None:
            raise ParameterError(message)
        raise ctx.refuse(message, key_path=ctx.key("partitioning", name))
    return lanes


def run_length(schedule: Schedule) -> int:
    """``R``: the neighbouring ``k`` each summing thread takes in a row (1 unless SDDMM's
    ``K`` is split twice), as compiled."""
    dense = schedule.form.dense
    if dense is None or dense.run is None:
        return 1
    value = schedule.param_value(dense.run)
    if value is None or value < 1:
        raise ParameterError(f"{dense.run} = {value}: the run of neighbouring "
                             f"{dense.name} must be a positive size bound when lowering")
    return int(value)


def _check_reduce_split(ctx: MappingContext, name: str, split: int | str | None) -> None:
    """A summed rank in space: split, ``S`` a power of two of at most 32 (module docstring)."""
    shape = ctx.shape
    if split is None:
        raise ctx.refuse(
            f"rank {name} is in space, but {name} is summed per nonzero of {shape.matrix}: "
            f"split it, {name}: [uniform_shape(S)] with {name}0 in space and {name}1 in time "
            f"(S a power of two <= {MAX_REDUCE_LANES}: the threads of {name}0 add their "
            f"partial sums with warp shuffles), or put {name} in time",
            key_path=ctx.key("spacetime", "space"),
        )
    if isinstance(split, int) and not _lanes_ok(split):
        raise ctx.refuse(
            f"{name}: [uniform_shape({split})] with {name}0 in space: the {split} threads that "
            f"sum {name} reduce with warp shuffles, so the size must be a power of two <= "
            f"{MAX_REDUCE_LANES}",
            key_path=ctx.key("partitioning", name),
        )


def _lanes_ok(lanes: int) -> bool:
    return 1 <= lanes <= MAX_REDUCE_LANES and lanes & (lanes - 1) == 0


def default_reduce_lanes(group: int) -> int:
    """``S`` when its parameter is unbound: the warp's threads left by a group of ``group``
    lanes (32 for thread-mapped, ``32 / G`` for group-mapped; 1 for block groups)."""
    return max(1, WARP_SIZE // group)


def reduce_lanes(
    schedule: Schedule, group: int, values: Mapping[str, int | None] | None = None
) -> int:
    """``S``, the threads that sum one atom's ``K`` (1 unless ``K0`` of SDDMM is in space),
    as the kernel compiles it: the literal or the parameter's value bound when lowering, else
    :func:`default_reduce_lanes`. ``values`` (a binding's parameters) must agree with it, since
    the kernel's shuffle tree is fixed at compile time. Refused, naming ``S``: not a power of
    two <= 32, or ``S * G`` past a warp (the segment of a group-mapped worker)."""
    dense = schedule.form.dense
    if dense is None or not dense.reduce or dense.space is None or dense.split is None:
        return 1
    key = f"mapping.partitioning.{schedule.output}.{dense.name}"
    split = dense.split
    compiled = schedule.param_value(split)
    if dense.run is not None:  # S = step / run, both compiled
        if compiled is None:
            raise ParameterError(f"{split}: the step of {dense.name}'s runs must be bound "
                                 "when the spec is lowered", key_path=key)
        lanes = _check_runs(None, dense.name, int(compiled), run_length(schedule))
        threads = f"{split} / {dense.run}"
    else:
        compiled = lanes = default_reduce_lanes(group) if compiled is None else compiled
        threads = str(split)
    given = values.get(split) if values is not None and isinstance(split, str) else None
    if given is not None and given != compiled:
        raise ParameterError(
            f"{split} = {given}: the threads that sum {dense.name} are compiled into the "
            f"kernel as {compiled}; bind {split} when the spec is lowered (--param, "
            f"x-teaal-loops.params or compile(params=...))",
            key_path=key,
        )
    if not _lanes_ok(lanes):
        raise ParameterError(
            f"{split} = {lanes}: the threads that sum {dense.name} reduce with warp shuffles; "
            f"it must be a power of two <= {MAX_REDUCE_LANES}",
            key_path=key,
        )
    if lanes > 1 and lanes * group > WARP_SIZE:
        raise ParameterError(
            f"{threads} = {lanes} threads over {dense.name} x {group} lanes a group = "
            f"{lanes * group} threads a worker: they reduce with warp shuffles, so the product "
            f"must be at most {WARP_SIZE}; bind a smaller {split} or group size",
            key_path=key,
        )
    return lanes


def lane_tree_sum(partials: Any) -> Any:
    """The kernel's reduction of a summed rank's ``S`` partial sums (last axis, ``S`` a power
    of two), in its order and in the partials' dtype: ``p[j] += p[j + o]`` for
    ``o = S/2, ..., 1`` (module docstring)."""
    p = np.array(partials, copy=True)
    width = p.shape[-1]
    offset = width // 2
    while offset:
        p[..., :offset] = p[..., :offset] + p[..., offset:2 * offset]
        offset //= 2
    return p[..., 0]


def dense_slots(n: Any, dense_space: int, dense_time: int, contiguous: bool,
                run: int = 1) -> Any:
    """The slot (thread of a worker along the dense rank) of dense index ``n`` (an int or a
    NumPy array): ``n mod DS`` where ``N0`` is in space, ``n div DT`` where the placement is
    contiguous, ``(n div R) mod DS`` where SDDMM's ``K`` is split twice into runs of ``R``
    (module docstring)."""
    return n // dense_time if contiguous else (n // run) % dense_space


def _extent(rank: str, name: str, split: int | str | None) -> str:
    if split is None:
        return name
    return f"ceil({name}/{split})" if rank.endswith("1") else str(split)


def check_dense_position(
    ctx: MappingContext, dense: LoweredDense | None, ranks: tuple[RankBinding, ...],
    owns_chunks: bool,
) -> None:
    """The dense space rank is numbered after the worker's ranks and before the lanes."""
    if dense is None or dense.rank.space is None:
        return
    space = list(ctx.space)
    name = dense.rank.space
    if owns_chunks and _merge_path(ctx):
        raise ctx.refuse(
            f"rank {name} (dense) is in space on merge-path, whose blocks cut the merge of "
            f"row ends and nonzeros into one share per thread and reduce rows across the "
            f"block's threads; put {name} in time, or split the nonzeros work-oriented "
            f"((M, K): [flatten()], MK: [uniform_occupancy({ctx.matrix}.W)]), which takes "
            f"{name} in space (specs/spmm/nonzero_split.yaml)",
            key_path=ctx.key("spacetime", "space"),
        )
    workers = [r.name for r in ranks if r.level is GpuLevel.WORKER]
    lanes = [r.name for r in ranks if r.level is GpuLevel.LANE]
    expected = [r for r in space if r in workers] + [name] + [r for r in space if r in lanes]
    if space != expected:
        raise ctx.refuse(
            f"space is [{', '.join(space)}]: the dense rank {name} must come after the "
            f"worker's ranks and before the lanes ([{', '.join(expected)}]), so that "
            "neighbouring threads read neighbouring elements of a dense row",
            key_path=ctx.key("spacetime", "space"),
        )


def _merge_path(ctx: MappingContext) -> bool:
    """True when the flattened rank is split by ``x_merge_path`` (merge-path's chunks)."""
    return any(
        fn.kind == "x_merge_path"
        for flat in ctx.flat_parts
        for fn in (ctx.parts[flat.name].functions if flat.name in ctx.parts else ())
    )
