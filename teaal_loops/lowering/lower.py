"""Lower a parsed spec to the schedule IR (:func:`lower`).

1. :func:`~teaal_loops.ir.einsum.recognise_einsum` names the roles of the einsum's tensors and
   ranks.
2. The layout is chosen (argument > ``x-teaal-loops.layout`` > the ``format`` section > the
   matrix's rank order: CSR for ``[M, K]``, CSC for ``[K, M]``) and the ranks oriented to it
   (tiles along M and atoms along K, or the reverse for a column-major layout).
3. The registered schedule definitions are asked, in order, which one the mapping is; that one
   lowers it, refusing (with the key path of the offending value) anything it cannot honour.

Everything else is refused with an :class:`UnsupportedMappingError` that names the rank and
lists what is supported: the generator never emits code whose ownership differs from the spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from teaal_loops.errors import LayoutError, ParameterError, UnsupportedMappingError
from teaal_loops.ir.dense import LoweredDense, check_dense_position, lower_dense
from teaal_loops.ir.einsum import EinsumShape, recognise_einsum
from teaal_loops.ir.mapping import MappingContext, mapping_context, unsupported
from teaal_loops.ir.model import Combine, Form, RankBinding, ScalarEpilogue, Schedule
from teaal_loops.ir.params import bind_params
from teaal_loops.layouts import (
    canonical_layout,
    get_layout,
    layout_for_rank_order,
    layout_from_format,
)
from teaal_loops.schedules import definitions, schedule_kinds
from teaal_loops.spec.model import Spec

DEFAULT_BLOCK_THREADS = 128


def lower(
    spec: Spec,
    *,
    params: Mapping[str, int] | None = None,
    layout: str | None = None,
    block_threads: int | None = None,
) -> Schedule:
    """Lower ``spec`` to a :class:`Schedule`; ``params`` binds size parameters by name."""
    shape = recognise_einsum(spec)
    epilogue = _epilogue(spec, shape)
    ctx = _context(spec, shape, layout)
    ext = spec.extensions
    threads = block_threads or (ext.block_threads if ext and ext.block_threads else None)
    threads = threads or DEFAULT_BLOCK_THREADS
    if threads <= 0 or threads > 1024 or threads % 32:
        raise ParameterError(
            f"block_threads must be a multiple of 32 in [32, 1024], got {threads}",
            key_path=None if block_threads else "x-teaal-loops.block_threads",
        )
    try:
        _refuse_stray_partitions(ctx)
        dense = lower_dense(ctx)
        sparse_ctx = dense.context if dense else ctx
        definition = next((d for d in definitions() if d.claims(sparse_ctx)), None)
        if definition is None:
            raise ctx.refuse("the mapping matches no schedule", key_path=ctx.key("partitioning"))
        lowered = definition.lower(sparse_ctx)
        check_dense_position(ctx, dense, lowered.ranks, definition.owns_chunks)
    except UnsupportedMappingError as err:
        raise _with_supported(err) from None
    kind = definition.kind
    if ext and ext.schedule and ext.schedule not in ("auto", *schedule_kinds()):
        raise unsupported(
            spec,
            f"x-teaal-loops.schedule: unknown schedule {ext.schedule!r} (auto or one of "
            f"{', '.join(schedule_kinds())})",
            key_path="x-teaal-loops.schedule",
        )
    if ext and ext.schedule and ext.schedule not in ("auto", kind):
        raise unsupported(
            spec,
            f"x-teaal-loops.schedule says {ext.schedule}, but the mapping is {kind}",
            key_path="x-teaal-loops.schedule",
        )
    _check_layout(ctx, kind, shape.kind)
    order = {name: i for i, name in enumerate(spec.loop_order_of(ctx.output))}
    ranks = _indexed(ctx, (*lowered.ranks, *(dense.bindings if dense else ())))
    ordered = tuple(sorted(ranks, key=lambda r: order.get(r.name, len(order))))
    missing = set(spec.final_ranks[ctx.output]) - {r.name for r in ordered}
    if missing:  # a final rank the mapping above did not bind
        raise ctx.refuse(
            f"ranks {sorted(missing)} have no GPU binding", key_path=ctx.key("spacetime")
        )
    roles = {**lowered.roles, **(dense.roles if dense else {})}
    bound = bind_params(spec, roles, params or {}, ext.params if ext else {})
    return Schedule(
        kind=kind,
        spec_name=spec.name,
        einsum=ctx.shape.einsum.text,
        output=epilogue.output if epilogue else ctx.output,
        matrix=ctx.matrix,
        vector=ctx.shape.vector,
        tile_rank=ctx.tile_rank,
        atom_rank=ctx.atom_rank,
        layout=ctx.layout,
        ranks=ordered,
        # SDDMM writes one value per atom: each output has one owner whatever the schedule
        combine=Combine.STORE if shape.kind == "sddmm" else lowered.combine,
        params=bound,
        param_roles=roles,
        tiling=lowered.tiling,
        group_size=lowered.group_size,
        work_per_thread=lowered.work_per_thread,
        block_threads=threads,
        form=_form(shape, dense, epilogue),
    )


def _indexed(ctx: MappingContext, ranks: tuple[RankBinding, ...]) -> tuple[RankBinding, ...]:
    """Every rank's position in the spec's whole space and time lists (the definitions lowered
    a mapping without the dense rank, so their positions skip it)."""
    return tuple(
        replace(
            r,
            space_index=ctx.space.index(r.name) if r.name in ctx.space else None,
            time_index=ctx.time.index(r.name) if r.name in ctx.time else None,
        )
        for r in ranks
    )


def _form(
    shape: EinsumShape, dense: LoweredDense | None, epilogue: ScalarEpilogue | None
) -> Form:
    return Form(
        kind=shape.kind,
        transposed=shape.transposed,
        operands=tuple(d.name for d in shape.dense),
        operand_ranks=tuple(d.ranks for d in shape.dense),
        operand_storage=tuple(d.storage for d in shape.dense),
        output_ranks=tuple(
            r for r in (shape.row_rank, shape.dense_rank if shape.kind == "spmm" else None,
                        shape.col_rank if shape.kind == "sddmm" else None) if r
        ),
        output_storage=shape.output_storage,
        dense=dense.rank if dense else None,
        text=shape.text,
        epilogue=epilogue,
    )


def _check_layout(ctx: MappingContext, kind: str, form: str) -> None:
    """The layout serves this schedule and this form (SDDMM writes one value per atom, so it
    needs a layout whose atoms are exactly the nonzeros, each in its row)."""
    layout_def = get_layout(ctx.layout)
    if kind not in layout_def.schedules:
        raise LayoutError(
            f"layout {ctx.layout} ({layout_def.tiles}) supports "
            f"{', '.join(sorted(layout_def.schedules))}; the spec's mapping is {kind}",
            key_path=ctx.layout_key,
        )
    if form not in layout_def.forms:
        raise LayoutError(
            f"layout {ctx.layout} ({layout_def.tiles}) serves {', '.join(layout_def.forms)}, "
            f"not {form}; use csr" + (" or coo" if form == "sddmm" else ""),
            key_path=ctx.layout_key,
        )


# Keywords of the kernel's call (kernel(A, B, C, out=..., a=..., b=...)) that a scalar
# bound by name there must not shadow.
RESERVED_SCALARS = ("out", "owner", "scalars")


def _epilogue(spec: Spec, shape: EinsumShape) -> ScalarEpilogue | None:
    """The scalar epilogue ``Z = alpha * T1 + beta * C`` as the IR carries it, or None.

    ``Z`` is elementwise in the product: each element is updated once by one thread of a
    second kernel, whatever ``Z``'s mapping says, so its mapping cannot change a value. A
    partitioning of ``Z`` (ranks the epilogue kernel would not honour) is refused, as is a
    scalar named like a keyword of the kernel's call."""
    epi = shape.epilogue
    if epi is None:
        return None
    where = "einsum.expressions"
    if spec.partitioning_of(epi.output):
        raise unsupported(
            spec,
            f"{epi.output} is partitioned, but its einsum {epi.text} is elementwise and runs "
            f"one thread per element after the product: partition the product "
            f"{shape.einsum.text} ({shape.output}) instead",
            key_path=f"mapping.partitioning.{epi.output}",
        )
    for name in (epi.alpha, epi.beta):
        if name in RESERVED_SCALARS:
            raise unsupported(
                spec, f"scalar {name} of {epi.text} is bound by name when the kernel is "
                f"called, where {', '.join(RESERVED_SCALARS)} are taken: rename it",
                key_path=where,
            )
    # The addend is indexed like Z, so the parser has given it Z's ranks (indices follow the
    # declaration order): it is neither the sparse operand nor the product's dense one.
    addend = epi.addend
    return ScalarEpilogue(
        output=epi.output,
        alpha=epi.alpha,
        beta=epi.beta,
        addend=addend.name if addend else None,
        addend_ranks=addend.ranks if addend else (),
        addend_storage=addend.storage if addend else (),
        text=epi.text,
    )


def _with_supported(err: UnsupportedMappingError) -> UnsupportedMappingError:
    """The refusal, followed by the mappings the registered schedules recognise."""
    supported = "; ".join(d.mapping_text for d in definitions())
    return UnsupportedMappingError(
        f"{err.detail}; supported mappings: {supported}",
        location=err.location,
        key_path=err.key_path,
        expected=err.expected,
    )


def _context(spec: Spec, shape: EinsumShape, layout: str | None) -> MappingContext:
    """Choose the layout and orient the ranks to it (module docstring). A layout the spec
    names (``x-teaal-loops.layout``, ``format``) is refused at the value that names it."""
    chosen, key_path = _chosen_layout(spec, shape, layout)
    try:
        definition = get_layout(chosen)
        chosen = canonical_layout(chosen)  # "BCSR:4" -> "bcsr:4x4"; a bad option fails here
    except LayoutError as err:
        raise LayoutError(err.message, location=err.location, key_path=key_path) from None
    _check_orientation(spec, shape, definition.scatters, chosen, key_path)
    if definition.scatters:
        ctx = mapping_context(spec, shape, chosen, shape.col_rank, shape.row_rank, True)
    else:
        ctx = mapping_context(spec, shape, chosen, shape.row_rank, shape.col_rank, False)
    return replace(ctx, layout_key=key_path)


def _check_orientation(
    spec: Spec, shape: EinsumShape, scatters: bool, layout: str, key_path: str | None
) -> None:
    """A mapping is written for the tiles of its matrix's rank order: rows for ``[M, K]``,
    columns for ``[K, M]``. A layout whose tiles run the other way (``--layout csc`` on a spec
    that partitions rows) would give the spec's splits to the wrong rank: refuse, and say
    which spec to use."""
    order = shape.matrix_rank_order
    # column-major: the contracted rank first ([K, M], or a split [K1, M1, K0, M0])
    row_major = order[:1] not in ((shape.col_rank,), (f"{shape.col_rank}1",))
    if scatters == row_major and spec.partitioning_of(shape.output):
        tiles = "columns" if scatters else "rows"
        wanted = (shape.col_rank, shape.row_rank) if scatters else (shape.row_rank, shape.col_rank)
        raise unsupported(
            spec,
            f"layout {layout} tiles the matrix's {tiles}, but this spec's mapping is written for "
            f"rank order [{', '.join(order)}] ({'rows' if row_major else 'columns'}); use a "
            f"spec whose rank-order of {shape.matrix} is [{', '.join(wanted)}] and partitions "
            f"{wanted[0]} (the spec library has one per layout and schedule: specs/, "
            "specs/layouts/)",
            key_path=key_path or f"mapping.rank-order.{shape.matrix}",
        )


def _chosen_layout(
    spec: Spec, shape: EinsumShape, layout: str | None
) -> tuple[str, str | None]:
    """(layout, key path of the spec value that chose it; None for an argument): the
    argument, else ``x-teaal-loops.layout``, else the format section, else the rank order."""
    if layout:
        return layout, None
    ext = spec.extensions
    if ext and ext.layout:
        return ext.layout, "x-teaal-loops.layout"
    from_format = layout_from_format(spec, shape.matrix, shape.row_rank, shape.col_rank)
    if from_format:
        return from_format, f"format.{shape.matrix}"
    by_order = layout_for_rank_order(shape.matrix_rank_order, shape.row_rank, shape.col_rank)
    if by_order is None:
        raise unsupported(
            spec,
            f"{shape.matrix} has rank order [{', '.join(shape.matrix_rank_order)}], which no "
            "layout stores without a format section",
            key_path=f"mapping.rank-order.{shape.matrix}",
        )
    return by_order, f"mapping.rank-order.{shape.matrix}"


def _refuse_stray_partitions(ctx: MappingContext) -> None:
    unknown = set(ctx.parts) - {ctx.tile_rank, ctx.atom_rank, ctx.flat_name,
                                ctx.shape.dense_rank}
    if unknown:
        name = sorted(unknown)[0]
        raise ctx.refuse(
            f"rank {name} is partitioned, but only the tile rank {ctx.tile_rank}, the atom "
            f"rank {ctx.atom_rank} and their flattening {ctx.flat_name} can be",
            key_path=ctx.key("partitioning", name),
        )
