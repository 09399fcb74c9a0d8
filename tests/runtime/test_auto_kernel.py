"""``schedule: auto`` through compile(): the kernel is chosen per matrix, without a GPU."""

from __future__ import annotations

import pytest
import scipy.sparse as sp

from teaal_loops import auto
from teaal_loops.errors import ParameterError, TeaalLoopsError
from teaal_loops.matrix import synthetic
from teaal_loops.pipeline import AutoKernel, compile, compile_for
from teaal_loops.runtime import Kernel
from teaal_loops.spec import load_spec_string

AUTO_SPEC = """
einsum:
  declaration: {A: [M, K], B: [K], Z: [M]}
  expressions: ["Z[m] = A[m, k] * B[k]"]
x-teaal-loops:
  schedule: auto
"""


def test_auto_spec_compiles_to_a_kernel_chosen_per_matrix() -> None:
    kernel = compile(load_spec_string(AUTO_SPEC))
    assert isinstance(kernel, AutoKernel)
    for A in (
        synthetic("longrows", rows=3000, nnz=60_000, seed=1),
        synthetic("banded", rows=3000, nnz=30_000, seed=1),
        sp.random(50, 50, density=0.1, format="csr", random_state=2),
    ):
        chosen = kernel.kernel_for(A)
        expected = auto.choose(auto.matrix_stats(A))
        assert isinstance(chosen, Kernel)
        assert chosen.kind == expected.schedule
        assert kernel.last_choice == expected
        assert compile_for(load_spec_string(AUTO_SPEC), A).kind == expected.schedule


def test_auto_refuses_fixed_parameters_and_has_no_matrix_free_source() -> None:
    spec = load_spec_string(AUTO_SPEC)
    with pytest.raises(ParameterError, match="auto chooses the parameters"):
        compile(spec, params={"BLOCK_SIZE": 8})
    with pytest.raises(TeaalLoopsError, match="depends on the matrix"):
        _ = compile(spec).source  # type: ignore[union-attr]
