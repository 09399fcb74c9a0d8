"""Lower a parsed spec to the schedule IR.

Recognition follows the table of DESIGN §4, generalised so that the ``ver1``/``ver2`` variants and
any rank names lower too:

* tile rank (``M``) split by ``uniform_shape``/``nway_shape`` (or not split), atom rank (``K``)
  not split and in ``time``  -> **thread-mapped**: the space levels of the tile rank pick the
  thread, the time levels are loops;
* as above but ``K: [uniform_occupancy(A.G)]`` with ``K0`` in space (last) and ``K1`` in time
  -> **group-mapped**: the tile's space levels pick a group of ``G`` lanes, ``K0`` is the lane;
* ``(M, K): [flatten()]`` then ``MK: [uniform_occupancy(A.W)]`` with ``MK1`` in space, ``MK0``
  in time -> **work-oriented**;
* the same with our extension ``MK: [x_merge_path(A.I)]`` -> **merge-path**.

Everything else is refused with an :class:`UnsupportedMappingError` that names the rank and lists
what is supported: the generator never emits code whose ownership differs from the spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from teaal_loops.errors import LayoutError, ParameterError, UnsupportedMappingError
from teaal_loops.ir.layouts import canonical_layout, layout_from_format, layout_semantics
from teaal_loops.ir.model import (
    Combine,
    GpuLevel,
    RankBinding,
    RowTiling,
    Schedule,
    ScheduleKind,
)
from teaal_loops.spec.model import (
    Einsum,
    Intersect,
    RankPartitioning,
    SpaceTime,
    Spec,
    TensorAccess,
)

SUPPORTED_MAPPINGS = (
    "supported SpMV mappings: "
    "thread-mapped (M: [uniform_shape(..)...], space: tile levels, time: [..., K]); "
    "group-mapped (K: [uniform_occupancy(A.G)], space: [..tile levels.., K0], time: [..., K1]); "
    "work-oriented ((M, K): [flatten()], MK: [uniform_occupancy(A.W)], space: [MK1], "
    "time: [MK0]); "
    "merge-path ((M, K): [flatten()], MK: [x_merge_path(A.I)], space: [MK1], time: [MK0])"
)

DEFAULT_BLOCK_THREADS = 128


@dataclass(frozen=True)
class SpmvShape:
    """The roles of the tensors and ranks in ``Z[m] = A[m, k] * B[k]``."""

    einsum: Einsum
    output: str
    matrix: str
    vector: str
    row_rank: str  # the matrix rank the output keeps (M)
    col_rank: str  # the contracted rank (K)
    row_var: str  # their index variables in the einsum (m, k)
    col_var: str
    matrix_rank_order: tuple[str, ...]


def _unsupported(
    spec: Spec, message: str, *, key_path: str | None = None
) -> UnsupportedMappingError:
    from teaal_loops.errors import Location

    return UnsupportedMappingError(
        f"{message}; {SUPPORTED_MAPPINGS}",
        location=Location(spec.source) if spec.source else None,
        key_path=key_path,
    )


def recognise_spmv(spec: Spec) -> SpmvShape:
    """Find the one SpMV-shaped einsum of ``spec`` and name the roles of its tensors and ranks."""
    candidates = [e for e in spec.einsums if _spmv_roles(spec, e) is not None]
    if not candidates:
        texts = "; ".join(e.text for e in spec.einsums) or "none"
        raise UnsupportedMappingError(
            f"the GPU generator supports SpMV, Z[m] = A[m, k] * B[k] (any names, either factor "
            f"order); this spec's einsums are: {texts}",
            location=spec.einsums[0].location if spec.einsums else None,
            key_path="einsum.expressions",
        )
    if len(spec.einsums) > 1:
        others = [e.text for e in spec.einsums if e is not candidates[0]]
        raise UnsupportedMappingError(
            f"the GPU generator lowers one SpMV einsum per spec; also found: {'; '.join(others)}",
            location=spec.einsums[0].location,
            key_path="einsum.expressions",
        )
    roles = _spmv_roles(spec, candidates[0])
    assert roles is not None
    return roles


def _spmv_roles(spec: Spec, e: Einsum) -> SpmvShape | None:
    out = e.output
    if len(out.indices) != 1 or not out.indices[0].is_plain:
        return None
    if not isinstance(e.expr, Intersect) or len(e.expr.factors) != 2:
        return None
    factors = e.expr.factors
    if not all(isinstance(f, TensorAccess) for f in factors):
        return None
    accesses = [f for f in factors if isinstance(f, TensorAccess)]
    if any(not all(i.is_plain for i in f.indices) for f in accesses):
        return None
    mats = [f for f in accesses if len(f.indices) == 2]
    vecs = [f for f in accesses if len(f.indices) == 1]
    if len(mats) != 1 or len(vecs) != 1:
        return None
    m_var = out.indices[0].variables[0]
    mat, vec = mats[0], vecs[0]
    mat_vars = [i.variables[0] for i in mat.indices]
    k_var = vec.indices[0].variables[0]
    if sorted(mat_vars) != sorted([m_var, k_var]) or m_var == k_var:
        return None
    declared = spec.declaration.get(mat.tensor)
    if declared is None or len(declared) != 2:
        return None
    order = tuple(spec.mapping.rank_order.get(mat.tensor, declared))
    return SpmvShape(
        einsum=e,
        output=out.tensor,
        matrix=mat.tensor,
        vector=vec.tensor,
        row_rank=declared[mat_vars.index(m_var)],
        col_rank=declared[mat_vars.index(k_var)],
        row_var=m_var,
        col_var=k_var,
        matrix_rank_order=order,
    )


@dataclass(frozen=True)
class Roles:
    """The spec's ranks as the layout sees them: tiles along ``tile``, atoms along ``atom``."""

    shape: SpmvShape
    layout: str
    tile_rank: str
    atom_rank: str
    scatter: bool

    @property
    def einsum(self) -> Einsum:
        return self.shape.einsum

    @property
    def output(self) -> str:
        return self.shape.output

    @property
    def matrix(self) -> str:
        return self.shape.matrix

    @property
    def vector(self) -> str:
        return self.shape.vector


def lower(
    spec: Spec,
    *,
    params: Mapping[str, int] | None = None,
    layout: str | None = None,
    block_threads: int | None = None,
) -> Schedule:
    """Lower ``spec`` to a :class:`Schedule`; ``params`` binds size parameters by name."""
    shape = _roles(spec, recognise_spmv(spec), layout)
    out = shape.output
    # Splits of one rank by name; a flatten ``(M, K)`` is kept apart, since its name ``MK`` is
    # also the name of the rank its own splits (``MK: [...]``) apply to.
    parts = {p.name: p for p in spec.partitioning_of(out) if len(p.ranks) == 1}
    spacetime = spec.spacetime_of(out) or _all_time(spec, out)
    final = spec.final_ranks[out]
    space = [r.rank for r in spacetime.space]
    time = [r.rank for r in spacetime.time]
    styles = {r.rank: r.style for r in (*spacetime.space, *spacetime.time)}
    flat_name = shape.tile_rank + shape.atom_rank

    ext = spec.extensions
    chosen_layout = shape.layout
    threads = block_threads or (ext.block_threads if ext and ext.block_threads else None)
    threads = threads or DEFAULT_BLOCK_THREADS
    if threads <= 0 or threads > 1024 or threads % 32:
        raise ParameterError(f"block_threads must be a multiple of 32 in [32, 1024], got {threads}")

    flat_parts = [p for p in spec.partitioning_of(out) if len(p.ranks) > 1]
    unknown = set(parts) - {shape.tile_rank, shape.atom_rank, flat_name}
    if unknown:
        name = sorted(unknown)[0]
        raise _unsupported(
            spec,
            f"rank {name} is partitioned, but only the tile rank {shape.tile_rank}, the atom "
            f"rank {shape.atom_rank} and their flattening {flat_name} can be",
            key_path=f"mapping.partitioning.{out}.{name}",
        )

    if flat_parts:
        kind, ranks, size, roles = _lower_flat(spec, shape, parts, flat_parts, space, time, styles)
        tiling = None
        group_size: int | str | None = None
        work = size
        combine = Combine.ATOMIC
    else:
        tiling, tile_ranks, roles = _lower_tiling(spec, shape, parts, space, time, styles)
        group_ranks, group_size = _lower_atom_rank(spec, shape, parts, space, time, styles)
        ranks = tile_ranks + group_ranks
        if group_size is None:
            kind, combine = ScheduleKind.THREAD_MAPPED, Combine.STORE
            if shape.scatter:
                combine = Combine.ATOMIC
        else:
            kind, combine = ScheduleKind.GROUP_MAPPED, Combine.GROUP_REDUCE
            if isinstance(group_size, str):
                roles[group_size] = "group_size"
        work = None

    if ext and ext.schedule and ext.schedule not in ("auto", kind.value):
        raise _unsupported(
            spec,
            f"x-teaal-loops.schedule says {ext.schedule}, but the mapping is {kind.value}",
            key_path="x-teaal-loops.schedule",
        )

    semantics = layout_semantics(chosen_layout)
    if kind not in semantics.schedules:
        raise LayoutError(
            f"layout {chosen_layout} ({semantics.tiles}) supports "
            f"{', '.join(sorted(k.value for k in semantics.schedules))}; the spec's mapping is "
            f"{kind.value}"
        )
    order = {name: i for i, name in enumerate(spec.loop_order_of(out))}
    ordered = tuple(sorted(ranks, key=lambda r: order.get(r.name, len(order))))
    missing = set(final) - {r.name for r in ordered}
    if missing:  # a final rank the mapping above did not bind
        raise _unsupported(spec, f"ranks {sorted(missing)} have no GPU binding")

    bound = _bind_params(spec, roles, params or {}, ext.params if ext else {})
    return Schedule(
        kind=kind,
        spec_name=spec.name,
        einsum=shape.einsum.text,
        output=out,
        matrix=shape.matrix,
        vector=shape.vector,
        tile_rank=shape.tile_rank,
        atom_rank=shape.atom_rank,
        layout=chosen_layout,
        ranks=ordered,
        combine=combine,
        params=bound,
        param_roles=dict(roles),
        tiling=tiling,
        group_size=group_size,
        work_per_thread=work,
        block_threads=threads,
    )


def _all_time(spec: Spec, out: str) -> SpaceTime:
    """No spacetime: TeAAL runs everything in time, i.e. one sequential worker."""
    from teaal_loops.spec.model import SpaceTimeRank

    return SpaceTime(space=(), time=tuple(SpaceTimeRank(r) for r in spec.loop_order_of(out)))


def _roles(spec: Spec, shape: SpmvShape, layout: str | None) -> Roles:
    """Choose the layout (argument > x-teaal-loops > format > rank order) and orient the ranks."""
    ext = spec.extensions
    chosen = (
        layout
        or (ext.layout if ext and ext.layout else None)
        or layout_from_format(spec, shape.matrix, shape.row_rank, shape.col_rank)
        or ("csr" if shape.matrix_rank_order == (shape.row_rank, shape.col_rank) else "csc")
    )
    semantics = layout_semantics(chosen)
    chosen = canonical_layout(chosen)  # "BCSR:4" -> "bcsr:4x4"; a bad option fails here
    if semantics.column_major:
        return Roles(shape, chosen, shape.col_rank, shape.row_rank, scatter=True)
    return Roles(shape, chosen, shape.row_rank, shape.col_rank, scatter=False)


def _tile_rank_names(tile: str, depth: int) -> list[str]:
    """Final names of the tile rank's levels, top-down: ``M2, M1, M0`` (or ``M`` unsplit)."""
    if depth == 0:
        return [tile]
    return [f"{tile}{j}" for j in range(depth, -1, -1)]


def _lower_tiling(
    spec: Spec,
    shape: Roles,
    parts: Mapping[str, RankPartitioning],
    space: list[str],
    time: list[str],
    styles: Mapping[str, str],
) -> tuple[RowTiling, list[RankBinding], dict[str, str]]:
    out, tile = shape.output, shape.tile_rank
    sizes: list[int | str] = []
    nway: list[bool] = []
    roles: dict[str, str] = {}
    part = parts.get(tile)
    if part is not None:
        for fn in part.functions:
            if fn.kind not in ("uniform_shape", "nway_shape"):
                raise _unsupported(
                    spec,
                    f"rank {tile} is split by {fn.text or fn.kind}; the tile rank of a thread- "
                    "or group-mapped schedule takes uniform_shape or nway_shape",
                    key_path=f"mapping.partitioning.{out}.{tile}",
                )
            if fn.size is None:
                raise _unsupported(
                    spec, f"{fn.text} has no size", key_path=f"mapping.partitioning.{out}.{tile}"
                )
            sizes.append(fn.size)
            nway.append(fn.kind == "nway_shape")
            if isinstance(fn.size, str):
                roles[fn.size] = "row_parts" if fn.kind == "nway_shape" else "row_tile"
    depth = len(sizes)
    names = _tile_rank_names(tile, depth)
    level_of = {name: depth - i for i, name in enumerate(names)}
    space_levels = tuple(level_of[r] for r in space if r in level_of)
    time_levels = tuple(level_of[r] for r in time if r in level_of)
    bindings = []
    for name, level in level_of.items():
        is_space = name in space
        bindings.append(
            RankBinding(
                name=name,
                source=tile,
                level=GpuLevel.WORKER if is_space else GpuLevel.LOOP,
                extent=_tile_extent(level, depth, sizes, nway),
                space_index=space.index(name) if is_space else None,
                time_index=time.index(name) if name in time else None,
                style=styles.get(name, "pos"),
            )
        )
    return RowTiling(tuple(sizes), space_levels, time_levels, tuple(nway)), bindings, roles


def _tile_extent(level: int, depth: int, sizes: list[int | str], nway: list[bool]) -> str:
    if depth == 0:
        return "rows"

    def width(j: int) -> str:  # S_j, the width of a level-j tile
        s = sizes[depth - j]
        if nway[depth - j]:
            parent = "rows" if j == depth else width(j + 1)
            return f"ceil({parent}/{s})"
        return str(s)

    if level == depth:
        return f"ceil(rows/{width(depth)})"
    if level == 0:
        return width(1)
    return f"ceil({width(level + 1)}/{width(level)})"


def _lower_atom_rank(
    spec: Spec,
    shape: Roles,
    parts: Mapping[str, RankPartitioning],
    space: list[str],
    time: list[str],
    styles: Mapping[str, str],
) -> tuple[list[RankBinding], int | str | None]:
    out, atom = shape.output, shape.atom_rank
    part = parts.get(atom)
    if part is None:
        if atom in space:
            raise _unsupported(
                spec,
                f"rank {atom} (the nonzeros of a row) is in space without a partitioning, which "
                "would need a reduction across arbitrary threads",
                key_path=f"mapping.spacetime.{out}.space",
            )
        binding = RankBinding(
            atom, atom, GpuLevel.LOOP, "row length", time_index=_index(time, atom),
            style=styles.get(atom, "pos"),
        )
        return [binding], None
    fns = part.functions
    if len(fns) != 1 or fns[0].kind != "uniform_occupancy":
        raise _unsupported(
            spec,
            f"rank {atom} is split by {', '.join(f.text or f.kind for f in fns)}; a group-mapped "
            f"schedule takes exactly {atom}: [uniform_occupancy({shape.matrix}.G)]",
            key_path=f"mapping.partitioning.{out}.{atom}",
        )
    fn = fns[0]
    if fn.leader not in (None, shape.matrix):
        raise _unsupported(
            spec,
            f"uniform_occupancy on {atom} is led by {fn.leader}; the lanes of a group share the "
            f"nonzeros of the matrix {shape.matrix}",
            key_path=f"mapping.partitioning.{out}.{atom}",
        )
    hi, lo = f"{atom}1", f"{atom}0"
    if lo not in space or hi not in time:
        raise _unsupported(
            spec,
            f"rank {lo} must be in space (the lane) and {hi} in time (each lane's loop over "
            f"chunks of the row); the spec has {lo} in {'space' if lo in space else 'time'} and "
            f"{hi} in {'space' if hi in space else 'time'}",
            key_path=f"mapping.spacetime.{out}",
        )
    if space[-1] != lo:
        raise _unsupported(
            spec,
            f"rank {lo} must be the last space rank: lanes are the fastest-varying part of the "
            "thread index, so a group's lanes are adjacent threads of one warp or block",
            key_path=f"mapping.spacetime.{out}.space",
        )
    size = fn.size if fn.size is not None else 32
    return (
        [
            RankBinding(hi, atom, GpuLevel.LOOP, f"ceil(row length/{size})",
                        time_index=time.index(hi), style=styles.get(hi, "pos")),
            RankBinding(lo, atom, GpuLevel.LANE, str(size), space_index=space.index(lo),
                        style=styles.get(lo, "pos")),
        ],
        size,
    )


def _lower_flat(
    spec: Spec,
    shape: Roles,
    parts: Mapping[str, RankPartitioning],
    flat_parts: list[RankPartitioning],
    space: list[str],
    time: list[str],
    styles: Mapping[str, str],
) -> tuple[ScheduleKind, list[RankBinding], int | str, dict[str, str]]:
    out = shape.output
    flat = flat_parts[0]
    expected = (shape.tile_rank, shape.atom_rank)
    if len(flat_parts) != 1 or flat.ranks != expected:
        raise _unsupported(
            spec,
            f"flattening {flat.ranks} is not supported; a flat schedule flattens the matrix's rank "
            f"order ({', '.join(expected)}) into {''.join(expected)}",
            key_path=f"mapping.partitioning.{out}",
        )
    for other in (shape.tile_rank, shape.atom_rank):
        if other in parts:
            raise _unsupported(
                spec,
                f"rank {other} is both split on its own and flattened",
                key_path=f"mapping.partitioning.{out}.{other}",
            )
    name = flat.name
    split = parts.get(name)
    if split is None or len(split.functions) != 1 or split.functions[0].kind not in (
        "uniform_occupancy",
        "x_merge_path",
    ):
        raise _unsupported(
            spec,
            f"the flattened rank {name} must be split by one uniform_occupancy({shape.matrix}.W) "
            f"or x_merge_path({shape.matrix}.I)",
            key_path=f"mapping.partitioning.{out}.{name}",
        )
    fn = split.functions[0]
    if fn.leader not in (None, shape.matrix):
        raise _unsupported(
            spec,
            f"{fn.text} is led by {fn.leader}; chunks are counted in nonzeros of {shape.matrix}",
            key_path=f"mapping.partitioning.{out}.{name}",
        )
    hi, lo = f"{name}1", f"{name}0"
    if space != [hi] or lo not in time:
        raise _unsupported(
            spec,
            f"a flat schedule needs space: [{hi}] (one thread per chunk) and {lo} in time; the "
            f"spec has space: [{', '.join(space)}]",
            key_path=f"mapping.spacetime.{out}",
        )
    merge = fn.kind == "x_merge_path"
    kind = ScheduleKind.MERGE_PATH if merge else ScheduleKind.WORK_ORIENTED
    size = fn.size if fn.size is not None else 8
    unit = "merge items (rows + nonzeros)" if merge else "nonzeros"
    roles = {}
    if isinstance(size, str):
        roles[size] = "items_per_thread" if merge else "atoms_per_thread"
    ranks = [
        RankBinding(hi, name, GpuLevel.WORKER, f"ceil(({'rows+' if merge else ''}nnz)/{size})",
                    space_index=0, style=styles.get(hi, "pos")),
        RankBinding(lo, name, GpuLevel.LOOP, f"{size} {unit}", time_index=time.index(lo),
                    style=styles.get(lo, "pos")),
    ]
    return kind, ranks, size, roles


def _index(seq: list[str], item: str) -> int | None:
    return seq.index(item) if item in seq else None


def _bind_params(
    spec: Spec,
    roles: Mapping[str, str],
    given: Mapping[str, int],
    spec_defaults: Mapping[str, int],
) -> dict[str, int | None]:
    """Check ``--param`` names against the spec; unbound ones default at launch (None)."""
    used = set(spec.parameters) | set(roles)
    for name in given:
        if name not in used:
            listing = ", ".join(sorted(used)) or "none"
            raise ParameterError(
                f"--param {name}: the spec {spec.name} has no parameter {name} "
                f"(its parameters: {listing})"
            )
    for name in roles:
        if name not in used:  # pragma: no cover - roles come from the spec
            raise ParameterError(f"parameter {name} is not used by the spec")
    unused = [p for p in spec.parameters if p not in roles]
    if unused and any(p in given for p in unused):
        raise ParameterError(f"parameters {unused} are not used by the SpMV mapping")
    bound: dict[str, int | None] = {}
    for name in roles:
        value = given.get(name, spec_defaults.get(name))
        if value is not None and (not isinstance(value, int) or value <= 0):
            raise ParameterError(f"parameter {name} must be a positive integer, got {value!r}")
        bound[name] = value
    return bound
