"""Value comparison rules, engine selection and input checking."""

from __future__ import annotations

import numpy as np
import pytest

import teaal_loops.reference.execute as execute
from teaal_loops.errors import MatrixError, TeaalLoopsError
from teaal_loops.reference import compare_arrays, run_reference
from teaal_loops.spec import load_spec
from tests.conftest import REPO
from tests.reference.helpers import dense_vector, random_csr


def test_integers_compare_exactly() -> None:
    a = np.array([1, 2, 3], dtype=np.int64)
    assert compare_arrays(a, a.copy()).ok
    off = compare_arrays(a, np.array([1, 2, 4]))
    assert not off.ok and off.exact and off.mismatches == 1 and off.worst[0][0] == (2,)


def test_reals_compare_within_tolerances_by_dtype() -> None:
    ref = np.array([1.0, 100.0, 0.0])
    assert compare_arrays(ref, ref * (1 + 1e-12)).ok
    assert not compare_arrays(ref, ref + [0, 1e-6, 0]).ok  # float64: tight
    f32 = (ref + [0, 0.05, 0.005]).astype(np.float32)  # within atol 1e-2 + rtol 1e-3 * |y|
    assert compare_arrays(ref, f32).ok
    bad = compare_arrays(ref, (ref + [0.02, 0, 0]).astype(np.float32))
    assert not bad.ok and "DISAGREE at 1 of 3 entries" in bad.summary()
    assert not compare_arrays(ref, np.array([1.0, np.nan, 0.0])).ok
    assert "shapes differ" in compare_arrays(ref, ref[:2]).summary()


def test_auto_uses_builtin_when_fibertree_is_absent(monkeypatch) -> None:
    monkeypatch.setattr(execute, "_FIBERTREE", None)
    monkeypatch.setattr(
        execute, "_FIBERTREE_ERROR", "ModuleNotFoundError: No module named 'fibertree'"
    )
    spec = load_spec(REPO / "specs" / "thread_mapped.yaml")
    a = random_csr(5, 4, 0.5, 0)
    tensors = {"A": a, "B": dense_vector(4, 0)}
    params = {"NUM_TILES": 4, "NUM_THREADS": 2}
    assert run_reference(spec, tensors, params=params, engine="auto").engine == "builtin"
    with pytest.raises(TeaalLoopsError, match="fibertree is not importable"):
        run_reference(spec, tensors, params=params, engine="fibertree")
    with pytest.raises(TeaalLoopsError, match="unknown reference engine"):
        run_reference(spec, tensors, params=params, engine="numpy")


def test_inputs_are_checked() -> None:
    spec = load_spec(REPO / "specs" / "thread_mapped.yaml")
    params = {"NUM_TILES": 4, "NUM_THREADS": 2}
    a = random_csr(5, 4, 0.5, 0)
    with pytest.raises(MatrixError, match="needs B"):
        run_reference(spec, {"A": a}, params=params, engine="builtin")
    with pytest.raises(MatrixError, match="C: not an input"):
        run_reference(spec, {"A": a, "B": np.ones(4), "C": 1}, params=params, engine="builtin")
    with pytest.raises(MatrixError, match="rank K has size 4 in A but 5 in B"):
        run_reference(spec, {"A": a, "B": np.ones(5)}, params=params, engine="builtin")
    with pytest.raises(MatrixError, match="2-dimensional array for a tensor of 1 ranks"):
        run_reference(spec, {"A": a, "B": np.ones((4, 1))}, params=params, engine="builtin")
