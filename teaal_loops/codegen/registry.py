"""What the code generator knows how to emit: schedules -> templates, layouts -> macro files.

Adding a schedule means one template under ``templates/schedules/`` plus one entry in
:data:`SCHEDULES`; adding a layout means one macro file under ``templates/layouts/`` plus one
entry in :data:`LAYOUTS` (and a converter in :mod:`teaal_loops.runtime.layouts`). No schedule
template names a layout and no layout file names a schedule: they meet only through the layout
contract (DESIGN.md section 4), which every macro file implements as a ``Layout`` struct with
``num_tiles()``, ``num_atoms()``, ``tile_begin(t)``, ``tile_end(t)``, ``tile_size(t)``,
``atom_col(a)``, ``atom_val(a)`` and ``tile_of(a)``.

Kernel arguments are declared here, once, as :class:`KernelParam` lists: the templates render
the signature from them and the runtime orders its launch arguments by them, so the two cannot
drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from teaal_loops.errors import LayoutError
from teaal_loops.ir.model import ScheduleKind


@dataclass(frozen=True)
class KernelParam:
    """One kernel argument: its CUDA type as written in the signature and its name."""

    name: str
    ctype: str  # "index_t", "offset_t", "const offset_t* __restrict__", ...
    doc: str = ""

    @property
    def is_pointer(self) -> bool:
        return "*" in self.ctype

    @property
    def scalar_type(self) -> str:
        """The element type without qualifiers (``offset_t`` for ``const offset_t*``)."""
        return self.ctype.replace("const", "").replace("__restrict__", "").replace("*", "").strip()


@dataclass(frozen=True)
class ScheduleEntry:
    kind: ScheduleKind
    template: str  # path under templates/
    kernel_name: str  # the extern "C" symbol


@dataclass(frozen=True)
class LayoutEntry:
    name: str
    macro_file: str  # path under templates/
    description: str
    params: tuple[KernelParam, ...]  # the layout's kernel arguments, in signature order


SCHEDULES: dict[ScheduleKind, ScheduleEntry] = {
    ScheduleKind.THREAD_MAPPED: ScheduleEntry(
        ScheduleKind.THREAD_MAPPED, "schedules/thread_mapped.cu.j2", "teaal_spmv_thread_mapped"
    ),
    ScheduleKind.GROUP_MAPPED: ScheduleEntry(
        ScheduleKind.GROUP_MAPPED, "schedules/group_mapped.cu.j2", "teaal_spmv_group_mapped"
    ),
    ScheduleKind.WORK_ORIENTED: ScheduleEntry(
        ScheduleKind.WORK_ORIENTED, "schedules/work_oriented.cu.j2", "teaal_spmv_work_oriented"
    ),
    ScheduleKind.MERGE_PATH: ScheduleEntry(
        ScheduleKind.MERGE_PATH, "schedules/merge_path.cu.j2", "teaal_spmv_merge_path"
    ),
}

LAYOUTS: dict[str, LayoutEntry] = {
    "csr": LayoutEntry(
        name="csr",
        macro_file="layouts/csr.cuh.j2",
        description="compressed sparse rows: ranks [M, K], M uncompressed, K compressed",
        params=(
            KernelParam("rows", "index_t", "number of rows (tiles)"),
            KernelParam("cols", "index_t", "number of columns (length of x)"),
            KernelParam("nnz", "offset_t", "number of stored nonzeros (atoms)"),
            KernelParam("indptr", "const offset_t* __restrict__", "row offsets, rows + 1"),
            KernelParam("indices", "const index_t* __restrict__", "column of each nonzero"),
            KernelParam("values", "const value_t* __restrict__", "value of each nonzero"),
        ),
    ),
}

# Arguments every SpMV kernel takes after the layout's and the schedule's own.
VECTOR_PARAMS: tuple[KernelParam, ...] = (
    KernelParam("x", "const value_t* __restrict__", "dense input vector, length cols"),
    KernelParam("y", "value_t* __restrict__", "output vector, length rows"),
    KernelParam(
        "owner", "int* __restrict__", "trace builds: owning thread of every atom (else unused)"
    ),
)


def schedule_entry(kind: ScheduleKind) -> ScheduleEntry:
    return SCHEDULES[kind]


def layout_entry(name: str) -> LayoutEntry:
    try:
        return LAYOUTS[name.lower()]
    except KeyError:
        supported = ", ".join(sorted(LAYOUTS))
        raise LayoutError(
            f"layout {name!r} has no code generator yet (supported: {supported})"
        ) from None
