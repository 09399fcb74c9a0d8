"""cuSPARSE SDDMM ``Z = C * (A B)`` sampled at C's nonzeros, descriptors and buffers made once.

The einsum ``Z[m,n] = C[m,n] * A[m,k] * B[k,n]`` (A ``rows x k`` and B ``k x cols``, both
C-ordered; Z has C's pattern) is what the TeAAL spec computes: ``Z.data[j] = C.data[j] *
sum(A[row_j] * B[:, col_j])``. ``cusparseSDDMM`` computes ``alpha (A B) o spy(C) + beta C``,
the dot products on C's pattern without C's values, so a baseline is two launches: SDDMM into
Z's values (beta = 0), then ``Z *= C.data`` (one CuPy elementwise kernel); ``scale=False``
leaves the second out (the cuSPARSE call alone).

Which library runs it, strongest first (:func:`backends` says which is usable here):

1. CuPy's own binding, if it exposes ``cusparseSDDMM`` (CuPy 14's
   ``cupy_backends.cuda.libs.cusparse`` does not: it is looked up and reported, not used);
2. nvmath-python's ``nvmath.bindings.cusparse`` (:class:`SDDMM`), descriptors and buffer made
   once, with and without ``cusparseSDDMM_preprocess``, the dense operands described four
   ways (:data:`LAYOUTS`): ``ROW`` (row-major A and B as given), ``COL_T`` (the same memory as
   column-major transposes), and ``BT_ROW`` / ``BT_COL``, where each launch first copies B
   into a ``cols x K`` C-ordered buffer (``B.T``, made once; the copy is part of the launch
   and its time) so that every column of B the sampled dot products read is contiguous;
3. ``torch.sparse.sampled_addmm`` (:class:`~teaal_loops.bench.cusparse.torch_sddmm.TorchSDDMM`,
   which calls cuSPARSE SDDMM inside PyTorch) where PyTorch with CUDA is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from teaal_loops.bench.cusparse.base import Baseline, OperandSet, check_csr
from teaal_loops.bench.cusparse.descriptors import (
    OP_N,
    OP_T,
    SDDMM_ALG_DEFAULT,
    Algorithm,
    Availability,
    CusparseBaselineError,
    cupy_sddmm_entry_points,
    nvmath_available,
)
from teaal_loops.bench.cusparse.torch_sddmm import TorchSDDMM, torch_available
from teaal_loops.runtime import backend

# label -> layout: how A and B (or B's transposed copy) are described to cuSPARSE
LAYOUTS = {"ROW": "row", "COL_T": "col", "BT_ROW": "bt_row", "BT_COL": "bt_col"}
# layout -> (opA, opB); see _make_set for the descriptors
OPS = {"row": (OP_N, OP_N), "col": (OP_T, OP_T), "bt_row": (OP_N, OP_T), "bt_col": (OP_T, OP_N)}


def all_algorithms(*, preprocess: bool = True) -> list[Algorithm]:
    """Every layout of :data:`LAYOUTS` and (``preprocess``) each after
    ``cusparseSDDMM_preprocess``, all through nvmath-python's binding (the only one with
    SDDMM)."""
    out = [Algorithm(label, "nvmath", SDDMM_ALG_DEFAULT, False, layout)
           for label, layout in LAYOUTS.items()]
    if preprocess:
        out += [Algorithm(f"{label}+preprocess", "nvmath", SDDMM_ALG_DEFAULT, True, layout)
                for label, layout in LAYOUTS.items()]
    return out


def backends() -> dict[str, Any]:
    """Each SDDMM backend's availability (``True`` or its one-line reason) and ``used``:
    the strongest usable one (``nvmath``, ``torch``) or ``None``."""
    names = cupy_sddmm_entry_points()
    found: dict[str, Any] = {
        "cupy": (f"CuPy's cuSPARSE binding names {', '.join(names)} (not wired: unverified "
                 "signature)" if names else
                 "CuPy's cuSPARSE binding (cupy_backends.cuda.libs.cusparse) has no SDDMM")
    }
    nv = nvmath_available()
    found["nvmath"] = True if nv else nv.reason
    th = torch_available()
    found["torch"] = True if th else th.reason
    found["used"] = next((k for k in ("nvmath", "torch") if found[k] is True), None)
    return found


def available() -> Availability:
    """Whether any SDDMM baseline can run here (nvmath-python or PyTorch)."""
    found = backends()
    if found["used"]:
        return Availability(True)
    return Availability(False, f"no SDDMM backend: nvmath: {found['nvmath']}; "
                               f"torch: {found['torch']}")


def make_sddmm(C: Any, k: int, **kwargs: Any) -> Any:
    """The strongest SDDMM baseline usable here (:func:`backends`): :class:`SDDMM` through
    nvmath-python, else :class:`TorchSDDMM`; a one-line error when neither is."""
    used = backends()["used"]
    if used == "nvmath":
        return SDDMM(C, k, **kwargs)
    if used == "torch":
        kwargs.pop("algorithms", None)
        return TorchSDDMM(C, k, **kwargs)
    raise CusparseBaselineError(available().reason)


class SDDMM(Baseline):
    """``launch(A, B, Z)``: ``Z = C.data * (A @ B)[C's pattern]`` (without ``C.data`` when
    built with ``scale=False``); Z has C's nnz entries, in C's order."""

    family = "SDDMM"
    operand_names = ("A", "B", "Z")

    def __init__(
        self,
        C: Any,
        k: int,
        *,
        A: Any = None,
        B: Any = None,
        out: Any = None,
        scale: bool = True,
        algorithms: Sequence[Algorithm] | None = None,
    ) -> None:
        cp = backend.cupy_module()
        check_csr(C, self.family)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise CusparseBaselineError(f"cuSPARSE SDDMM: inner width k={k!r} must be >= 1")
        rows, cols = C.shape
        nnz = int(C.nnz)
        super().__init__(cp, C.dtype, [(rows, k), (k, cols), (nnz,)])
        self.C = C
        self.k = k
        self.scale = scale
        A = cp.zeros((rows, k), dtype=C.dtype) if A is None else A
        B = cp.zeros((k, cols), dtype=C.dtype) if B is None else B
        out = cp.zeros(nnz, dtype=C.dtype) if out is None else out
        for slot, array in enumerate((A, B, out)):
            self.check_operand(slot, array)
        self.operands = (A, B, out)
        self._bt: Any = None  # B.T, C-ordered, for the BT_* layouts
        self._setup(list(algorithms) if algorithms is not None else all_algorithms())

    def _make_set(self, bind: Any, algorithm: Algorithm) -> OperandSet:
        layout = algorithm.layout
        if layout not in OPS:
            raise CusparseBaselineError(f"cuSPARSE SDDMM: unknown layout {layout!r}")
        s = OperandSet(bind)
        A, B, out = self.operands
        d = s.descriptors
        dense = d.row_major if layout in ("row", "bt_row") else d.col_major_view
        s.add(dense(A), A.data.ptr, bind.set_mat)
        if layout.startswith("bt"):
            # the descriptor stays on the transposed copy; launch refills it from B
            s.add(dense(self._transposed()), B.data.ptr, lambda desc, ptr: None)
        else:
            s.add(dense(B), B.data.ptr, bind.set_mat)
        s.sparse = d.csr(self.C, values=out)
        s.add(s.sparse, out.data.ptr, bind.set_sp_values)
        return s

    def _transposed(self) -> Any:
        if self._bt is None:
            self._bt = self.cp.empty((self.C.shape[1], self.k), dtype=self.dtype)
        return self._bt

    def _args(self, s: OperandSet, algorithm: Algorithm) -> tuple[Any, ...]:
        op_a, op_b = OPS[algorithm.layout]
        return (op_a, op_b, self.alpha_ptr, s.dense[0], s.dense[1], self.beta_ptr, s.sparse,
                self.vtype, algorithm.code)

    def _buffer_size(self, s: OperandSet, algorithm: Algorithm) -> int:
        return int(s.binding.sddmm_buffer_size(*self._args(s, algorithm)))

    def _preprocess(self, s: OperandSet, algorithm: Algorithm) -> None:
        s.binding.sddmm_preprocess(*self._args(s, algorithm), self.buffer_ptrs[algorithm.label])

    def _compute(self, s: OperandSet, algorithm: Algorithm) -> None:
        s.binding.sddmm(*self._args(s, algorithm), self.buffer_ptrs[algorithm.label])

    def launch(self, *operands: Any, algorithm: Algorithm | None = None) -> None:
        """SDDMM into ``Z`` (the last operand), then ``Z *= C.data`` unless ``scale=False``;
        the ``BT_*`` layouts first copy B into its transposed buffer."""
        algorithm = algorithm or self.algorithm
        assert algorithm is not None
        if algorithm.layout in ("bt_row", "bt_col"):
            B = operands[1]
            if B.shape != self.shapes[1]:
                self.check_operand(1, B)
            self.cp.copyto(self._bt, B.T)
        super().launch(*operands, algorithm=algorithm)
        if self.scale:
            out = operands[-1]
            self.cp.multiply(out, self.C.data, out=out)

    def describe(self, algorithm: Algorithm | None = None) -> str:
        then = ", then Z *= C's values" if self.scale else ""
        return f"{super().describe(algorithm)}, K={self.k}{then}"
