"""What the cuSPARSE baselines share: algorithms set up once, launch, choose, capture, describe.

A baseline is built once per (matrix, dtype, dense width). Building it makes, for every
algorithm it can run, the descriptors (one set per binding and dense layout; a preprocessed
algorithm gets a set of its own, because preprocessing makes its buffer the matrix's "active"
one), the work buffer of that algorithm's size, and runs the preprocessing. An algorithm that
cuSPARSE refuses here (buffer size or preprocessing failed) is left out with its one-line
reason in :attr:`Baseline.skipped`. ``launch`` then costs the compute call alone, plus
re-pointing a dense descriptor (``cusparseDnVecSetValues`` and friends) where an operand is
another array than last time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from teaal_loops.bench.cusparse import choice as choosing
from teaal_loops.bench.cusparse.descriptors import (
    Algorithm,
    CusparseBaselineError,
    Descriptors,
    binding,
    first_line,
    nvmath_available,
    value_type,
)


class OperandSet:
    """The descriptors of one binding (and layout) for one baseline: the sparse matrix and one
    dense descriptor per operand slot, with the pointer each slot was last given."""

    def __init__(self, bind: Any) -> None:
        self.binding = bind
        self.descriptors = Descriptors(bind)
        self.sparse = 0
        self.dense: list[int] = []
        self.ptrs: list[int] = []
        self.setters: list[Callable[[int, int], None]] = []

    def add(self, desc: int, ptr: int, setter: Callable[[int, int], None]) -> None:
        self.dense.append(desc)
        self.ptrs.append(ptr)
        self.setters.append(setter)

    def repoint(self, slot: int, ptr: int) -> None:
        self.setters[slot](self.dense[slot], ptr)
        self.ptrs[slot] = ptr


def default_algorithms(
    codes: dict[str, int], preprocessed: Sequence[str], *, nvmath: bool
) -> list[Algorithm]:
    """Every algorithm of ``codes`` through CuPy's binding, then (where nvmath-python is
    usable) those named in ``preprocessed`` with preprocessing through nvmath's."""
    algorithms = [Algorithm(label, "cupy", code) for label, code in codes.items()]
    if nvmath:
        algorithms += [Algorithm(f"{label}+preprocess", "nvmath", codes[label], True)
                       for label in preprocessed]
    return algorithms


def check_csr(A: Any, family: str) -> None:
    """A cupyx CSR matrix with at least one nonzero, or one line saying what it is instead
    (its dtype is checked where the descriptors are made)."""
    if getattr(A, "format", None) != "csr" or not hasattr(A, "indptr"):
        raise CusparseBaselineError(
            f"cuSPARSE {family}: expected a cupyx.scipy.sparse.csr_matrix, got "
            f"{type(A).__name__}"
        )
    if int(A.nnz) == 0:
        raise CusparseBaselineError(f"cuSPARSE {family}: the matrix has no nonzeros")


class Baseline:
    """Shared machinery; subclasses define the operands and the calls (see the module)."""

    family = ""
    operand_names: tuple[str, ...] = ()

    def __init__(self, cp: Any, dtype: Any, shapes: Sequence[tuple[int, ...]]) -> None:
        self.cp = cp
        self.dtype = np.dtype(dtype)
        self.vtype = value_type(self.dtype)
        self.shapes = tuple(tuple(s) for s in shapes)
        # host scalars in host pointer mode: cuSPARSE reads them at each call (and capture)
        self._alpha = np.ones((), dtype=self.dtype)
        self._beta = np.zeros((), dtype=self.dtype)
        self.alpha_ptr = int(self._alpha.ctypes.data)
        self.beta_ptr = int(self._beta.ctypes.data)
        self.algorithms: list[Algorithm] = []
        self.skipped: dict[str, str] = {}
        self.choice: choosing.Choice | None = None
        self.algorithm: Algorithm | None = None
        self.operands: tuple[Any, ...] = ()  # the arrays the descriptors were made on
        self.captured: Algorithm | None = None  # what the last capture's graph holds
        self._sets: dict[str, OperandSet] = {}
        self._set_of: dict[str, OperandSet] = {}  # by algorithm label
        self._buffers: dict[str, Any] = {}
        self.buffer_ptrs: dict[str, int] = {}

    # -- subclass hooks ---------------------------------------------------------------------
    def _make_set(self, bind: Any, algorithm: Algorithm) -> OperandSet:
        raise NotImplementedError

    def _buffer_size(self, s: OperandSet, algorithm: Algorithm) -> int:
        raise NotImplementedError

    def _preprocess(self, s: OperandSet, algorithm: Algorithm) -> None:
        raise NotImplementedError

    def _compute(self, s: OperandSet, algorithm: Algorithm) -> None:
        raise NotImplementedError

    # -- set-up -----------------------------------------------------------------------------
    def _setup(self, requested: Sequence[Algorithm]) -> None:
        labels = [a.label for a in requested]
        if len(set(labels)) != len(labels):
            raise CusparseBaselineError(f"{self.family}: algorithm labels repeat: {labels}")
        for algorithm in requested:
            try:
                self._add(algorithm)
            except Exception as exc:  # cuSPARSE refuses this algorithm here: say why, go on
                self.skipped[algorithm.label] = first_line(exc)
                continue
            self.algorithms.append(algorithm)
        if not self.algorithms:
            reasons = "; ".join(f"{k}: {v}" for k, v in self.skipped.items())
            raise CusparseBaselineError(f"cuSPARSE {self.family}: no algorithm runs ({reasons})")
        self.algorithm = self.algorithms[0]

    def _add(self, algorithm: Algorithm) -> None:
        """Descriptors (shared or its own), buffer and preprocessing of one algorithm."""
        try:
            s = self._set_for(algorithm)
            size = self._buffer_size(s, algorithm)
            buf = self.cp.empty(max(int(size), 1), dtype=self.cp.int8)
            self._buffers[algorithm.label] = buf
            self.buffer_ptrs[algorithm.label] = int(buf.data.ptr)
            if algorithm.preprocess:
                self._stream(s)
                self._preprocess(s, algorithm)
            self._set_of[algorithm.label] = s
        except Exception:
            self._buffers.pop(algorithm.label, None)
            self.buffer_ptrs.pop(algorithm.label, None)
            raise

    def _key(self, algorithm: Algorithm) -> str:
        key = f"{algorithm.binding}|{algorithm.layout}"
        return f"{key}|{algorithm.label}" if algorithm.preprocess else key

    def _set_for(self, algorithm: Algorithm) -> OperandSet:
        key = self._key(algorithm)
        if key not in self._sets:
            self._sets[key] = self._make_set(binding(algorithm.binding), algorithm)
        return self._sets[key]

    def _stream(self, s: OperandSet) -> None:
        if s.binding.tracks_stream:
            s.binding.set_stream(int(self.cp.cuda.get_current_stream().ptr))

    # -- operands ---------------------------------------------------------------------------
    def check_operand(self, slot: int, array: Any) -> None:
        """One line naming the operand when it is not a C-ordered CuPy array of this
        baseline's dtype and the slot's shape."""
        name, shape = self.operand_names[slot], self.shapes[slot]
        ok = (
            isinstance(array, self.cp.ndarray)
            and array.dtype == self.dtype
            and tuple(array.shape) == shape
            and bool(array.flags.c_contiguous)
        )
        if not ok:
            got = (f"{type(array).__name__} {getattr(array, 'dtype', '?')} "
                   f"{tuple(getattr(array, 'shape', ()))}")
            raise CusparseBaselineError(
                f"cuSPARSE {self.family}: {name} must be a C-ordered {self.dtype.name} CuPy "
                f"array of shape {shape}, got {got}"
            )

    def _point(self, s: OperandSet, operands: Sequence[Any]) -> None:
        for slot, array in enumerate(operands):
            ptr = array.data.ptr
            if ptr != s.ptrs[slot] or array.shape != self.shapes[slot]:
                self.check_operand(slot, array)
                s.repoint(slot, ptr)

    # -- use --------------------------------------------------------------------------------
    def by_label(self, label: str) -> Algorithm:
        for algorithm in self.algorithms:
            if algorithm.label == label:
                return algorithm
        raise CusparseBaselineError(
            f"cuSPARSE {self.family}: no algorithm {label!r} here "
            f"(runnable: {', '.join(a.label for a in self.algorithms)})"
        )

    def select(self, label: str) -> None:
        """Use algorithm ``label`` from now on (as ``choose`` does with the fastest)."""
        self.algorithm = self.by_label(label)

    def launch(self, *operands: Any, algorithm: Algorithm | None = None) -> None:
        """The cuSPARSE compute call on CuPy's current stream, writing the last operand."""
        algorithm = algorithm or self.algorithm
        assert algorithm is not None  # _setup guarantees one
        s = self._set_of[algorithm.label]
        self._point(s, operands)
        self._stream(s)
        self._compute(s, algorithm)

    def choose(
        self, timer: Any, *operands: Any, reps: int = 25, warmup: int = 3
    ) -> choosing.Choice:
        """Time every algorithm on ``operands`` (default: the arrays the baseline was built on),
        queued and per-call, and keep the fastest."""
        operands = operands or self.operands
        choice = choosing.time_algorithms(
            timer, self.algorithms,
            lambda a: (lambda i: self.launch(*operands, algorithm=a)),
            reps=reps, warmup=warmup,
        )
        if choice.winner is not None:
            self.select(choice.winner)
        self.choice = choice
        return choice

    def capture(self, *operands: Any) -> Any:
        """A CUDA graph of ``launch(*operands)`` with the current algorithm (it runs once
        first); :class:`~teaal_loops.bench.cusparse.choice.GraphError` with the reason when the
        call cannot be captured. Default operands: those the baseline was built on.

        CuPy's binding refuses every cuSPARSE call while its stream captures (its
        ``setStream`` raises NotImplementedError, whatever cuSPARSE would allow), so an
        algorithm of that binding is captured through nvmath-python's instead, the same
        cuSPARSE algorithm on descriptors of its own, where nvmath-python is usable:
        :attr:`captured` names what the graph holds."""
        operands = operands or self.operands
        algorithm = self.algorithm
        assert algorithm is not None  # _setup guarantees one
        if algorithm.binding == "cupy" and nvmath_available():
            algorithm = self._twin(algorithm)
        self.launch(*operands, algorithm=algorithm)
        graph = choosing.capture(self.cp, lambda: self.launch(*operands, algorithm=algorithm))
        self.captured = algorithm
        return graph

    def _twin(self, algorithm: Algorithm) -> Algorithm:
        """``algorithm`` through nvmath-python's binding (set up on first use)."""
        twin = replace(algorithm, label=f"{algorithm.label} (nvmath)", binding="nvmath")
        if twin.label not in self._set_of:
            try:
                self._add(twin)
            except Exception as exc:
                raise choosing.GraphError(
                    f"not capturable: CuPy's binding refuses capture and nvmath-python's "
                    f"could not set up {algorithm.label} ({first_line(exc)})") from None
        return twin

    def describe(self, algorithm: Algorithm | None = None) -> str:
        """``cuSPARSE SpMV CSR_ALG2 (descriptors once)`` and the like."""
        a = algorithm or self.algorithm
        if a is None:
            return f"cuSPARSE {self.family}"
        how = "nvmath-python, descriptors once" if a.binding == "nvmath" else "descriptors once"
        return f"cuSPARSE {self.family} {a.label} ({how})"

    @property
    def name(self) -> str:
        return self.describe()

    def close(self) -> None:
        """Destroy the descriptors now (they are destroyed with the object otherwise)."""
        for s in self._sets.values():
            s.descriptors.close()
        self._sets.clear()
        self._set_of.clear()
