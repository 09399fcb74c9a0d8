"""A GPU made of NumPy for the benchmark harness's CPU tests.

``FakeNumpyCupy`` is ``cupy`` as far as the harness uses it, with a clock: an event records the
clock (and advances it by 1 us, so that every interval is positive), and every fake launch
advances it by its cost, so that each side's medians are its costs and the speedups are known.
``FakeKernel`` stands in for a generated kernel (SpMV, SpMM, SDDMM; values from SciPy, wrong on
purpose in some modes); ``FakeBaseline`` for a cuSPARSE baseline (several algorithms, one of
them fast and wrong); ``FakeGraph`` for a captured launch (a replay runs the call again).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from teaal_loops.bench.cusparse.descriptors import Algorithm
from teaal_loops.ir.model import Combine
from teaal_loops.lowering import lower
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec
from teaal_loops.types import DeviceInfo, MatrixShape

EVENT_MS = 0.001
# ms a launch of a generated kernel costs, by spec file stem (others: DEFAULT_COST)
COSTS = {"merge_path": 0.010, "group_mapped": 0.020, "lanes_over_n": 0.020,
         "lanes_over_n_tiled": 0.060, "group_lanes_over_k": 0.045,
         "thread_per_nonzero": 0.080}
DEFAULT_COST = 0.030
# ms a baseline algorithm costs; BROKEN is the fastest and wrong: it must never win
BASELINE_COSTS = {"DEFAULT": 0.050, "CSR_ALG1": 0.030, "CSR_ALG2": 0.040,
                  "CSR_ALG1+preprocess": 0.035, "BROKEN": 0.002, "torch": 0.200}


class FakeNumpyCupy(types.ModuleType):
    """``cupy`` as far as the harness uses it, backed by NumPy, with a clock (module doc)."""

    def __init__(self) -> None:
        super().__init__("cupy")
        clock = self.clock = [0.0]

        class Event:
            def record(self) -> None:
                clock[0] += EVENT_MS
                self.t = clock[0]

            def synchronize(self) -> None:
                pass

        self.cuda = types.SimpleNamespace(
            Event=Event,
            get_elapsed_time=lambda s, e: e.t - s.t,
            Device=lambda *a: types.SimpleNamespace(synchronize=lambda: None,
                                                    compute_capability="90"),
            runtime=types.SimpleNamespace(
                memGetInfo=lambda: (2**34, 2**35), driverGetVersion=lambda: 13000,
                runtimeGetVersion=lambda: 13000,
            ),
        )
        self.__version__ = "fake"
        self.RawKernel = lambda source, name: (lambda grid, block, args: None)
        self.get_default_memory_pool = lambda: types.SimpleNamespace(free_all_blocks=lambda: None)

    def spend(self, ms: float) -> None:
        self.clock[0] += ms

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


class FakeGraph:
    """A captured call: ``launch()`` runs it again."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.call = call

    def launch(self, stream: Any = None) -> None:
        self.call()


def sddmm_values(C: Any, A: Any, B: Any) -> Any:
    """``C.data * (A @ B)`` at C's nonzeros, in C's order."""
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    return C.data * np.einsum("ij,ji->i", A[rows], B[:, C.indices])


class FakeKernel:
    """A generated kernel (see the module docstring); ``mode``: ``""`` right, ``wrong``
    (values 1.5x), ``skip_last`` (SpMV: the last row left unwritten), ``raise`` (prepare fails
    as a template bug would)."""

    def __init__(self, spec: Path, params: dict[str, int], dtype: str, mode: str,
                 cp: FakeNumpyCupy) -> None:
        self.schedule = lower(load_spec(spec), params=params)
        self.kind = self.schedule.kind
        self.form = self.schedule.form.kind
        self.dtype = np.dtype(dtype)
        self.mode = mode
        self.cp = cp
        self.cost = COSTS.get(Path(spec).stem, DEFAULT_COST)
        self.calls: list[tuple[Any, ...]] = []
        self.forgotten: list[Any] = []

    def prepare(self, A: Any) -> Any:
        if self.mode == "raise":
            raise RuntimeError("nvrtc: template bug\nmore lines")
        bound = bind(self.schedule, MatrixShape(A.shape[0], A.shape[1], A.nnz), DeviceInfo.h100())
        return types.SimpleNamespace(A=A, bound=bound,
                                     accumulates=self.schedule.combine is Combine.ATOMIC)

    def forget(self, A: Any) -> bool:
        self.forgotten.append(A)
        return True

    # -- SpMV -------------------------------------------------------------------------------
    def new_output(self, p: Any) -> Any:
        return np.zeros(p.A.shape[0], self.dtype) if p.accumulates else np.empty(
            p.A.shape[0], self.dtype)

    def zero_output(self, p: Any, y: Any) -> None:
        if p.accumulates:
            y.fill(0)

    def launch(self, p: Any, x: Any, y: Any) -> None:
        self.cp.spend(self.cost)
        product = p.A @ x
        if self.mode == "wrong":
            product = product * 1.5
        if self.mode == "skip_last":
            product = product[:-1]
            y[: len(product)] = product  # last row left as it was: NaN poison shows it
            return
        if p.accumulates:
            y += product
        else:
            y[:] = product

    def __call__(self, p: Any, x: Any) -> Any:
        y = self.new_output(p)
        self.launch(p, x, y)
        return y

    def capture(self, p: Any, x: Any, y: Any) -> FakeGraph:
        def replay() -> None:
            self.zero_output(p, y)
            self.launch(p, x, y)

        return FakeGraph(replay)

    # -- SpMM, SDDMM -----------------------------------------------------------------------
    def dense_launch(self, p: Any, size: int) -> tuple[Any, ...]:
        return (max(1, p.A.shape[0] // 4), 1, 1), (128, 1, 1), min(size, 32), 1

    def call_dense(self, p: Any, operands: Any, *, out: Any = None) -> Any:
        self.cp.spend(self.cost)
        self.calls.append(tuple(operands))
        if self.form == "spmm":
            value = p.A @ operands[0]
        else:
            value = sddmm_values(p.A, *operands)
        if self.mode == "wrong":
            value = value * 1.5
        if out is None:
            out = np.empty(value.shape, self.dtype)
        out[...] = value
        if self.form == "sddmm":
            return types.SimpleNamespace(data=out)
        return out

    def bind_dense(self, p: Any, operands: Any, out: Any) -> Any:
        return types.SimpleNamespace(launch=lambda: self.call_dense(p, operands, out=out))


class FakeBaseline:
    """A cuSPARSE baseline with the algorithms of :data:`BASELINE_COSTS` given to it; ``BROKEN``
    writes a wrong result. ``compute(*operands)`` is the right result."""

    def __init__(self, cp: FakeNumpyCupy, compute: Callable[..., Any], labels: tuple[str, ...],
                 *, preprocessed: tuple[str, ...] = (), binding: str = "cupy",
                 family: str = "SpMV") -> None:
        self.cp = cp
        self.compute = compute
        self.algorithms = [Algorithm(label, binding, i, label in preprocessed)
                           for i, label in enumerate(labels)]
        self.algorithm = self.algorithms[0]
        self.skipped = {"CSR_ALG3": "CUSPARSE_STATUS_NOT_SUPPORTED"}
        self.family = family
        self.captured: Algorithm | None = None
        self.launched: list[str] = []

    def launch(self, *operands: Any, algorithm: Algorithm | None = None) -> None:
        a = algorithm or self.algorithm
        self.launched.append(a.label)
        self.cp.spend(BASELINE_COSTS.get(a.label, BASELINE_COSTS["torch"]))
        value = self.compute(*operands[:-1])
        operands[-1][...] = value * (2.0 if a.label == "BROKEN" else 1.0)

    def select(self, label: str) -> None:
        self.algorithm = next(a for a in self.algorithms if a.label == label)

    def describe(self, algorithm: Algorithm | None = None) -> str:
        return f"fake cuSPARSE {self.family} {(algorithm or self.algorithm).label}"

    def capture(self, *operands: Any) -> FakeGraph:
        self.captured = self.algorithm
        return FakeGraph(lambda: self.launch(*operands))
