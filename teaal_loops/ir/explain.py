"""Human-readable and JSON descriptions of a schedule (``teaal-loops explain``)."""

from __future__ import annotations

from typing import Any

from teaal_loops.ir.bind import describe_sizes
from teaal_loops.ir.layouts import layout_semantics
from teaal_loops.ir.model import BoundSchedule, Combine, GpuLevel, Schedule, ScheduleKind
from teaal_loops.ir.simulate import SimResult

_COMBINE_TEXT = {
    Combine.STORE: "plain store: every row has one owning thread",
    Combine.GROUP_REDUCE: "the group's lanes reduce their partial sums, one lane stores the row",
    Combine.ATOMIC: (
        "output zeroed first; rows inside one chunk are stored, rows split across chunks get "
        "one atomicAdd per chunk"
    ),
}

_LEVEL_TEXT = {
    GpuLevel.WORKER: "space -> selects the {worker}",
    GpuLevel.LANE: "space -> lane within the group",
    GpuLevel.LOOP: "time  -> sequential loop",
}


def _worker_word(s: Schedule) -> str:
    return {
        ScheduleKind.THREAD_MAPPED: "thread",
        ScheduleKind.GROUP_MAPPED: "group",
        ScheduleKind.WORK_ORIENTED: "thread (one chunk of nonzeros each)",
        ScheduleKind.MERGE_PATH: "thread (one chunk of merge items each)",
    }[s.kind]


def schedule_json(s: Schedule) -> dict[str, Any]:
    return {
        "schedule": s.kind.value,
        "spec": s.spec_name,
        "einsum": s.einsum,
        "layout": s.layout,
        "tensors": {"output": s.output, "matrix": s.matrix, "vector": s.vector},
        "tile_rank": s.tile_rank,
        "atom_rank": s.atom_rank,
        "ranks": [
            {
                "name": r.name,
                "from": r.source,
                "binding": r.level.value,
                "extent": r.extent,
                "space_index": r.space_index,
                "time_index": r.time_index,
                "style": r.style,
            }
            for r in s.ranks
        ],
        "combine": s.combine.value,
        "parameters": {k: v for k, v in s.params.items()},
        "parameter_roles": dict(s.param_roles),
        "group_size": s.group_size,
        "work_per_thread": s.work_per_thread,
        "block_threads": s.block_threads,
    }


def bound_json(b: BoundSchedule) -> dict[str, Any]:
    return {
        "rows": b.matrix.rows,
        "cols": b.matrix.cols,
        "nnz": b.matrix.nnz,
        "sizes": describe_sizes(b),
        "launch": {"blocks": b.launch.blocks, "threads_per_block": b.launch.threads_per_block},
        "index_bits": b.index_bits,
    }


def explain_text(
    s: Schedule, bound: BoundSchedule | None = None, sim: SimResult | None = None
) -> str:
    lines = [
        f"spec:      {s.spec_name}",
        f"einsum:    {s.einsum}",
        f"schedule:  {s.kind.value}",
        f"layout:    {s.layout} (tiles = rank {s.tile_rank}, atoms = nonzeros along "
        f"{s.atom_rank} of {s.matrix})",
        "ranks (loop order):",
    ]
    width = max((len(r.name) for r in s.ranks), default=1)
    for r in s.ranks:
        what = _LEVEL_TEXT[r.level].format(worker=_worker_word(s))
        lines.append(f"  {r.name:<{width}}  {what:<45} extent {r.extent}")
    lines.append(f"combine:   {_COMBINE_TEXT[s.combine]}")
    if s.kind == ScheduleKind.GROUP_MAPPED:
        lines.append(f"group:     {s.group_size} lanes")
    params = ", ".join(
        f"{k}={'default' if v is None else v}" for k, v in sorted(s.params.items())
    )
    lines.append(f"params:    {params or 'none'}")
    if bound is not None:
        sizes = describe_sizes(bound)
        lines.append(
            f"matrix:    {bound.matrix.rows} x {bound.matrix.cols}, {bound.matrix.nnz} nonzeros"
            if s.layout == "csr"
            else f"bound to:  {bound.matrix.rows} tiles ({layout_semantics(s.layout).tiles}), "
            f"{bound.matrix.nnz} atoms of layout {s.layout}"
        )
        lines.append("bound:     " + ", ".join(f"{k}={v}" for k, v in sizes.items()))
        lines.append(
            f"launch:    {bound.launch.blocks} blocks x {bound.launch.threads_per_block} threads, "
            f"{bound.index_bits}-bit offsets"
        )
    if sim is not None:
        st = sim.stats
        lines.append(
            f"balance:   atoms per thread max {st.max_atoms} mean {st.mean_atoms:.3f} "
            f"(max/mean {st.imbalance:.2f}); {st.idle_threads} idle of {st.threads} threads; "
            f"{st.split_rows} split rows; {st.atomics} atomics"
        )
    return "\n".join(lines)
