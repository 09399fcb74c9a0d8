"""NaN and infinities are values: ``check``, ``--validate`` and ``--rigorous`` compare them by
class at the same position (NaN with NaN, an infinity with the same infinity agree; anything
else disagrees, naming the position), with error norms over the finite entries and a Wilkinson
bound that never becomes NaN."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.cli import main
from teaal_loops.reference import compare_arrays
from teaal_loops.runtime import validation
from tests.conftest import REPO

NAN, INF = float("nan"), float("inf")


def test_same_class_at_the_same_position_agrees() -> None:
    expected = np.array([1.0, NAN, INF, -INF, 2.0])
    got = np.array([1.0 + 1e-13, NAN, INF, -INF, 2.0])
    cmp = compare_arrays(expected, got)
    assert cmp.ok and cmp.mismatches == 0
    assert cmp.nonfinite == 3 and cmp.class_mismatches == 0
    assert cmp.max_abs_error == pytest.approx(1e-13, rel=1e-3)  # finite entries only, not NaN
    assert cmp.summary().startswith("agree ")


@pytest.mark.parametrize(
    "got_value",
    [1.0, NAN, -INF, INF],
    ids=["finite", "nan", "minus-inf", "plus-inf"],
)
@pytest.mark.parametrize(
    "expected_value", [1.0, NAN, -INF, INF], ids=["finite", "nan", "minus-inf", "plus-inf"]
)
def test_every_pair_of_classes(expected_value, got_value) -> None:
    expected = np.array([3.0, expected_value, 5.0])
    got = np.array([3.0, got_value, 5.0])
    cmp = compare_arrays(expected, got)
    same = (np.isnan(expected_value) and np.isnan(got_value)) or expected_value == got_value
    assert cmp.ok == same
    assert cmp.max_abs_error == 0.0  # the finite entries are equal
    if not same:
        assert cmp.mismatches == 1 and cmp.worst[0][0] == (1,)
        assert "DISAGREE at 1 of 3 entries" in cmp.summary()
        assert f"[1]: expected {expected_value:.6g}, got {got_value:.6g}" in cmp.summary()


def test_a_class_mismatch_is_shown_before_larger_finite_errors() -> None:
    expected = np.array([0.0, 1.0, INF])
    got = np.array([100.0, 1.0, 7.0])
    cmp = compare_arrays(expected, got)
    assert not cmp.ok and cmp.mismatches == 2 and cmp.class_mismatches == 1
    assert [w[0] for w in cmp.worst] == [(2,), (0,)]
    assert cmp.max_abs_error == 100.0


def nonfinite_matrix_file(tmp_path: Path) -> Path:
    path = tmp_path / "nonfinite.mtx"
    path.write_text(
        "%%MatrixMarket matrix coordinate real general\n"
        "6 5 10\n"
        "1 1 1.0\n1 2 -inf\n"  # row 0: -inf (times x > 0 or < 0: an infinity)
        "2 2 nan\n2 3 2.0\n"  # row 1: NaN
        "3 3 inf\n"  # row 2: +inf (a finite literal past float64, 1e400, is refused)
        "4 1 2.0\n4 4 3.0\n"  # row 3: finite
        "5 5 inf\n5 1 -inf\n"  # row 4: inf - inf: NaN
        "6 5 0.5\n"
    )
    return path


@pytest.mark.parametrize("name", ["thread_mapped", "group_mapped", "work_oriented", "merge_path"])
def test_check_agrees_on_a_matrix_holding_nan_and_inf(tmp_path, capsys, name) -> None:
    path = nonfinite_matrix_file(tmp_path)
    rc = main(["check", str(REPO / "specs" / f"{name}.yaml"), "-m", str(path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "result: AGREE" in out and "NaN/Inf entries, 0 of a different class" in out


def test_check_disagrees_where_a_view_loses_an_infinity(tmp_path, capsys, monkeypatch) -> None:
    import teaal_loops.lowering as ir

    real = ir.simulate

    def finite_row_2(bound, A, x):  # a simulation whose row 2 is finite, not +-inf
        sim = real(bound, A, x)
        y = sim.y.copy()
        y[2] = 1.0
        return type(sim)(y=y, owner=sim.owner, stats=sim.stats, bound=sim.bound)

    monkeypatch.setattr(ir, "simulate", finite_row_2)
    path = nonfinite_matrix_file(tmp_path)
    rc = main(["check", str(REPO / "specs" / "thread_mapped.yaml"), "-m", str(path)])
    out = capsys.readouterr().out
    assert rc == 1 and "DISAGREE at 1 of 6 entries" in out
    assert "[2]: expected inf, got 1" in out or "[2]: expected -inf, got 1" in out


def nonfinite_matrix() -> tuple[sp.csr_matrix, np.ndarray]:
    dense = np.array(
        [
            [1.0, -INF, 0.0, 0.0],
            [0.0, NAN, 2.0, 0.0],
            [0.0, 0.0, INF, 0.0],
            [2.0, 0.0, 0.0, 3.0],
            [INF, 0.0, 0.0, -INF],
        ]
    )
    x = np.array([0.5, -0.25, 1.5, 1.0], dtype=np.float32)
    return sp.csr_matrix(dense), x


def test_validate_counts_only_class_changes_and_real_misses() -> None:
    ref = np.array([1.0, NAN, INF, -INF, 5.0])
    assert validation.count_errors(ref.copy(), ref) == 0
    assert validation.count_errors(np.array([1.0, NAN, -INF, -INF, 5.0]), ref) == 1
    assert validation.count_errors(np.array([1.0, 0.0, INF, NAN, 5.3]), ref) == 3


def test_wilkinson_bound_is_finite_next_to_nan_and_inf() -> None:
    A, x = nonfinite_matrix()
    bound = validation.wilkinson_bound(A, x, "float32")
    assert np.isfinite(bound).all()
    # row 3 holds finite products only: the usual bound
    assert bound[3] == pytest.approx(max(1e-3, 8 * 2 * 2.0**-24 * (2 * 0.5 + 3 * 1.0)))


def test_rigorous_treats_nan_and_inf_as_values() -> None:
    A, x = nonfinite_matrix()
    with np.errstate(invalid="ignore", over="ignore"):
        good = (A.astype(np.float32) @ x).astype(np.float32)
    assert np.isnan(good[1]) and np.isinf(good[0]) and np.isnan(good[4])  # the case at hand
    report = validation.rigorous(A, x, good, "float32")
    assert report.verdict == "NOT_A_BUG" and report.gpu_overruns == 0
    assert report.baseline_overruns == 0 and report.naive_mismatches == 0
    assert np.isfinite(report.max_abs_error) and np.isfinite(report.max_rel_error)
    bad = good.copy()
    bad[2] = 1.0  # +inf lost
    bad[3] += 1.0  # a finite miss
    report = validation.rigorous(A, x, bad, "float32")
    assert report.gpu_overruns == 2 and report.verdict == "POTENTIAL_BUG"
    assert report.max_abs_error == pytest.approx(1.0)  # over the finite entries
