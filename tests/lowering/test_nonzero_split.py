"""Nonzero splitting (specs/spmm/nonzero_split.yaml): work-oriented SpMM with the dense rank in
space. Lowering accepts it on work-oriented and refuses it on merge-path (pointing to
work-oriented); binding gives each chunk ``DS = min(S, N)`` threads and the launch
``workers * DS`` threads; the simulation's owners follow ``thread = worker * DS + n mod DS``;
explain says so."""

from __future__ import annotations

import json

import numpy as np
import pytest

from teaal_loops.cli import main
from teaal_loops.errors import UnsupportedMappingError
from teaal_loops.ir.model import Combine, GpuLevel
from teaal_loops.layouts import tile_view
from teaal_loops.lowering import lower, simulate
from teaal_loops.lowering.simulate import operand_shape
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec, load_spec_string
from teaal_loops.types import ceil_div
from tests.conftest import REPO
from tests.lowering.dense_specs import SPECS
from tests.reference.helpers import random_csr

LIBRARY = REPO / "specs" / "spmm" / "nonzero_split.yaml"
WORK_N0 = SPECS["spmm_work_n0_space"]
MERGE_N0 = WORK_N0.replace("uniform_occupancy(A.W)", "x_merge_path(A.I)")
WORK_N = WORK_N0.replace("      N: [uniform_shape(S)]\n", "").replace(
    "[MK1, N1, N0, MK0]", "[MK1, N, MK0]").replace("[MK1, N0]", "[MK1, N]").replace(
    "[N1, MK0]", "[MK0]")


def test_the_library_spec_is_work_oriented_with_n0_in_space() -> None:
    schedule = lower(load_spec(LIBRARY))
    assert schedule.kind == "work_oriented" and schedule.combine is Combine.ATOMIC
    dense = schedule.form.dense
    assert dense is not None and (dense.space, dense.time, dense.split) == ("N0", "N1", "N_LANES")
    levels = {r.name: r.level for r in schedule.ranks}
    assert levels == {"MK1": GpuLevel.WORKER, "N1": GpuLevel.LOOP, "N0": GpuLevel.DENSE,
                      "MK0": GpuLevel.LOOP}
    assert schedule.param_value("NNZ_PER_WORKER") == 32
    assert schedule.param_value("N_LANES") == 32


@pytest.mark.parametrize("n,ds,dt", [(1, 1, 1), (8, 8, 1), (32, 32, 1), (33, 32, 2),
                                     (128, 32, 4)])
def test_ds_is_the_lanes_or_the_whole_rank_and_the_launch_has_workers_times_ds(
    n: int, ds: int, dt: int
) -> None:
    """N_LANES = 32: N = 8 keeps 8 threads a chunk, N = 128 32 threads stepping 4 times."""
    schedule = lower(load_spec(LIBRARY))
    a = random_csr(300, 200, 0.05, 4)
    bound = bind(schedule, operand_shape(schedule, a), dense_size=n)
    assert (bound.dense_space, bound.dense_time) == (ds, dt)
    assert bound.workers == ceil_div(a.nnz, 32) and bound.params["N_LANES"] == 32
    assert bound.threads == bound.workers * ds
    assert bound.launch.blocks == ceil_div(bound.workers * ds, bound.launch.threads_per_block)


@pytest.mark.parametrize("n", [3, 7])
def test_owners_are_the_chunk_times_ds_plus_the_slot(n: int) -> None:
    """W = 4, S = 3: atom a of chunk a // 4, column j, is thread (a // 4) * DS + j mod DS, and
    every thread of the launch below workers * DS owns something."""
    schedule = lower(load_spec_string(WORK_N0), params={"W": 4, "S": 3})
    a = random_csr(40, 30, 0.2, 6, empty_rows=3)
    bound = bind(schedule, operand_shape(schedule, a), params={"W": 4, "S": 3}, dense_size=n)
    b = np.random.default_rng(n).uniform(-1, 1, (30, n))
    sim = simulate(bound, a, b)
    np.testing.assert_allclose(sim.y, a @ b, rtol=1e-13, atol=1e-13)
    atom = np.arange(tile_view("csr", a).num_atoms)[:, None]
    expected = (atom // 4) * 3 + np.arange(n)[None, :] % 3
    np.testing.assert_array_equal(sim.owner, expected)
    assert np.array_equal(np.unique(sim.owner), np.arange(bound.threads))


def test_n_unsplit_in_space_is_accepted_on_work_oriented() -> None:
    schedule = lower(load_spec_string(WORK_N), params={"W": 5})
    assert schedule.kind == "work_oriented"
    assert schedule.form.dense is not None and schedule.form.dense.space == "N"
    a = random_csr(20, 20, 0.2, 1)
    bound = bind(schedule, operand_shape(schedule, a), params={"W": 5}, dense_size=6)
    assert (bound.dense_space, bound.dense_time) == (6, 1)
    owner = simulate(bound, a, np.ones((20, 6))).owner
    np.testing.assert_array_equal(owner[:, 5], np.arange(a.nnz) // 5 * 6 + 5)


@pytest.mark.parametrize("text", [MERGE_N0, WORK_N.replace("uniform_occupancy(A.W)",
                                                             "x_merge_path(A.I)")])
def test_merge_path_refuses_the_dense_rank_in_space_and_points_to_work_oriented(
    text: str,
) -> None:
    with pytest.raises(UnsupportedMappingError) as err:
        lower(load_spec_string(text))
    message = str(err.value)
    assert "is in space on merge-path" in message
    assert "uniform_occupancy(A.W)" in message and "nonzero_split.yaml" in message
    assert err.value.key_path == "mapping.spacetime.Z.space"


def test_merge_path_with_n_in_time_still_lowers() -> None:
    text = MERGE_N0.replace("[MK1, N0]", "[MK1]").replace("[N1, MK0]", "[N1, N0, MK0]")
    assert lower(load_spec_string(text)).kind == "merge_path"


def test_explain_shows_the_chunks_the_dense_slots_and_the_balance(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["explain", str(LIBRARY), "--synthetic", "longrows:rows=2000,nnz=40000,seed=3",
            "--rank", "N=8"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "schedule:  work_oriented" in text
    assert "N0   space -> dense slot" in text
    assert "DS = 8 thread(s) for each worker" in text
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    lb = out["load_balance"]
    # every thread holds at most one chunk of 32 nonzeros, for its one column: even on
    # longrows, whose few rows hold most nonzeros
    assert lb["max_atoms_per_thread"] <= 32
    assert lb["threads"] == -(-out["matrix"]["nnz"] // 32) * 8
