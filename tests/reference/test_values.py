"""The reference computes the einsums: against SciPy for our specs and the loops corpus, against
the NumPy oracle (and for SpMV, a hand-written loop) for the TeAAL compiler's corpus."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.errors import TeaalLoopsError, UnsupportedMappingError
from teaal_loops.reference import compare_arrays, run_reference
from teaal_loops.reference.oracle import numpy_oracle
from teaal_loops.reference.plan import plan_spec
from teaal_loops.spec import load_spec
from teaal_loops.spec.expressions import expr_accesses
from tests.conftest import require_corpus
from tests.reference.helpers import SPECS, compiler_corpus, dense_vector, loops_corpus, random_csr


def spmv_tensors(spec, a, seed, integral=False):
    cols = a.shape[1]
    if len(spec.declaration["B"]) == 1:
        return {"A": a, "B": dense_vector(cols, seed, integral=integral)}
    rng = np.random.default_rng(seed)
    b = rng.integers(1, 5, size=(cols, 3)) if integral else rng.random((cols, 3)) + 0.5
    return {"A": a, "B": b}


def small_params(spec, seed):
    rng = np.random.default_rng(seed)
    return {p: int(rng.integers(1, 6)) for p in spec.parameters}


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
@pytest.mark.parametrize("seed", range(3))
def test_our_specs_compute_spmv(path, seed) -> None:
    spec = load_spec(path)
    a = random_csr(17, 11, 0.3, seed, empty_rows=3)
    tensors = spmv_tensors(spec, a, seed)
    result = run_reference(spec, tensors, params=small_params(spec, seed), engine="builtin")
    assert result.engine == "builtin"
    cmp = compare_arrays(a @ tensors["B"], result.outputs["Z"], rtol=1e-12, atol=1e-12)
    assert cmp.ok, cmp.summary()
    assert len(result.stamps) == a.nnz  # one multiply per nonzero (x has no zeros)


def loops_ids(p):
    return p.stem


@pytest.mark.parametrize("seed", range(2))
def test_every_loops_corpus_spec(seed) -> None:
    require_corpus("teaal-specs", "loops")
    paths = loops_corpus()
    assert len(paths) >= 27
    for path in paths:
        spec = load_spec(path)
        integral = bool(seed % 2)
        a = random_csr(13, 9, 0.35, seed, empty_rows=2, integral=integral)
        tensors = spmv_tensors(spec, a, seed, integral=integral)
        result = run_reference(spec, tensors, params=small_params(spec, seed), engine="builtin")
        expect = a @ tensors["B"]
        got = result.outputs["Z"]
        if integral:
            assert got.dtype == np.int64 and np.array_equal(got, expect), path.name
        else:
            assert compare_arrays(expect, got).ok, path.name
        if "T" in result.outputs:  # spgemm's partial products T[k, m, n] = A[m, k] B[k, n]
            dense_a = a.toarray()
            t = np.einsum("mk,kn->kmn", dense_a, tensors["B"])
            assert compare_arrays(t, result.outputs["T"]).ok, path.name


def compiler_inputs(spec, plans, seed):
    rng = np.random.default_rng(seed)
    produced = {e.name for e in spec.einsums}
    sizes: dict[str, int] = {}
    tensors = {}
    for e in spec.einsums:
        for acc in expr_accesses(e.expr):
            t = acc.tensor
            if t in produced or t in tensors:
                continue
            shape = [sizes.setdefault(r, int(rng.integers(1, 6))) for r in spec.declaration[t]]
            arr = rng.random(shape)
            arr[arr < 0.4] = 0
            tensors[t] = (arr * 10).astype(np.int64) if seed % 2 else arr
    for s in {s for p in plans for s in p.scalars}:
        tensors[s] = 3 if seed % 2 else 1.5
    return tensors


REFUSED = {
    "conv2d": "index arithmetic",
    "demo": "several levels with occupancy",
    "example7": "output of two einsums",
}


@pytest.mark.parametrize("seed", range(3))
def test_compiler_corpus_against_numpy(seed) -> None:
    require_corpus("teaal-specs", "teaal-compiler")
    checked = []
    for path in compiler_corpus():
        try:
            spec = load_spec(path)
        except TeaalLoopsError:
            continue  # not a valid spec (no einsum section, misspelt keys): the parser's job
        if path.stem in REFUSED:
            with pytest.raises(UnsupportedMappingError, match=REFUSED[path.stem]):
                plan_spec(spec)
            continue
        plans = plan_spec(spec)
        tensors = compiler_inputs(spec, plans, seed)
        params = {p: 2 + seed for p in spec.parameters}
        result = run_reference(spec, tensors, params=params, engine="builtin")
        expect = numpy_oracle(spec, tensors)
        for name, value in expect.items():
            cmp = compare_arrays(value, result.outputs[name])
            assert cmp.ok, f"{path.name} {name}: {cmp.summary()}"
        checked.append(path.stem)
    for needed in (
        "gemv",
        "spmv",
        "dotprod",
        "outerprod",
        "gemm",
        "ttv",
        "ttm",
        "mttkrp",
        "sddmm",
        "spmm",
        "sigma",
        "extensor",
        "gamma",
        "outerspace",
        "nrm_sq",
    ):
        assert needed in checked


def test_spmv_by_hand_with_csc_storage_and_integer_values() -> None:
    """A CSC-stored A (rank order [K, M]) is swizzled by the program; integers stay exact."""
    text = """
einsum:
  declaration: {A: [M, K], B: [K], Z: [M]}
  expressions: ["Z[m] = A[m, k] * B[k]"]
mapping:
  rank-order: {A: [K, M]}
  partitioning: {Z: {M: [uniform_shape(4)]}}
  loop-order: {Z: [M1, M0, K]}
"""
    from teaal_loops.spec import load_spec_string

    spec = load_spec_string(text)
    a = random_csr(10, 7, 0.4, 5, integral=True)
    x = dense_vector(7, 5, integral=True)
    result = run_reference(spec, {"A": sp.csc_matrix(a), "B": x}, engine="builtin")
    expect = [sum(int(a[m, k]) * int(x[k]) for k in range(7)) for m in range(10)]
    assert result.outputs["Z"].tolist() == expect
    assert "swizzleRanks" in result.source


def test_explicit_zeros_are_absent_like_in_fibertree() -> None:
    spec = load_spec(SPECS[0])
    a = random_csr(6, 5, 0.6, 1)
    a.data[0] = 0.0  # a stored zero
    x = dense_vector(5, 1)
    result = run_reference(spec, {"A": a, "B": x}, params=small_params(spec, 1), engine="builtin")
    assert len(result.stamps) == a.nnz - 1
    assert compare_arrays(a @ x, result.outputs["Z"]).ok
