"""The CPU simulation of the dense forms: values (SpMM ``A @ B``, transposed ``A^T @ B``,
SDDMM per atom), the owner of every (atom, dense index), a dense space rank in the
reference's stamps, and load balance counted in (atom, dense index) pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.errors import ValidationError
from teaal_loops.layouts import tile_view
from teaal_loops.lowering import lower, simulate
from teaal_loops.lowering.simulate import (
    atom_owners,
    operand_shape,
    operand_shapes,
    owners,
    sparse_operand,
    thread_of_space_stamp,
)
from teaal_loops.reference import run_reference
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec
from tests.conftest import REPO
from tests.lowering.dense_specs import PARAMS, SPMV_TRANSPOSED, write_spec
from tests.reference.helpers import random_csr


def _setup(tmp_path: Path, name: str, d: int, seed: int = 1, shape: tuple[int, int] = (13, 9)):
    spec = load_spec(write_spec(tmp_path, name))
    schedule = lower(spec, params=PARAMS[name])
    a = random_csr(*shape, 0.3, seed, empty_rows=2)
    bound = bind(schedule, operand_shape(schedule, a), params=PARAMS[name], dense_size=d)
    held = sparse_operand(schedule, a)
    rng = np.random.default_rng(seed)
    operands = [
        rng.uniform(0.5, 1.5, s) for s in operand_shapes(schedule, *held.shape, d)
    ]
    return spec, schedule, bound, a, held, operands


@pytest.mark.parametrize(
    "name", ["spmm_n0_space", "spmm_n_split_time", "spmm_n_space_group", "spmm_work"]
)
def test_spmm_values_are_the_product(tmp_path: Path, name: str) -> None:
    _, _, bound, a, _, (b,) = _setup(tmp_path, name, d=6)
    sim = simulate(bound, a, b)
    assert sim.y.shape == (13, 6)
    np.testing.assert_allclose(sim.y, a.toarray() @ b, rtol=1e-13, atol=1e-13)


def test_b_declared_n_by_k_is_read_transposed(tmp_path: Path) -> None:
    _, _, bound, a, _, (b,) = _setup(tmp_path, "spmm_b_nk", d=5)
    assert b.shape == (5, 9)  # the declaration's axis order: [N, K]
    np.testing.assert_allclose(simulate(bound, a, b).y, a.toarray() @ b.T, rtol=1e-13)


def test_transposed_spmm_multiplies_a_transpose(tmp_path: Path) -> None:
    _, schedule, bound, a, held, (b,) = _setup(tmp_path, "spmm_transposed", d=4)
    assert schedule.form.transposed and held.shape == (9, 13)  # A^T: M x K
    sim = simulate(bound, a, b)
    np.testing.assert_allclose(sim.y, a.toarray().T @ b, rtol=1e-13)
    # the owners are indexed by the atoms of the layout of A^T (CSC: by columns of A^T)
    assert sim.owner.shape == (tile_view(schedule.layout, held).num_atoms, 4)


def test_transposed_spmv_multiplies_a_transpose(tmp_path: Path) -> None:
    path = tmp_path / "spmv_t.yaml"
    path.write_text(SPMV_TRANSPOSED)
    schedule = lower(load_spec(path), params={"COLS": 2})
    a = random_csr(12, 7, 0.3, 5)  # declared [K, M]: K = 12, M = 7
    bound = bind(schedule, operand_shape(schedule, a), params={"COLS": 2})
    x = np.random.default_rng(5).uniform(-1, 1, 12)
    sim = simulate(bound, a, x)
    assert schedule.form.transposed and sim.owner.shape == (a.nnz,)
    np.testing.assert_allclose(sim.y, a.toarray().T @ x, rtol=1e-13)
    assert bound.matrix.rows == 12  # CSC of A^T: one tile per column of A^T (per k)


@pytest.mark.parametrize("name", ["sddmm_one", "sddmm_two"])
def test_sddmm_values_are_per_atom(tmp_path: Path, name: str) -> None:
    _, schedule, bound, c, _, (u, v) = _setup(tmp_path, name, d=3)
    sim = simulate(bound, c, u, v)
    view = tile_view(schedule.layout, c)
    dense = u @ v
    expected = np.zeros(view.num_atoms)
    expected[view.entries.atom] = view.entries.val * dense[view.entries.row, view.entries.col]
    assert sim.y.shape == (c.nnz,)
    np.testing.assert_allclose(sim.y, expected, rtol=1e-13)
    # K is summed by the atom's owner: every index of K has the same thread
    assert (sim.owner == sim.owner[:, :1]).all()
    assert sim.stats.atomics == 0 and sim.stats.split_rows == 0


def test_n0_in_space_gives_each_worker_ds_neighbouring_threads(tmp_path: Path) -> None:
    _, _, bound, a, _, (b,) = _setup(tmp_path, "spmm_n0_space", d=10)
    assert (bound.dense_space, bound.dense_time) == (4, 3)
    owner = simulate(bound, a, b).owner
    base = atom_owners(bound, tile_view("csr", a).tile_ptr)
    for n in range(10):  # worker w's slot n mod 4 is thread 4 w + n mod 4
        np.testing.assert_array_equal(owner[:, n], base * 4 + n % 4)
    assert owner.max() < bound.threads


def test_n_in_space_sits_between_the_group_and_its_lanes(tmp_path: Path) -> None:
    _, _, bound, a, _, (b,) = _setup(tmp_path, "spmm_n_space_group", d=3)
    owner = simulate(bound, a, b).owner
    base = atom_owners(bound, tile_view("csr", a).tile_ptr)
    g = bound.group_size
    assert (g, bound.dense_space) == (2, 3)
    np.testing.assert_array_equal(owner % g, (base % g)[:, None].repeat(3, axis=1))
    np.testing.assert_array_equal(owner // g % 3, np.broadcast_to(np.arange(3), owner.shape))
    np.testing.assert_array_equal(owner // g // 3, (base // g)[:, None].repeat(3, axis=1))


def test_spmv_keeps_one_owner_per_atom(tmp_path: Path) -> None:
    schedule = lower(load_spec(REPO / "specs" / "thread_mapped.yaml"))
    a = random_csr(10, 8, 0.4, 2)
    bound = bind(schedule, operand_shape(schedule, a))
    sim = simulate(bound, a, np.ones(8))
    assert sim.owner.shape == (a.nnz,) and sim.stats.dense_size is None
    assert "dense_indices_per_atom" not in sim.stats.as_dict()
    np.testing.assert_array_equal(owners(bound, tile_view("csr", a).tile_ptr), sim.owner)


@pytest.mark.parametrize(
    "name,d",
    [("spmm_n0_space", 10), ("spmm_n0_space", 3), ("spmm_n_space_group", 5),
     ("spmm_n_split_time", 5), ("spmm_work", 4), ("spmm_transposed", 3), ("sddmm_one", 4)],
)
def test_load_balance_counts_atom_dense_pairs(tmp_path: Path, name: str, d: int) -> None:
    """The counts derived from the atoms' owners equal a count over the thread array (D=3 with
    DS=4 leaves a slot of every worker idle)."""
    _, _, bound, a, _, operands = _setup(tmp_path, name, d=d)
    sim = simulate(bound, a, *operands)
    counts = np.bincount(sim.owner.ravel(), minlength=bound.threads)
    st = sim.stats
    assert st.threads == bound.threads == len(counts)
    assert st.max_atoms == counts.max()
    assert st.idle_threads == np.count_nonzero(counts == 0)
    assert st.mean_atoms == pytest.approx(sim.owner.size / bound.threads)
    assert st.dense_size == d and st.as_dict()["dense_indices_per_atom"] == d


def test_transposed_atomics_count_every_dense_index(tmp_path: Path) -> None:
    _, _, bound, a, _, (b,) = _setup(tmp_path, "spmm_transposed", d=3)
    assert simulate(bound, a, b).stats.atomics == a.nnz * 3  # CSC: every update is atomic


@pytest.mark.parametrize("name", ["spmm_n0_space", "spmm_n_space_group", "spmm_n_split_time"])
def test_space_stamps_name_the_simulated_owner(tmp_path: Path, name: str) -> None:
    """Every reference multiply (m, k, n), its space stamp mapped to a thread, is owned by the
    simulation's owner of (atom of (m, k), n): N0 and N are read as coord mod DS."""
    spec, schedule, bound, a, _, (b,) = _setup(tmp_path, name, d=7, shape=(9, 7))
    owner = simulate(bound, a, b).owner
    ref = run_reference(spec, {"A": a, "B": b}, params=dict(bound.params), engine="builtin")
    view = tile_view(schedule.layout, a)
    atom = {(int(r), int(c)): int(t) for t, r, c in
            zip(view.entries.atom, view.entries.row, view.entries.col, strict=True)}
    assert len(ref.stamps) == a.nnz * 7
    for st in ref.stamps:
        a_id = atom[(st.indices["m"], st.indices["k"])]
        assert thread_of_space_stamp(bound, st.space_pairs()) == owner[a_id, st.indices["n"]]


def test_dense_slot_is_coordinate_mod_ds(tmp_path: Path) -> None:
    _, _, bound, _, _, _ = _setup(tmp_path, "spmm_n0_space", d=10)
    # space [M0, N0]: tile 4 is thread 4 mod 3 = 1 of the SpMV schedule; n = 6 is slot 2
    assert thread_of_space_stamp(bound, [(1, 4), (2, 6)]) == 1 * 4 + 2
    with pytest.raises(ValidationError, match=r"has 2 \(M0, N0\)"):
        thread_of_space_stamp(bound, [(1, 4)])


def test_wrong_operands_are_one_error(tmp_path: Path) -> None:
    _, _, bound, a, _, (b,) = _setup(tmp_path, "spmm_n0_space", d=6)
    with pytest.raises(ValidationError, match=r"B has shape \(9, 5\).*\(9, 6\)"):
        simulate(bound, a, b[:, :5])
    with pytest.raises(ValidationError, match="takes 1 dense operand"):
        simulate(bound, a, b, b)
    _, _, sbound, c, _, (u, _v) = _setup(tmp_path, "sddmm_one", d=2)
    with pytest.raises(ValidationError, match="takes 2 dense operand"):
        simulate(sbound, c, u)


def test_a_larger_matrix_stays_vectorised(tmp_path: Path) -> None:
    """10,000 nonzeros x 16 indices of N: values and owners without Python loops."""
    a = sp.random(2000, 2000, density=0.0025, random_state=3, format="csr")
    schedule = lower(load_spec(write_spec(tmp_path, "spmm_n0_space")), params=PARAMS[
        "spmm_n0_space"])
    bound = bind(schedule, operand_shape(schedule, a), params=PARAMS["spmm_n0_space"],
                 dense_size=16)
    b = np.random.default_rng(0).uniform(-1, 1, (2000, 16))
    sim = simulate(bound, a, b)
    np.testing.assert_allclose(sim.y, a @ b, rtol=1e-12, atol=1e-12)
    assert sim.owner.shape == (a.nnz, 16) and sim.owner.max() < bound.threads
