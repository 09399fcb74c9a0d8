"""Layouts x schedules the layout tests run, and the matrices they run them on.

Every (layout, schedule) comes from a spec of ``specs/layouts/`` (the layout chosen by the
spec's ``format`` section) or from ``specs/`` with a ``layout=`` override (``bcsr:3x2``, an
odd block shape that leaves partial blocks at both matrix edges).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from teaal_loops.ir.model import Schedule
from teaal_loops.lowering import lower
from teaal_loops.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "specs"
LAYOUT_SPECS = SPECS / "layouts"

# (case id, spec path relative to specs/, layout override or None)
SCHEDULE_CASES: list[tuple[str, str, str | None]] = [
    ("csc/thread_mapped", "layouts/csc/thread_mapped.yaml", None),
    ("csc/work_oriented", "layouts/csc/work_oriented.yaml", None),
    ("coo/thread_mapped", "layouts/coo/thread_mapped.yaml", None),
    ("coo/work_oriented", "layouts/coo/work_oriented.yaml", None),
    ("ell/thread_mapped", "layouts/ell/thread_mapped.yaml", None),
    ("ell/work_oriented", "layouts/ell/work_oriented.yaml", None),
    ("ell/merge_path", "layouts/ell/merge_path.yaml", None),
    ("dia/thread_mapped", "layouts/dia/thread_mapped.yaml", None),
    ("dia/work_oriented", "layouts/dia/work_oriented.yaml", None),
    ("dia/merge_path", "layouts/dia/merge_path.yaml", None),
    ("bcsr_2x2/thread_mapped", "layouts/bcsr_2x2/thread_mapped.yaml", None),
    ("bcsr_2x2/work_oriented", "layouts/bcsr_2x2/work_oriented.yaml", None),
    ("bcsr_4x4/thread_mapped", "layouts/bcsr_4x4/thread_mapped.yaml", None),
    ("bcsr_4x4/work_oriented", "layouts/bcsr_4x4/work_oriented.yaml", None),
    ("bcsr_3x2/thread_mapped", "thread_mapped.yaml", "bcsr:3x2"),
    ("bcsr_3x2/work_oriented", "work_oriented.yaml", "bcsr:3x2"),
    ("panels_3/group_mapped", "layouts/panels_3/group_mapped.yaml", None),
    ("panels_3/merge_path", "layouts/panels_3/merge_path.yaml", None),
    ("panels_2/thread_mapped", "thread_mapped.yaml", "panels:2"),
    ("panels_2/work_oriented", "work_oriented.yaml", "panels:2"),
    ("heavy_32/thread_mapped", "thread_mapped.yaml", "heavy:32"),
    ("heavy_32/group_mapped", "group_mapped.yaml", "heavy:32"),
    ("heavy_32/work_oriented", "work_oriented.yaml", "heavy:32"),
    ("heavy_32/merge_path", "merge_path.yaml", "heavy:32"),
]
# The heavy layout's smallest heavy row here (its default, 4,096 nonzeros, suits real matrices;
# these are small): the skewed matrix's row of 140 is then cut into 32-column pieces.
HEAVY_MIN_NNZ = 20

# Parameter variants per schedule kind: the default, and ones that split tiles or loop.
PARAM_VARIANTS: dict[str, list[dict[str, int]]] = {
    "thread_mapped": [{}, {"NUM_TILES": 9, "NUM_THREADS": 3}],
    "work_oriented": [{}, {"WORK_PER_THREAD": 3}, {"WORK_PER_THREAD": 1}],
    "merge_path": [{}, {"ITEMS_PER_THREAD": 5}, {"ITEMS_PER_THREAD": 1}],
    "group_mapped": [{}, {"BLOCK_SIZE": 4}],
}


@functools.cache
def schedule(case: str, params: tuple[tuple[str, int], ...] = ()) -> Schedule:
    _, spec, layout = next(c for c in SCHEDULE_CASES if c[0] == case)
    return lower(load_spec(str(SPECS / spec)), params=dict(params), layout=layout)


def kind_of(case: str) -> str:
    return case.split("/", 1)[1]


def matrices() -> dict[str, sp.csr_matrix]:
    """Small matrices with the shapes that break layouts: empty rows (first, last, runs), a
    long row, more columns than rows and the reverse, a single row, no nonzeros at all, a
    banded one (DIA's home ground) and explicitly stored zeros."""
    rng = np.random.default_rng(7)
    mats: dict[str, sp.csr_matrix] = {}
    lengths = rng.integers(0, 6, size=57)
    lengths[[0, 1, 20, 55, 56]] = 0
    lengths[30] = 140
    cols = 150
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths])
    data = rng.uniform(-1, 1, size=indptr[-1])
    mats["skewed"] = sp.csr_matrix((data, indices, indptr), shape=(57, cols))
    mats["wide"] = sp.random(23, 70, density=0.2, format="csr", random_state=3)
    tall = sp.random(61, 13, density=0.15, format="csr", random_state=5)
    tall.data[::4] = 0.0  # explicitly stored zeros
    mats["tall_with_zeros"] = tall
    mats["single_row"] = sp.csr_matrix(rng.uniform(-1, 1, size=(1, 33)))
    mats["all_empty"] = sp.csr_matrix((9, 4))
    n, m, offsets = 45, 47, (-3, -1, 0, 2, 5)
    lengths = [min(n + k, m) if k < 0 else min(n, m - k) for k in offsets]
    banded = sp.diags(
        [rng.uniform(-1, 1, length) for length in lengths], offsets, shape=(n, m), format="csr"
    )
    mats["banded"] = banded
    return mats


def host_layout_of(case: str, A: sp.csr_matrix) -> Any:
    """``A`` in the case's layout, built without the padding limit (the skewed matrix pads
    ELL and DIA far beyond it; the limit has its own tests)."""
    return host_layout_of_name(schedule(case).layout, A)


def host_layout_of_name(layout: str, A: sp.csr_matrix) -> Any:
    from teaal_loops.layouts import convert
    from teaal_loops.layouts.bcsr import block_shape as bcsr_block_shape

    name, _, option = layout.partition(":")
    if name in ("ell", "dia"):
        return convert(A, name, padding_limit=None)
    if name == "bcsr":
        return convert(A, name, block=bcsr_block_shape(option or None), padding_limit=None)
    if name == "heavy":
        return convert(A, layout, min_nnz=HEAVY_MIN_NNZ)
    return convert(A, layout)  # (an option, panels:3, travels in the name)


# A matrix for the heavy-row layouts (heavy:32, pieces:32 with min_nnz=20): 10 panels, so a row
# is heavy from max(20, 8 * 10) = 80 nonzeros. Rows 3, 17 and 39 are heavy (the last full),
# row 25 one short of it, rows 0, 1 and 12 empty.
HEAVY_ROWS_SHAPE = (40, 300)
HEAVY_ROW_LENGTHS = {3: 90, 17: 150, 39: 300}
LIGHT_LONGEST = 79


def heavy_rows_matrix(seed: int = 5) -> sp.csr_matrix:
    rows, cols = HEAVY_ROWS_SHAPE
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 7, size=rows)
    lengths[[0, 1, 12]] = 0
    lengths[25] = LIGHT_LONGEST
    for row, n in HEAVY_ROW_LENGTHS.items():
        lengths[row] = n
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths])
    return sp.csr_matrix((rng.uniform(-1, 1, indptr[-1]), indices, indptr), shape=(rows, cols))
