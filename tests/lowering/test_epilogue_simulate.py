"""The CPU simulation of a scalar epilogue: ``y = alpha * T1 + beta * C`` in float64 against
SciPy, owners the product's (the epilogue changes no owner), and every input error one line
naming the operand or scalar."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.errors import ValidationError
from teaal_loops.lowering import lower, simulate
from teaal_loops.lowering.simulate import operand_shape
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec, load_spec_string
from tests.conftest import require_corpus
from tests.lowering.epilogue_specs import PARAMS, SPECS

A = sp.random(23, 17, density=0.25, format="csr", random_state=2)
RNG = np.random.default_rng(5)


def _inputs(schedule: Any, A: Any, D: int = 4) -> tuple[Any, list[Any], Any]:
    bound = bind(schedule, operand_shape(schedule, A), dense_size=D)
    op = A.T.tocsr() if schedule.form.transposed else A
    rows, cols = op.shape
    spmm = schedule.form.kind == "spmm"
    operand = RNG.uniform(-1, 1, (cols, D) if spmm else cols)
    C = RNG.uniform(-1, 1, (rows, D) if spmm else rows)
    return bound, [operand, C] if schedule.form.epilogue.addend else [operand], op


@pytest.mark.parametrize("name", sorted(SPECS))
def test_values_are_the_epilogue_of_the_product(name: str) -> None:
    schedule = lower(load_spec_string(SPECS[name]), params=PARAMS[name])
    e = schedule.form.epilogue
    assert e is not None
    bound, operands, op = _inputs(schedule, A)
    scalars = {n: v for n, v in (("a", 1.75), ("b", -0.5)) if n in e.scalars}
    sim = simulate(bound, A, *operands, scalars=scalars)
    expected = (1.75 if e.alpha else 1.0) * (op @ operands[0])
    if e.addend:
        expected = expected + (-0.5 if e.beta else 1.0) * operands[1]
    np.testing.assert_allclose(sim.y, expected, rtol=1e-13, atol=1e-13)
    plain = dataclasses.replace(schedule, form=dataclasses.replace(schedule.form, epilogue=None))
    alone = simulate(dataclasses.replace(bound, schedule=plain), A, operands[0])
    np.testing.assert_array_equal(sim.owner, alone.owner)  # the product's owners


@pytest.mark.parametrize("name", ["gemv", "gemm"])
def test_teaal_specs_simulate_the_transposed_product_and_epilogue(name: str) -> None:
    schedule = lower(load_spec(require_corpus("teaal-specs", "teaal-compiler", f"{name}.yaml")))
    bound, operands, op = _inputs(schedule, A)
    sim = simulate(bound, A, *operands, scalars={"a": 3.0, "b": 0.25})
    np.testing.assert_allclose(sim.y, 3.0 * (A.T @ operands[0]) + 0.25 * operands[1],
                               rtol=1e-13, atol=1e-13)


ERRORS = [
    (lambda o: o[:1], {"a": 1, "b": 1}, "takes B, then the addend C; got 1 operand"),
    (lambda o: [o[0], o[1][:5]], {"a": 1, "b": 1}, r"dense operand C has shape \(5,\); Z has \(23,\)"),
    (lambda o: o, {"a": float("nan"), "b": 1}, "scalar a = nan is not a finite number"),
    (lambda o: o, {"a": "x", "b": 1}, "scalar a = 'x' is not a finite number"),
    (lambda o: o, {"b": 1}, "takes the scalars a, b; a missing"),
    (lambda o: o, {"a": 1, "b": 1, "c": 2}, "takes the scalars a, b; c unknown"),
]


@pytest.mark.parametrize(("pick", "scalars", "message"), ERRORS)
def test_input_errors_name_the_operand(pick: Any, scalars: Any, message: str) -> None:
    schedule = lower(load_spec_string(SPECS["spmv_thread"]), params=PARAMS["spmv_thread"])
    bound, operands, _ = _inputs(schedule, A)
    with pytest.raises(ValidationError, match=message) as info:
        simulate(bound, A, *pick(operands), scalars=scalars)
    assert "\n" not in str(info.value)


def test_scalars_for_a_spec_without_an_epilogue_are_refused() -> None:
    text = SPECS["spmv_thread"]
    schedule = lower(load_spec_string(text), params=PARAMS["spmv_thread"])
    plain = dataclasses.replace(schedule, form=dataclasses.replace(schedule.form, epilogue=None))
    bound = bind(plain, operand_shape(plain, A))
    with pytest.raises(ValidationError, match="no epilogue"):
        simulate(bound, A, np.ones(17), scalars={"a": 1.0})
