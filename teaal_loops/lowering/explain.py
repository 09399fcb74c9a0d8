"""Human-readable and JSON descriptions of a schedule (``teaal-loops explain``)."""

from __future__ import annotations

from typing import Any

from teaal_loops.ir.model import BoundSchedule, DenseRank, Form, GpuLevel, Schedule
from teaal_loops.layouts import get_layout
from teaal_loops.lowering.simulate import SimResult
from teaal_loops.schedules import describe_sizes, schedule_definition

_LEVEL_TEXT = {
    GpuLevel.WORKER: "space -> selects the {worker}",
    GpuLevel.DENSE: "space -> dense slot within the {worker}",
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
        "form": _form_json(s),
    }


def _form_json(s: Schedule) -> dict[str, Any]:
    f = s.form
    dense = f.dense
    return {
        "kind": f.kind,
        "text": f.text or s.einsum,
        "sparse": s.matrix,
        "transposed": f.transposed,
        "operands": list(f.operands),
        "dense_rank": None if dense is None else {
            "name": dense.name,
            "space": dense.space,
            "time": dense.time,
            "split": dense.split,
            "summed": dense.reduce,
            "contiguous": dense.contiguous,
        },
    }


def bound_json(b: BoundSchedule) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rows": b.matrix.rows,
        "cols": b.matrix.cols,
        "nnz": b.matrix.nnz,
        "sizes": describe_sizes(b),
        "launch": {"blocks": b.launch.blocks, "threads_per_block": b.launch.threads_per_block},
        "index_bits": b.index_bits,
    }
    dense = b.schedule.form.dense
    if dense is not None:
        out["dense"] = {
            "rank": dense.name,
            "size": b.dense_size,
            "space": b.dense_space,
            "time": b.dense_time,
        }
    return out


def explain_text(
    s: Schedule, bound: BoundSchedule | None = None, sim: SimResult | None = None
) -> str:
    definition = schedule_definition(s.kind)
    layout = get_layout(s.layout)
    lines = [
        f"spec:      {s.spec_name}",
        f"einsum:    {s.form.text or s.einsum}",
        f"form:      {_form_text(s)}",
        f"schedule:  {s.kind}",
        f"layout:    {s.layout} (tiles = {layout.tiles} along rank {s.tile_rank}, atoms = "
        f"stored units along {s.atom_rank} of {_held(s)})",
        "ranks (loop order):",
    ]
    width = max((len(r.name) for r in s.ranks), default=1)
    for r in s.ranks:
        what = _LEVEL_TEXT[r.level].format(worker=definition.worker_word)
        lines.append(f"  {r.name:<{width}}  {what:<45} extent {r.extent}")
    if s.form.dense is not None:
        lines.append(f"dense:     {_dense_text(s.form.dense)}")
    combine = definition.combine_text
    if layout.scatters:
        combine = "every atom adds atomically to its output row, output zeroed first"
    elif layout.adding_from is not None:
        combine = (
            f"{layout.tiles}: a row's own tile stores it, the tiles that share a row (and each "
            "piece of a tile split across workers) add into it atomically; the output is "
            "zeroed first"
        )
    elif layout.stacked:
        combine = (
            f"{layout.tiles} share output rows: every tile's sum, or each piece of a tile "
            "split across workers, is added atomically into its row; the output is zeroed "
            "first"
        )
    if s.form.kind == "sddmm" and s.form.dense is not None and s.form.dense.run is not None:
        d = s.form.dense
        lanes = f"{d.split}/{d.run}"
        combine = (
            f"the {lanes} threads of an atom's (worker, lane) each sum every {lanes}-th run "
            f"of {d.run} neighbouring {d.name}, add their sums by shuffles (p[k1] += "
            f"p[k1 + o], o = ({lanes})/2 .. 1) and thread {d.space} = 0 writes the atom's value"
        )
    elif s.form.kind == "sddmm" and s.form.dense is not None and s.form.dense.space:
        d = s.form.dense
        combine = (
            f"the {d.split} threads of an atom's (worker, lane) each sum every "
            f"{d.split}-th {d.name}, add their sums by shuffles (p[k0] += p[k0 + o], "
            f"o = {d.split}/2 .. 1) and thread {d.space} = 0 writes the atom's value"
        )
    elif s.form.kind == "sddmm":
        combine = f"each atom's value is written by its owner, which sums {_dense_name(s)}"
    lines.append(f"combine:   {combine}")
    if s.form.epilogue is not None:
        e = s.form.epilogue
        lines.append(
            f"epilogue:  {e.text}: after the product (into {e.output}, rounded to the dtype), "
            "a second, elementwise kernel, one thread per output element"
        )
    lines.extend(definition.explain_lines(s))
    params = ", ".join(
        f"{k}={'default' if v is None else v}" for k, v in sorted(s.params.items())
    )
    lines.append(f"params:    {params or 'none'}")
    if bound is not None:
        worker = definition.worker_word
        lines.extend(_bound_lines(s, bound, layout.direct_csr, layout.tiles, worker))
    if sim is not None:
        st = sim.stats
        unit = "atoms" if st.dense_size is None else f"(atom, {_dense_name(s)} index) pairs"
        lines.append(
            f"balance:   {unit} per thread max {st.max_atoms} mean {st.mean_atoms:.3f} "
            f"(max/mean {st.imbalance:.2f}); {st.idle_threads} idle of {st.threads} threads; "
            f"{st.split_rows} split tiles; {st.atomics} atomics"
        )
    return "\n".join(lines)


def _dense_name(s: Schedule) -> str:
    return s.form.dense.name if s.form.dense is not None else ""


def _held(s: Schedule) -> str:
    return f"{s.matrix}^T" if s.form.transposed else s.matrix


def _form_text(s: Schedule) -> str:
    """Which member of the family, which operand is sparse, and whether it is transposed."""
    f: Form = s.form
    operands = ", ".join(f.operands) or s.vector
    text = f"{f.kind}; sparse operand {s.matrix}"
    if f.kind == "sddmm":
        text += " (the sampler: its nonzeros are the atoms)"
    if f.transposed:
        row = f.output_ranks[0] if f.output_ranks else s.tile_rank
        col = s.atom_rank if s.tile_rank == row else s.tile_rank
        text += (
            f", transposed: declared [{col}, {row}], the layout holds {s.matrix}^T "
            f"([{row}, {col}])"
        )
    else:
        text += ", not transposed"
    return text + f"; dense operand{'s' if len(f.operands) > 1 else ''} {operands}"


def _dense_text(d: DenseRank) -> str:
    """Where the spacetime puts the dense rank (DS threads a worker, DT steps a thread)."""
    role = "summed per atom" if d.reduce else "kept by the output"
    if d.run is not None:
        lanes = f"{d.split}/{d.run}"
        return (
            f"{d.name} ({role}), split by uniform_shape({d.split}), uniform_shape({d.run}): "
            f"{d.space} in space (DS = {lanes} threads for each worker), {d.time} and "
            f"{d.name}0 in time (runs of {d.run} neighbouring {d.name}, read with vector loads "
            f"where the factors allow); thread = (worker * DS + ({d.name.lower()} div "
            f"{d.run}) mod DS) * G + lane"
        )
    if d.split is None and d.space:
        where = (
            f"{d.space} in space: one thread per index of {d.name} for each worker "
            f"(DS = {d.name}, DT = 1)"
        )
    elif d.split is None:
        where = f"in time: every thread loops over all of {d.name} (DS = 1, DT = {d.name})"
    elif d.contiguous:
        where = (
            f"split by uniform_shape({d.split}): {d.space} in space (DS = ceil({d.name}/"
            f"{d.split}) threads for each worker), {d.time} in time (DT = {d.split} neighbouring "
            f"indices a thread, read with vector loads where {d.name}'s rows allow)"
        )
        return (
            f"{d.name} ({role}), {where}; thread = (worker * DS + {d.name.lower()} div DT) * G "
            "+ lane"
        )
    elif d.space:
        where = (
            f"split by uniform_shape({d.split}): {d.space} in space (DS = {d.split} threads for "
            f"each worker), {d.time} in time (DT = ceil({d.name}/{d.split}) steps a thread)"
        )
    else:
        where = f"split by uniform_shape({d.split}), all in time (DS = 1, DT = {d.name})"
    return (
        f"{d.name} ({role}), {where}; thread = (worker * DS + {d.name.lower()} mod DS) * G "
        "+ lane"
    )


def _bound_lines(
    s: Schedule, bound: BoundSchedule, csr: bool, tiles: str, worker: str
) -> list[str]:
    m = bound.matrix
    sizes = describe_sizes(bound)
    lines = [
        f"matrix:    {m.rows} x {m.cols}, {m.nnz} nonzeros"
        if csr
        else f"bound to:  {m.rows} tiles ({tiles}), {m.nnz} atoms of layout {s.layout}",
        "bound:     " + ", ".join(f"{k}={v}" for k, v in sizes.items()),
    ]
    if s.form.dense is not None:
        lines.append(
            f"dense:     {s.form.dense.name} = {bound.dense_size}: DS = {bound.dense_space} "
            f"thread(s) for each worker ({worker}), DT = {bound.dense_time} steps a thread, "
            f"{bound.threads} threads in all"
        )
    lines.append(
        f"launch:    {bound.launch.blocks} blocks x {bound.launch.threads_per_block} threads, "
        f"{bound.index_bits}-bit offsets"
    )
    return lines
