"""The reference's space stamps, mapped through the IR's binding, name the same owner for every
atom as the CPU simulation, for the four SpMV schedules (and the values agree); the owner
comparison (teaal_loops.reference.ownership) reports what differs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teaal_loops.lowering import lower, simulate
from teaal_loops.reference import compare_arrays, run_reference
from teaal_loops.reference.ownership import compare_owners
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec
from teaal_loops.types import MatrixShape
from tests.conftest import REPO
from tests.reference.helpers import dense_vector, random_csr

SCHEDULES = ["thread_mapped", "group_mapped", "group_mapped_block", "work_oriented", "merge_path"]


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
    owners = compare_owners(spec, bound, a, ref.stamps, sim.owner)
    assert owners.compared and owners.ok, owners.text
    assert owners.reference is not None and owners.reference.each_once
    assert np.array_equal(owners.reference.atom_owner(), sim.owner)
    assert compare_arrays(ref.outputs["Z"], sim.y).ok


@pytest.fixture(scope="module")
def work_oriented():
    spec = load_spec(REPO / "specs" / "work_oriented.yaml")
    a = random_csr(12, 9, 0.4, 3, empty_rows=2)
    x = dense_vector(9, 3)
    params = {"WORK_PER_THREAD": 3}
    bound = bind(lower(spec), MatrixShape(12, 9, a.nnz), params=params)
    ref = run_reference(spec, {"A": a, "B": x}, params=params, engine="builtin")
    return spec, bound, a, ref.stamps, simulate(bound, a, x).owner


def test_a_different_owner_is_named(work_oriented) -> None:
    spec, bound, a, stamps, owner = work_oriented
    other = owner.copy()
    other[4] += 1
    report = compare_owners(spec, bound, a, stamps, other)
    assert report.compared and not report.ok and report.mismatches == 1
    row = int(np.searchsorted(a.indptr, 4, side="right") - 1)
    assert f"DISAGREE for 1 of {a.nnz} nonzeros, e.g. entry ({row}, {a.indices[4]}) atom 4" in (
        report.text
    )


def test_missing_repeated_and_foreign_multiplies_are_reported(work_oriented) -> None:
    spec, bound, a, stamps, owner = work_oriented
    dropped = compare_owners(spec, bound, a, stamps[1:], owner)
    assert not dropped.ok and "1 nonzeros never multiplied by the reference" in dropped.text
    repeated = compare_owners(spec, bound, a, (*stamps, stamps[0]), owner)
    assert not repeated.ok and "1 nonzeros multiplied more than once" in repeated.text
    empty_row = int(np.flatnonzero(np.diff(a.indptr) == 0)[0])
    foreign = dataclasses.replace(stamps[0], indices={"m": empty_row, "k": 0})
    unheld = compare_owners(spec, bound, a, (*stamps, foreign), owner)
    assert not unheld.ok and "1 reference multiplies of entries the matrix does not hold" in (
        unheld.text
    )


def test_an_owner_array_of_the_wrong_length_disagrees(work_oriented) -> None:
    spec, bound, a, stamps, owner = work_oriented
    report = compare_owners(spec, bound, a, stamps, owner[:-1])
    assert report.compared and not report.ok and f"for the {a.nnz} atoms" in report.text


def test_layouts_whose_atoms_are_not_the_references_are_not_compared() -> None:
    spec = load_spec(REPO / "specs" / "work_oriented.yaml")
    a = random_csr(12, 9, 0.4, 3, empty_rows=2)
    x = dense_vector(9, 3)
    params = {"WORK_PER_THREAD": 3}
    ref = run_reference(spec, {"A": a, "B": x}, params=params, engine="builtin")
    schedule = dataclasses.replace(lower(spec), layout="ell")
    bound = bind(schedule, MatrixShape(12, 9, a.nnz), params=params)
    report = compare_owners(spec, bound, a, ref.stamps, np.zeros(1, dtype=np.int64))
    assert not report.compared and report.ok and "padded slots or blocks" in report.text
