"""The reference's space stamps, mapped through the IR's binding, name the same owner for every
atom as the CPU simulation, for the four SpMV schedules (and the values agree)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teaal_loops.lowering import lower, simulate, thread_of_space_stamp
from teaal_loops.reference import compare_arrays, run_reference
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec
from teaal_loops.types import MatrixShape
from tests.conftest import REPO
from tests.reference.helpers import dense_vector, random_csr

SCHEDULES = ["thread_mapped", "group_mapped", "group_mapped_block", "work_oriented", "merge_path"]


def reference_owners(bound, a, stamps) -> np.ndarray:
    owner = np.full(a.nnz, -1, dtype=np.int64)
    for s in stamps:
        m, k = s.indices["m"], s.indices["k"]
        row = a.indices[a.indptr[m] : a.indptr[m + 1]]
        atom = a.indptr[m] + int(np.searchsorted(row, k))
        assert owner[atom] == -1, "an atom multiplied twice"
        owner[atom] = thread_of_space_stamp(bound, s.space_pairs())
    return owner


@pytest.mark.parametrize("name", SCHEDULES)
@settings(max_examples=20, deadline=None)
@given(
    rows=st.integers(1, 40),
    cols=st.integers(1, 16),
    density=st.sampled_from([0.05, 0.2, 0.7]),
    seed=st.integers(0, 10_000),
    sizes=st.lists(st.integers(1, 7), min_size=3, max_size=3),
)
def test_reference_owner_equals_simulated_owner(name, rows, cols, density, seed, sizes) -> None:
    spec = load_spec(REPO / "specs" / f"{name}.yaml")
    a = random_csr(rows, cols, density, seed, empty_rows=rows // 5)
    x = dense_vector(cols, seed)
    params = dict(zip(spec.parameters, sizes, strict=False))
    for group in ("BLOCK_SIZE", "GROUP"):  # lanes per group: a power of two for the IR
        if group in params:
            params[group] = 2 ** (params[group] % 4)
    for outer, inner in (("NUM_TILES", "NUM_THREADS"), ("NUM_TILES", "GRID_SIZE")):
        if outer in params and inner in params:
            params[outer] = params[inner] * (1 + sizes[-1] % 3)  # tiles of whole sub-tiles
    bound = bind(lower(spec), MatrixShape(rows, cols, a.nnz), params=params)
    sim = simulate(bound, a, x)
    ref = run_reference(spec, {"A": a, "B": x}, params=params, engine="builtin")
    assert np.array_equal(reference_owners(bound, a, ref.stamps), sim.owner)
    assert compare_arrays(ref.outputs["Z"], sim.y).ok
