"""Hand-built schedules for codegen tests (independent of the spec parser and the lowering).

Each factory returns the IR the lowering produces for the corresponding loops spec, so the
codegen tests exercise every structural variant without going through YAML.
"""

from __future__ import annotations

from teaal_loops.ir.model import Combine, GpuLevel, RankBinding, RowTiling, Schedule

EINSUM = "Z[m] = A[m, k] * B[k]"


def _schedule(kind: str, **fields: object) -> Schedule:
    base: dict[str, object] = dict(
        kind=kind,
        spec_name=f"test_{kind}",
        einsum=EINSUM,
        output="Z",
        matrix="A",
        vector="B",
        tile_rank="M",
        atom_rank="K",
        layout="csr",
    )
    base.update(fields)
    return Schedule(**base)  # type: ignore[arg-type]


def thread_mapped(
    *,
    sizes: tuple[int | str, ...] = ("NUM_TILES", "NUM_THREADS"),
    space_levels: tuple[int, ...] = (0,),
    time_levels: tuple[int, ...] = (2, 1),
    params: dict[str, int | None] | None = None,
    block_threads: int = 128,
) -> Schedule:
    ranks = []
    for lvl in range(len(sizes), -1, -1):
        space = lvl in space_levels
        ranks.append(
            RankBinding(
                f"M{lvl}",
                "M",
                GpuLevel.WORKER if space else GpuLevel.LOOP,
                "extent",
                space_index=space_levels.index(lvl) if space else None,
                time_index=time_levels.index(lvl) if lvl in time_levels else None,
            )
        )
    ranks.append(RankBinding("K", "K", GpuLevel.LOOP, "row length", time_index=len(time_levels)))
    return _schedule(
        "thread_mapped",
        ranks=tuple(ranks),
        combine=Combine.STORE,
        params=params if params is not None else {"NUM_TILES": None, "NUM_THREADS": None},
        param_roles={"NUM_TILES": "row_tile", "NUM_THREADS": "row_tile"},
        tiling=RowTiling(sizes=sizes, space_levels=space_levels, time_levels=time_levels),
        block_threads=block_threads,
    )


def group_mapped(
    group_size: int = 32,
    *,
    sizes: tuple[int | str, ...] = ("NUM_TILES", "GRID_SIZE"),
    space_levels: tuple[int, ...] = (0,),
    time_levels: tuple[int, ...] = (2, 1),
    block_threads: int = 128,
) -> Schedule:
    ranks = (
        RankBinding("M2", "M", GpuLevel.LOOP, "extent", time_index=0),
        RankBinding("M1", "M", GpuLevel.LOOP, "extent", time_index=1),
        RankBinding("M0", "M", GpuLevel.WORKER, "GRID_SIZE", space_index=0),
        RankBinding("K1", "K", GpuLevel.LOOP, "ceil(row/BLOCK_SIZE)", time_index=2),
        RankBinding("K0", "K", GpuLevel.LANE, "BLOCK_SIZE", space_index=1),
    )
    return _schedule(
        "group_mapped",
        ranks=ranks,
        combine=Combine.GROUP_REDUCE,
        params={"NUM_TILES": None, "GRID_SIZE": None, "BLOCK_SIZE": group_size},
        param_roles={"NUM_TILES": "row_tile", "GRID_SIZE": "row_tile", "BLOCK_SIZE": "group_size"},
        tiling=RowTiling(sizes=sizes, space_levels=space_levels, time_levels=time_levels),
        group_size="BLOCK_SIZE",
        block_threads=block_threads,
    )


def work_oriented(work_per_thread: int | None = None) -> Schedule:
    ranks = (
        RankBinding("MK1", "MK", GpuLevel.WORKER, "ceil(nnz/WPT)", space_index=0),
        RankBinding("MK0", "MK", GpuLevel.LOOP, "WORK_PER_THREAD", time_index=0),
    )
    return _schedule(
        "work_oriented",
        ranks=ranks,
        combine=Combine.ATOMIC,
        params={"WORK_PER_THREAD": work_per_thread},
        param_roles={"WORK_PER_THREAD": "work_per_thread"},
        work_per_thread="WORK_PER_THREAD",
    )


def merge_path(items_per_thread: int | None = None) -> Schedule:
    ranks = (
        RankBinding("MK1", "MK", GpuLevel.WORKER, "ceil((rows+nnz)/IPT)", space_index=0),
        RankBinding("MK0", "MK", GpuLevel.LOOP, "ITEMS_PER_THREAD", time_index=0),
    )
    return _schedule(
        "merge_path",
        ranks=ranks,
        combine=Combine.ATOMIC,
        params={"ITEMS_PER_THREAD": items_per_thread},
        param_roles={"ITEMS_PER_THREAD": "work_per_thread"},
        work_per_thread="ITEMS_PER_THREAD",
    )


def all_variants() -> dict[str, Schedule]:
    """Every structural variant the templates must handle, by a readable id."""
    return {
        "thread_mapped": thread_mapped(),
        "thread_mapped_depth0": thread_mapped(sizes=(), space_levels=(0,), time_levels=()),
        "thread_mapped_depth1_time": thread_mapped(
            sizes=("S",), space_levels=(0,), time_levels=(1,)
        ),
        "thread_mapped_two_space": thread_mapped(space_levels=(2, 0), time_levels=(1,)),
        "group_mapped_g1": group_mapped(1),
        "group_mapped_g4": group_mapped(4),
        "group_mapped_g32": group_mapped(32),
        "group_mapped_g64": group_mapped(64),
        "group_mapped_g256": group_mapped(256),
        "work_oriented": work_oriented(),
        "merge_path": merge_path(),
    }
