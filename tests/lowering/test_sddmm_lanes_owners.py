"""SDDMM with K0 in space: the simulation's owner of every (atom, k) is the thread
``((o // G) * S + k % S) * G + o % G`` (``o`` the atom's SpMV owner), and the HiFiber
reference's space stamps map to the same threads (``check --against simulate``). Also the
space order of a stamp when the loop order lists the lanes before the dense rank (SpMM too)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from teaal_loops.cli import main
from teaal_loops.layouts import tile_view
from teaal_loops.lowering import simulate
from teaal_loops.lowering.simulate import atom_owners, thread_of_space_stamp
from teaal_loops.reference import run_reference
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec_string
from tests.codegen.sddmm_lanes_specs import LANES_SPEC, lanes_schedule, lanes_spec_text
from tests.conftest import require_corpus
from tests.reference.helpers import random_csr

SYNTH = "emptyrows:rows=40,cols=30,nnz=200,seed=3"


@pytest.mark.parametrize(
    ("kind", "params"),
    [("thread_mapped", {"S": 4, "T": 2}), ("thread_mapped", {"S": 32}),
     ("group_mapped", {"G": 4, "S": 8}), ("group_mapped", {"G": 2, "S": 16})],
)
def test_simulated_owners_are_the_lane_formula(kind: str, params: dict[str, int]) -> None:
    schedule = lanes_schedule(kind, params)
    c = random_csr(17, 12, 0.3, 4, empty_rows=3)
    view = tile_view("csr", c)
    bound = bind(schedule, view.shape, None, params, dense_size=11)
    sim = simulate(bound, c, np.ones((17, 11)), np.ones((11, 12)))
    o = atom_owners(bound, view.tile_ptr)[:, None]
    g, s = bound.group_size, bound.dense_space
    k = np.arange(11)[None, :]
    np.testing.assert_array_equal(sim.owner, ((o // g) * s + k % s) * g + o % g)
    # every thread of a worker's segment owns the pairs k = k0 mod S, and nothing else
    assert sim.owner.max() < bound.threads
    np.testing.assert_array_equal(sim.owner // g % s, np.broadcast_to(k % s, sim.owner.shape))


def test_a_k0_stamp_names_the_slot_k_mod_s() -> None:
    """Space [M, K0, N0] (group-mapped): (pos, coord) pairs in the spec's space order."""
    schedule = lanes_schedule("group_mapped", {"G": 4, "S": 8})
    bound = bind(schedule, tile_view("csr", random_csr(9, 9, 0.4, 1)).shape, None, None,
                 dense_size=20)
    for k in (0, 5, 8, 19):
        # row 3, k0 = k mod 8 (its coordinate is k), nonzero at position 2 of the row: lane 2
        thread = thread_of_space_stamp(bound, [(3, 3), (k % 8, k), (2, 7)])
        assert thread == (3 * 8 + k % 8) * 4 + 2


@pytest.mark.parametrize(
    ("kind", "params", "rank"),
    [("thread_mapped", {"S": 4, "T": 2}, 6), ("thread_mapped", {"S": 8}, 19),
     ("group_mapped", {"G": 4, "S": 8}, 19), ("group_mapped", {"G": 2, "S": 16}, 16),
     ("group_mapped", {"G": 8}, 5)],
)
def test_check_agrees_with_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, params: dict[str, int],
    rank: int,
) -> None:
    spec = tmp_path / f"{kind}.yaml"
    spec.write_text(lanes_spec_text(kind))
    args = [a for p, v in params.items() for a in ("--param", f"{p}={v}")]
    rc = main(["check", str(spec), "--synthetic", SYNTH, "--rank", f"K={rank}", *args,
               "--reference", "builtin"])
    out = capsys.readouterr().out
    assert rc == 0, out
    nnz = int(out.split(" nonzeros)")[0].rsplit(", ", 1)[1])
    assert f"owners (CPU simulation vs reference): agree for all {nnz} nonzeros x {rank}" in out


def test_the_library_spec_agrees_on_a_real_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    west = require_corpus("matrices", "west0067.mtx.gz")
    rc = main(["check", str(LANES_SPEC), "-m", str(west), "--rank", "K=32",
               "--reference", "builtin"])
    out = capsys.readouterr().out
    assert rc == 0 and "agree for all 294 nonzeros x 32 dense indices" in out, out


def test_reference_threads_of_k0_follow_the_space_order_not_the_loop_order() -> None:
    """The loop order [M, N1, N0, K1, K0] lists N0 before K0, the space [M, K0, N0] after it:
    each stamp's thread uses K0 as the slot and N0 as the lane."""
    spec = load_spec_string(lanes_spec_text("group_mapped"), source="g.yaml")
    schedule = lanes_schedule("group_mapped", {"G": 2, "S": 4})
    c = random_csr(6, 8, 0.5, 2, empty_rows=1)
    bound = bind(schedule, tile_view("csr", c).shape, None, None, dense_size=5)
    rng = np.random.default_rng(0)
    u, v = rng.uniform(0.5, 1.5, (6, 5)), rng.uniform(0.5, 1.5, (5, 8))
    result = run_reference(spec, {"C": c, "A": u, "B": v}, params={"G": 2, "S": 4},
                           engine="builtin")
    for st in result.stamps:
        m, n, k = st.indices["m"], st.indices["n"], st.indices["k"]
        position = int(np.searchsorted(c.indices[c.indptr[m]:c.indptr[m + 1]], n))
        want = (m * 4 + k % 4) * 2 + position % 2
        assert thread_of_space_stamp(bound, st.space_pairs()) == want


SPMM_LANES_FIRST = """
einsum:
  declaration:
    A: [M, K]
    B: [K, N]
    Z: [M, N]
  expressions:
    - Z[m, n] = A[m, k] * B[k, n]
mapping:
  partitioning:
    Z:
      K: [uniform_occupancy(A.G)]
  loop-order:
    Z: [M, K1, K0, N]
  spacetime:
    Z:
      space: [M, N, K0]
      time: [K1]
"""


def test_spmm_with_the_lanes_before_n_in_the_loop_order_agrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before the space order was rebuilt, K0 (the lane) was read as N's slot here."""
    spec = tmp_path / "spmm.yaml"
    spec.write_text(SPMM_LANES_FIRST)
    rc = main(["check", str(spec), "--synthetic", SYNTH, "--rank", "N=3", "--param", "G=2",
               "--reference", "builtin"])
    out = capsys.readouterr().out
    assert rc == 0 and "owners (CPU simulation vs reference): agree for all" in out, out
