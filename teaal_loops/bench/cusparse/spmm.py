"""cuSPARSE SpMM ``C = A B`` on row-major dense matrices, descriptors and buffers made once.

    from teaal_loops.bench.cusparse import SpMM
    base = SpMM(A, n=32)           # A: cupyx csr_matrix; B: cols x 32, C: rows x 32, C order
    base.choose(timer)             # times DEFAULT, CSR_ALG1/2/3 (+ preprocessed ALG1/ALG3)
    base.launch(B, C)              # C = A @ B on CuPy's current stream

B and C are described as what they are, row-major (``cusparseCreateDnMat`` with
``CUSPARSE_ORDER_ROW``, leading dimension ``n``), so no transposing copy is made (cupyx's
``A @ B`` converts B to Fortran order and returns a Fortran-ordered C). Where nvmath-python is
usable, ``CSR_ALG1`` and ``CSR_ALG3`` also run after ``cusparseSpMM_preprocess``, the two
algorithms cuSPARSE documents it to speed up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from teaal_loops.bench.cusparse.base import Baseline, OperandSet, check_csr, default_algorithms
from teaal_loops.bench.cusparse.descriptors import (
    OP_N,
    SPMM_ALGS,
    Algorithm,
    Availability,
    CusparseBaselineError,
    cupy_binding_available,
    nvmath_available,
)
from teaal_loops.runtime import backend

PREPROCESSED = ("CSR_ALG1", "CSR_ALG3")


def available() -> Availability:
    """Whether the CuPy-binding SpMM baseline can run here (the reason in one line if not)."""
    return cupy_binding_available()


def all_algorithms(*, nvmath: bool | None = None) -> list[Algorithm]:
    """The algorithms an :class:`SpMM` tries by default (``nvmath``: whether to add the
    preprocessed ones; default: whether nvmath-python is usable)."""
    if nvmath is None:
        nvmath = bool(nvmath_available())
    return default_algorithms(SPMM_ALGS, PREPROCESSED, nvmath=nvmath)


class SpMM(Baseline):
    """``launch(B, C)``: ``C = A @ B``, B ``cols x n`` and C ``rows x n``, both C-ordered."""

    family = "SpMM"
    operand_names = ("B", "C")

    def __init__(
        self,
        A: Any,
        n: int,
        *,
        B: Any = None,
        C: Any = None,
        algorithms: Sequence[Algorithm] | None = None,
    ) -> None:
        cp = backend.cupy_module()
        check_csr(A, self.family)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise CusparseBaselineError(f"cuSPARSE SpMM: dense width n={n!r} must be >= 1")
        rows, cols = A.shape
        super().__init__(cp, A.dtype, [(cols, n), (rows, n)])
        self.A = A
        self.n = n
        B = cp.zeros((cols, n), dtype=A.dtype) if B is None else B
        C = cp.zeros((rows, n), dtype=A.dtype) if C is None else C
        self.check_operand(0, B)
        self.check_operand(1, C)
        self.operands = (B, C)
        self._setup(list(algorithms) if algorithms is not None else all_algorithms())

    def _make_set(self, bind: Any, algorithm: Algorithm) -> OperandSet:
        s = OperandSet(bind)
        s.sparse = s.descriptors.csr(self.A)
        B, C = self.operands
        s.add(s.descriptors.row_major(B), B.data.ptr, bind.set_mat)
        s.add(s.descriptors.row_major(C), C.data.ptr, bind.set_mat)
        return s

    def _args(self, s: OperandSet, algorithm: Algorithm) -> tuple[Any, ...]:
        return (OP_N, OP_N, self.alpha_ptr, s.sparse, s.dense[0], self.beta_ptr, s.dense[1],
                self.vtype, algorithm.code)

    def _buffer_size(self, s: OperandSet, algorithm: Algorithm) -> int:
        return int(s.binding.spmm_buffer_size(*self._args(s, algorithm)))

    def _preprocess(self, s: OperandSet, algorithm: Algorithm) -> None:
        s.binding.spmm_preprocess(*self._args(s, algorithm), self.buffer_ptrs[algorithm.label])

    def _compute(self, s: OperandSet, algorithm: Algorithm) -> None:
        s.binding.spmm(OP_N, OP_N, self.alpha_ptr, s.sparse, s.dense[0], self.beta_ptr,
                       s.dense[1], self.vtype, algorithm.code, self.buffer_ptrs[algorithm.label])

    def describe(self, algorithm: Algorithm | None = None) -> str:
        return f"{super().describe(algorithm)}, row-major B and C, N={self.n}"
