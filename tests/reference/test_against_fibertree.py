"""The same HiFiber text on real fibertree and on the built-in fibers: equal outputs and equal
stamps (positions and coordinates), for our specs, the loops corpus and the TeAAL compiler's
corpus. Skipped where fibertree is not installed (the project never depends on it)."""

from __future__ import annotations

import numpy as np
import pytest

from teaal_loops.errors import TeaalLoopsError
from teaal_loops.reference import run_reference
from teaal_loops.reference.plan import plan_spec
from teaal_loops.spec import load_spec
from tests.conftest import require_corpus
from tests.reference.helpers import SPECS, compiler_corpus, loops_corpus, random_csr
from tests.reference.test_values import compiler_inputs, spmv_tensors

pytest.importorskip("fibertree", reason="fibertree is not installed (optional)")


def both(spec, tensors, params):
    ft = run_reference(spec, tensors, params=params, engine="fibertree")
    bi = run_reference(spec, tensors, params=params, engine="builtin")
    assert ft.engine == "fibertree" and bi.engine == "builtin"
    assert ft.source == bi.source
    for name in ft.outputs:
        assert np.array_equal(ft.outputs[name], bi.outputs[name]), name
    assert ft.stamps == bi.stamps


@pytest.mark.parametrize("seed", range(4))
def test_spmv_specs_and_loops_corpus(seed) -> None:
    require_corpus("teaal-specs", "loops")
    rng = np.random.default_rng(seed)
    for path in SPECS + loops_corpus():
        spec = load_spec(path)
        a = random_csr(11, 8, 0.3, seed, empty_rows=2, integral=bool(seed % 2))
        tensors = spmv_tensors(spec, a, seed, integral=bool(seed % 2))
        params = {p: int(rng.integers(1, 6)) for p in spec.parameters}  # multiples or not
        both(spec, tensors, params)


@pytest.mark.parametrize("seed", range(2))
def test_compiler_corpus(seed) -> None:
    require_corpus("teaal-specs", "teaal-compiler")
    for path in compiler_corpus():
        try:
            spec = load_spec(path)
            plans = plan_spec(spec)
        except TeaalLoopsError:
            continue
        both(spec, compiler_inputs(spec, plans, seed), {p: 2 + seed for p in spec.parameters})
