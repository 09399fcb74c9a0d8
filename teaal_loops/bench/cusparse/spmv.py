"""cuSPARSE SpMV ``y = A x`` with descriptors and buffers made once, the best algorithm kept.

    from teaal_loops.bench.cusparse import SpMV
    base = SpMV(A)                 # A: cupyx.scipy.sparse.csr_matrix, float32 or float64
    base.choose(timer)             # times DEFAULT, CSR_ALG1, CSR_ALG2 (+ preprocessed ones)
    base.launch(x, y)              # y = A @ x on CuPy's current stream, the winner's algorithm
    graph = base.capture(x, y)     # a CUDA graph of that launch

Algorithms: ``DEFAULT``, ``CSR_ALG1``, ``CSR_ALG2`` through CuPy's binding, and where
nvmath-python is usable the same three after ``cusparseSpMV_preprocess`` (labels
``...+preprocess``; each keeps its own descriptors and buffer, as preprocessing requires).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from teaal_loops.bench.cusparse.base import Baseline, OperandSet, check_csr, default_algorithms
from teaal_loops.bench.cusparse.descriptors import (
    OP_N,
    SPMV_ALGS,
    Algorithm,
    Availability,
    cupy_binding_available,
    nvmath_available,
)
from teaal_loops.runtime import backend

PREPROCESSED = ("DEFAULT", "CSR_ALG1", "CSR_ALG2")


def available() -> Availability:
    """Whether the CuPy-binding SpMV baseline can run here (the reason in one line if not)."""
    return cupy_binding_available()


def all_algorithms(*, nvmath: bool | None = None) -> list[Algorithm]:
    """The algorithms an :class:`SpMV` tries by default (``nvmath``: whether to add the
    preprocessed ones; default: whether nvmath-python is usable)."""
    if nvmath is None:
        nvmath = bool(nvmath_available())
    return default_algorithms(SPMV_ALGS, PREPROCESSED, nvmath=nvmath)


class SpMV(Baseline):
    """``launch(x, y)``: ``y = A @ x``; see the module docstring."""

    family = "SpMV"
    operand_names = ("x", "y")

    def __init__(
        self,
        A: Any,
        *,
        x: Any = None,
        y: Any = None,
        algorithms: Sequence[Algorithm] | None = None,
    ) -> None:
        cp = backend.cupy_module()
        check_csr(A, self.family)
        rows, cols = A.shape
        super().__init__(cp, A.dtype, [(cols,), (rows,)])
        self.A = A
        x = cp.zeros(cols, dtype=A.dtype) if x is None else x
        y = cp.zeros(rows, dtype=A.dtype) if y is None else y
        self.check_operand(0, x)
        self.check_operand(1, y)
        self.operands = (x, y)
        self._setup(list(algorithms) if algorithms is not None else all_algorithms())

    @property
    def x(self) -> Any:
        return self.operands[0]

    @property
    def y(self) -> Any:
        return self.operands[1]

    def _make_set(self, bind: Any, algorithm: Algorithm) -> OperandSet:
        s = OperandSet(bind)
        s.sparse = s.descriptors.csr(self.A)
        x, y = self.operands
        s.add(s.descriptors.vec(x), x.data.ptr, bind.set_vec)
        s.add(s.descriptors.vec(y), y.data.ptr, bind.set_vec)
        return s

    def _args(self, s: OperandSet, algorithm: Algorithm) -> tuple[Any, ...]:
        return (OP_N, self.alpha_ptr, s.sparse, s.dense[0], self.beta_ptr, s.dense[1],
                self.vtype, algorithm.code)

    def _buffer_size(self, s: OperandSet, algorithm: Algorithm) -> int:
        return int(s.binding.spmv_buffer_size(*self._args(s, algorithm)))

    def _preprocess(self, s: OperandSet, algorithm: Algorithm) -> None:
        s.binding.spmv_preprocess(*self._args(s, algorithm), self.buffer_ptrs[algorithm.label])

    def _compute(self, s: OperandSet, algorithm: Algorithm) -> None:
        s.binding.spmv(OP_N, self.alpha_ptr, s.sparse, s.dense[0], self.beta_ptr, s.dense[1],
                       self.vtype, algorithm.code, self.buffer_ptrs[algorithm.label])
