"""What the code generator knows how to emit: schedules -> templates, layouts -> macro files.

Adding a schedule means one template under ``templates/schedules/`` plus one entry in
:data:`SCHEDULES`; adding a layout means one macro file under ``templates/layouts/`` plus one
entry in :data:`LAYOUTS` (and a converter in :mod:`teaal_loops.runtime.layouts`). No schedule
template names a layout and no layout file names a schedule: they meet only through the layout
contract (DESIGN.md section 4), which every macro file implements as a ``Layout`` struct with
``num_tiles()``, ``num_atoms()``, ``tile_begin(t)``, ``tile_end(t)``, ``tile_size(t)`` and
``tile_of(a)``, plus the accumulator contract the thread-mapped and work-oriented schedules use
(``Layout::Acc``, ``acc_zero()``, ``accumulate(acc, t, a, x, y)``, ``store_tile(y, t, acc)``,
``atomic_tile(y, t, acc)``) and, where an atom adds to exactly its own tile's output row,
``atom_product(t, a, x)`` (group-mapped and merge-path). docs/layouts.md has the details.

Kernel arguments are declared here, once, as :class:`KernelParam` lists: the templates render
the signature from them and the runtime orders its launch arguments by them, so the two cannot
drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

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
    macro_file: str  # path under templates/ (or under a registered user template folder)
    description: str
    params: tuple[KernelParam, ...]  # the layout's kernel arguments, in signature order
    # Compile-time constants of a layout option ("bcsr:4x4" -> {"R": 4, "C": 4}); the macro
    # file reads them as ``layout_options``. None: the layout takes no option.
    template_options: Callable[[str | None], Mapping[str, object]] | None = None

    def options_for(self, layout: str) -> dict[str, object]:
        """The ``layout_options`` a macro file sees for ``layout`` (``"bcsr:4x4"``)."""
        _, colon, option = layout.partition(":")
        text = option.strip() if colon and option.strip() else None
        if self.template_options is None:
            if text is not None:
                raise LayoutError(f"layout {self.name} takes no option (got {layout!r})")
            return {}
        return dict(self.template_options(text))


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

def _bcsr_template_options(option: str | None) -> dict[str, object]:
    from teaal_loops.ir.layouts import bcsr_block_shape

    R, C = bcsr_block_shape(option)
    return {"R": R, "C": C}


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
    "csc": LayoutEntry(
        name="csc",
        macro_file="layouts/csc.cuh.j2",
        description="compressed sparse columns: ranks [K, M], K uncompressed, M compressed; "
        "tiles are columns, every update an atomicAdd",
        params=(
            KernelParam("rows", "index_t", "number of rows (length of y)"),
            KernelParam("cols", "index_t", "number of columns (tiles)"),
            KernelParam("nnz", "offset_t", "number of stored nonzeros (atoms)"),
            KernelParam("indptr", "const offset_t* __restrict__", "column offsets, cols + 1"),
            KernelParam("indices", "const index_t* __restrict__", "row of each nonzero"),
            KernelParam("values", "const value_t* __restrict__", "value of each nonzero"),
        ),
    ),
    "coo": LayoutEntry(
        name="coo",
        macro_file="layouts/coo.cuh.j2",
        description="coordinates: the flattened compressed rank (M, K), sorted row-major; "
        "tiles are rows found by binary search",
        params=(
            KernelParam("rows", "index_t", "number of rows (tiles)"),
            KernelParam("cols", "index_t", "number of columns (length of x)"),
            KernelParam("nnz", "offset_t", "number of stored nonzeros (atoms)"),
            KernelParam("row_ids", "const index_t* __restrict__", "row of each nonzero (sorted)"),
            KernelParam("col_ids", "const index_t* __restrict__", "column of each nonzero"),
            KernelParam("values", "const value_t* __restrict__", "value of each nonzero"),
        ),
    ),
    "ell": LayoutEntry(
        name="ell",
        macro_file="layouts/ell.cuh.j2",
        description="ELLPACK: every row padded to width slots, stored slot-major; tiles are "
        "rows, atoms are slots (padding contributes 0)",
        params=(
            KernelParam("rows", "index_t", "number of rows (tiles)"),
            KernelParam("cols", "index_t", "number of columns (length of x)"),
            KernelParam("width", "offset_t", "slots per row (the longest row)"),
            KernelParam("nnz", "offset_t", "atoms: rows x width slots, padding included"),
            KernelParam("columns", "const index_t* __restrict__",
                        "column of slot s of row r at s * rows + r; -1 marks padding"),
            KernelParam("values", "const value_t* __restrict__",
                        "value of slot s of row r at s * rows + r; 0 in padding"),
        ),
    ),
    "bcsr": LayoutEntry(
        name="bcsr",
        macro_file="layouts/bcsr.cuh.j2",
        description="block CSR: ranks [M1, K1, M0, K0] with dense R x C blocks; tiles are "
        "block rows, atoms are blocks",
        params=(
            KernelParam("rows", "index_t", "number of rows (length of y)"),
            KernelParam("cols", "index_t", "number of columns (length of x)"),
            KernelParam("nnz", "offset_t", "atoms: stored blocks"),
            KernelParam("indptr", "const offset_t* __restrict__",
                        "block-row offsets, ceil(rows / R) + 1"),
            KernelParam("indices", "const index_t* __restrict__", "block column of each block"),
            KernelParam("blocks", "const value_t* __restrict__",
                        "R x C values of each block, row-major inside the block"),
        ),
        template_options=_bcsr_template_options,
    ),
    "dia": LayoutEntry(
        name="dia",
        macro_file="layouts/dia.cuh.j2",
        description="diagonals: ndiag stored diagonals, each a dense array over rows; tiles "
        "are rows, atoms are (row, diagonal) slots",
        params=(
            KernelParam("rows", "index_t", "number of rows (tiles)"),
            KernelParam("cols", "index_t", "number of columns (length of x)"),
            KernelParam("ndiag", "offset_t", "number of stored diagonals"),
            KernelParam("nnz", "offset_t", "atoms: rows x ndiag slots, out-of-matrix ones too"),
            KernelParam("offsets", "const index_t* __restrict__",
                        "col - row of each diagonal, ascending"),
            KernelParam("values", "const value_t* __restrict__",
                        "A[r, r + offsets[d]] at d * rows + r (0 outside the matrix)"),
        ),
    ),
}

# Folders searched for macro files after the package's templates/ (user-defined layouts).
USER_TEMPLATE_DIRS: list[Path] = []


def register_layout_entry(
    entry: LayoutEntry, *, template_dir: str | Path | None = None, replace: bool = False
) -> None:
    """Add a layout's code generator: its macro file (found under ``template_dir`` when given,
    else under the package's templates/) and its kernel arguments."""
    key = entry.name.lower()
    if key in LAYOUTS and not replace:
        raise LayoutError(f"layout {key!r} already has a code generator (pass replace=True)")
    if template_dir is not None:
        folder = Path(template_dir).resolve()
        if not (folder / entry.macro_file).is_file():
            raise LayoutError(
                f"layout {key}: macro file {entry.macro_file!r} not found under {folder}"
            )
        if folder not in USER_TEMPLATE_DIRS:
            USER_TEMPLATE_DIRS.append(folder)
    LAYOUTS[key] = entry

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
    """The entry of a layout name; an option after a colon (``bcsr:4x4``) is ignored here."""
    try:
        return LAYOUTS[name.split(":", 1)[0].strip().lower()]
    except KeyError:
        supported = ", ".join(LAYOUTS)
        raise LayoutError(
            f"layout {name!r} has no code generator yet (supported: {supported})"
        ) from None
