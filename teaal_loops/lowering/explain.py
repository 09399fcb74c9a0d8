"""Human-readable and JSON descriptions of a schedule (``teaal-loops explain``)."""

from __future__ import annotations

from typing import Any

from teaal_loops.ir.model import BoundSchedule, GpuLevel, Schedule
from teaal_loops.layouts import get_layout
from teaal_loops.lowering.simulate import SimResult
from teaal_loops.schedules import describe_sizes, schedule_definition

_LEVEL_TEXT = {
    GpuLevel.WORKER: "space -> selects the {worker}",
    GpuLevel.LANE: "space -> lane within the group",
    GpuLevel.LOOP: "time  -> sequential loop",
}


def schedule_json(s: Schedule) -> dict[str, Any]:
    return {
        "schedule": s.kind,
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
        "parameters": dict(s.params.items()),
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
    definition = schedule_definition(s.kind)
    layout = get_layout(s.layout)
    lines = [
        f"spec:      {s.spec_name}",
        f"einsum:    {s.einsum}",
        f"schedule:  {s.kind}",
        f"layout:    {s.layout} (tiles = {layout.tiles} along rank {s.tile_rank}, atoms = "
        f"stored units along {s.atom_rank} of {s.matrix})",
        "ranks (loop order):",
    ]
    width = max((len(r.name) for r in s.ranks), default=1)
    for r in s.ranks:
        what = _LEVEL_TEXT[r.level].format(worker=definition.worker_word)
        lines.append(f"  {r.name:<{width}}  {what:<45} extent {r.extent}")
    combine = "every atom adds atomically to its output row, output zeroed first" if (
        layout.scatters
    ) else definition.combine_text
    lines.append(f"combine:   {combine}")
    lines.extend(definition.explain_lines(s))
    params = ", ".join(
        f"{k}={'default' if v is None else v}" for k, v in sorted(s.params.items())
    )
    lines.append(f"params:    {params or 'none'}")
    if bound is not None:
        lines.extend(_bound_lines(s, bound, layout.direct_csr, layout.tiles))
    if sim is not None:
        st = sim.stats
        lines.append(
            f"balance:   atoms per thread max {st.max_atoms} mean {st.mean_atoms:.3f} "
            f"(max/mean {st.imbalance:.2f}); {st.idle_threads} idle of {st.threads} threads; "
            f"{st.split_rows} split tiles; {st.atomics} atomics"
        )
    return "\n".join(lines)


def _bound_lines(s: Schedule, bound: BoundSchedule, csr: bool, tiles: str) -> list[str]:
    m = bound.matrix
    sizes = describe_sizes(bound)
    return [
        f"matrix:    {m.rows} x {m.cols}, {m.nnz} nonzeros"
        if csr
        else f"bound to:  {m.rows} tiles ({tiles}), {m.nnz} atoms of layout {s.layout}",
        "bound:     " + ", ".join(f"{k}={v}" for k, v in sizes.items()),
        f"launch:    {bound.launch.blocks} blocks x {bound.launch.threads_per_block} threads, "
        f"{bound.index_bits}-bit offsets",
    ]
