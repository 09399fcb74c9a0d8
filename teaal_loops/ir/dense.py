"""Where a spec's spacetime puts the dense rank (SpMM's ``N``, SDDMM's ``K``).

The sparse operand's tiles and atoms are mapped by the schedule definitions exactly as for
SpMV; the dense rank is read here, once, for every schedule, and taken out of the mapping the
definitions see:

* unsplit, in ``time``: every thread loops over the whole rank (the loops SpMM specs);
* unsplit, in ``space``: one thread per element of the rank within each worker;
* split by one ``uniform_shape(S)``: ``N1`` in time and ``N0`` in space (a worker's ``S``
  threads each loop over every ``S``-th element), or both in time.

Within one thread the dense rank's loop runs outside the loop over the sparse operand's atoms
whatever the spec's time order says: every output element is still summed over the same atoms
in the same order by the same thread, so values and owners are those the spec's order gives.
The dense rank's space part is numbered after the worker's ranks and before a group's lanes:
``thread = (worker * DS + n0) * G + lane``, which puts neighbouring elements of a dense row in
neighbouring threads (coalesced loads). A spec that orders the space ranks otherwise is
refused, as is a dense rank in space on the chunked schedules (their blocks stage a share of
atoms, not of threads) and a summed dense rank (SDDMM's K) in space.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from teaal_loops.ir.mapping import MappingContext
from teaal_loops.ir.model import DenseRank, GpuLevel, RankBinding


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
    if part is not None:
        fns = part.functions
        if len(fns) != 1 or fns[0].kind != "uniform_shape" or fns[0].size is None:
            raise ctx.refuse(
                f"the dense rank {name} is split by "
                f"{', '.join(f.text or f.kind for f in fns)}; it takes one "
                f"uniform_shape(S) ({name}1 in time, {name}0 in space or time)",
                key_path=ctx.key("partitioning", name),
            )
        split = fns[0].size
        if isinstance(split, str):
            roles[split] = "dense_tile"
        names = (f"{name}1", f"{name}0")
    space = [r for r in names if r in ctx.space]
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
    if split is not None and f"{name}1" in space:
        raise ctx.refuse(
            f"rank {name}1 is in space: only {name}0 (the element within a tile of {name}) "
            "may be, numbered after the worker",
            key_path=ctx.key("spacetime", "space"),
        )
    if space and reduce:
        raise ctx.refuse(
            f"rank {space[0]} is in space, but {name} is summed per nonzero of "
            f"{shape.matrix}: a reduction across threads is not generated; put {space[0]} "
            "in time",
            key_path=ctx.key("spacetime", "space"),
        )
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
    rank = DenseRank(
        name,
        space=space[0] if space else None,
        time=(f"{name}1" if split is not None else (name if time else None)),
        split=split,
        reduce=reduce,
    )
    rest = replace(
        ctx,
        parts={k: v for k, v in ctx.parts.items() if k != name},
        space=tuple(r for r in ctx.space if r not in names),
        time=tuple(r for r in ctx.time if r not in names),
    )
    return LoweredDense(rank, bindings, roles, rest)


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
    if owns_chunks:
        raise ctx.refuse(
            f"rank {name} (dense) is in space on a schedule that gives each thread a chunk of "
            f"nonzeros; put {name} in time",
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
