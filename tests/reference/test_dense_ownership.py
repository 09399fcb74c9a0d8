"""The reference's owner of every (nonzero, dense index) against the simulation's, for the
dense forms (teaal_loops.reference.ownership): agreement, what a disagreement reports, TeAAL's
two-einsum SDDMM compared per atom, and transposed forms keyed on A^T's entries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from teaal_loops.lowering import lower, simulate
from teaal_loops.lowering.simulate import operand_shape, operand_shapes, sparse_operand
from teaal_loops.reference import run_reference
from teaal_loops.reference.ownership import compare_owners
from teaal_loops.reference.stamps import Stamp
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec
from tests.lowering.dense_specs import PARAMS, SPECS, write_spec
from tests.reference.helpers import random_csr

D = 3


def _run(tmp_path: Path, name: str, seed: int = 4):
    spec = load_spec(write_spec(tmp_path, name))
    schedule = lower(spec, params=PARAMS[name])
    a = random_csr(11, 8, 0.3, seed, empty_rows=2)
    bound = bind(schedule, operand_shape(schedule, a), params=PARAMS[name], dense_size=D)
    held = sparse_operand(schedule, a)
    rng = np.random.default_rng(seed)
    operands = [rng.uniform(0.5, 1.5, s) for s in operand_shapes(schedule, *held.shape, D)]
    sim = simulate(bound, a, *operands)
    tensors = {schedule.matrix: a, **dict(zip(schedule.form.operands, operands, strict=True))}
    params = {p: v for p, v in bound.params.items() if p in spec.parameters}
    ref = run_reference(spec, tensors, params=params, engine="builtin")
    return spec, bound, a, ref.stamps, sim


@pytest.mark.parametrize("name", [n for n in SPECS if n != "sddmm_two"])
def test_every_nonzero_and_dense_index_agrees(tmp_path: Path, name: str) -> None:
    spec, bound, a, stamps, sim = _run(tmp_path, name)
    report = compare_owners(spec, bound, a, stamps, sim.owner)
    assert report.compared and report.ok, report.text
    assert f"agree for all {a.nnz} nonzeros x {D} dense indices" in report.text
    assert report.reference is not None and report.reference.each_once
    np.testing.assert_array_equal(report.reference.atom_owner(), sim.owner)


def test_two_einsum_sddmm_is_compared_per_atom_and_says_so(tmp_path: Path) -> None:
    spec, bound, a, stamps, sim = _run(tmp_path, "sddmm_two")
    assert {st.einsum for st in stamps} == {"T1", "Z"}  # T1's multiplies are not C's atoms
    report = compare_owners(spec, bound, a, stamps, sim.owner)
    assert report.ok, report.text
    assert f"agree for all {a.nnz} nonzeros, compared per atom" in report.text
    assert "no index of the summed rank" in report.text
    assert report.reference is not None and report.reference.per_atom
    # one dense index of one atom given to another thread is still caught
    owner = sim.owner.copy()
    owner[2, D - 1] += 1
    bad = compare_owners(spec, bound, a, stamps, owner)
    assert not bad.ok and f"DISAGREE for 1 of {a.nnz} nonzeros" in bad.text


@pytest.mark.parametrize("name", ["spmm_n0_space", "spmm_transposed", "sddmm_one"])
def test_one_pair_given_to_another_thread_is_reported(tmp_path: Path, name: str) -> None:
    spec, bound, a, stamps, sim = _run(tmp_path, name)
    owner = sim.owner.copy()
    owner[1, 2] += 1
    report = compare_owners(spec, bound, a, stamps, owner)
    assert report.compared and not report.ok and report.mismatches == 1
    assert f"DISAGREE for 1 of {a.nnz} x {D} (nonzero, dense index) pairs" in report.text
    assert "index 2 atom 1:" in report.text


def test_missing_repeated_and_foreign_multiplies(tmp_path: Path) -> None:
    spec, bound, a, stamps, sim = _run(tmp_path, "spmm_n0_space")
    dropped = compare_owners(spec, bound, a, stamps[1:], sim.owner)
    assert not dropped.ok and "1 (nonzero, dense index) pairs never multiplied" in dropped.text
    repeated = compare_owners(spec, bound, a, (*stamps, stamps[0]), sim.owner)
    assert not repeated.ok and "1 (nonzero, dense index) pairs multiplied more than once" in (
        repeated.text
    )
    s0 = stamps[0]
    far = Stamp(s0.einsum, {**s0.indices, "n": D + 5}, s0.space, s0.time)  # n past N
    foreign = compare_owners(spec, bound, a, (*stamps, far), sim.owner)
    assert not foreign.ok and "1 reference multiplies of entries" in foreign.text


def test_a_flat_atom_major_trace_is_read_as_atoms_by_dense_indices(tmp_path: Path) -> None:
    spec, bound, a, stamps, sim = _run(tmp_path, "spmm_n_space_group")
    assert compare_owners(spec, bound, a, stamps, sim.owner.ravel()).ok
    short = compare_owners(spec, bound, a, stamps, sim.owner[:-1])
    assert not short.ok and f"for the {a.nnz} atoms x {D} dense indices" in short.text


def test_transposed_entries_are_those_of_a_transpose(tmp_path: Path) -> None:
    """A declared [K, M]: the reference's A[k, m] is entry (m, k) of the layout's A^T."""
    spec, bound, a, stamps, sim = _run(tmp_path, "spmm_transposed")
    report = compare_owners(spec, bound, a, stamps, sim.owner)
    assert report.ok and report.reference is not None
    view = report.reference.view
    assert (view.rows, view.cols) == (a.shape[1], a.shape[0])
    held = set(zip(view.entries.row.tolist(), view.entries.col.tolist(), strict=True))
    rows, cols = a.nonzero()
    assert held == set(zip(cols.tolist(), rows.tolist(), strict=True))
