"""Run the HiFiber program of a spec on fibertree (when importable) or on the built-in fibers.

``run_reference(spec, tensors, params=..., engine="auto")`` builds every input tensor in its
stored rank order (a fibertree of its nonzeros; fibertree treats zeros as absent, so explicit
zeros of a sparse matrix are dropped and multiplies by a zero operand do not happen), binds the
rank shapes, scalars and the stamp recorder, executes the program text and returns the dense
outputs of every einsum with one :class:`Stamp` per multiply.
"""

from __future__ import annotations

import importlib
import linecache
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from teaal_loops import fibers
from teaal_loops.errors import MatrixError, TeaalLoopsError
from teaal_loops.reference.hifiber import render
from teaal_loops.reference.names import comment
from teaal_loops.reference.plan import EinsumPlan, bind_params, plan_spec
from teaal_loops.reference.stamps import Recorder, Stamp
from teaal_loops.spec.model import Spec

Engine = Literal["auto", "fibertree", "builtin"]
FIBERTREE_URL = "https://github.com/Fibertree-Project/fibertree"


@dataclass(frozen=True)
class ReferenceResult:
    """What a reference run produced.

    ``outputs``: every einsum's output as a dense array (axes in declaration order; float64,
    or int64 when every input is integral). ``engine``: ``"fibertree"`` or ``"builtin"``.
    ``stamps``: one per multiply, in execution order. ``source``: the program that ran.
    """

    outputs: dict[str, npt.NDArray[Any]]
    engine: str
    stamps: tuple[Stamp, ...]
    source: str
    params: dict[str, int] = field(default_factory=dict)


_FIBERTREE: ModuleType | None = None
_FIBERTREE_ERROR: str | None = None


def fibertree_module() -> ModuleType | None:
    """fibertree if it can be imported (cached), else None."""
    global _FIBERTREE, _FIBERTREE_ERROR
    if _FIBERTREE is None and _FIBERTREE_ERROR is None:
        try:
            _FIBERTREE = importlib.import_module("fibertree")
        except Exception as err:  # any import failure means: not usable here
            _FIBERTREE_ERROR = f"{type(err).__name__}: {err}"
    return _FIBERTREE


def fibertree_available() -> bool:
    return fibertree_module() is not None


def load_engine(engine: str) -> tuple[str, Any]:
    """(engine name, namespace with Tensor, Fiber, Payload)."""
    if engine not in ("auto", "fibertree", "builtin"):
        raise TeaalLoopsError(
            f"unknown reference engine {engine!r} (expected auto, fibertree or builtin)"
        )
    if engine in ("auto", "fibertree"):
        ft = fibertree_module()
        if ft is not None:
            return "fibertree", SimpleNamespace(
                Tensor=ft.Tensor, Fiber=ft.Fiber, Payload=ft.Payload
            )
        if engine == "fibertree":
            raise TeaalLoopsError(
                f"--reference fibertree: fibertree is not importable here ({_FIBERTREE_ERROR}); "
                f"install it from {FIBERTREE_URL} or use --reference builtin"
            )

    return "builtin", SimpleNamespace(
        Tensor=fibers.Tensor, Fiber=fibers.Fiber, Payload=fibers.Payload
    )


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


@dataclass
class _Coo:
    coords: npt.NDArray[np.int64]  # (nnz, ndim), declaration axis order
    values: npt.NDArray[Any]
    shape: tuple[int, ...]


def _to_coo(name: str, value: Any, ndim: int) -> _Coo:
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a dependency
        sp = None
    if sp is not None and sp.issparse(value):
        if ndim != 2:
            raise MatrixError(f"{name}: a sparse matrix for a tensor of {ndim} ranks")
        coo = sp.coo_matrix(value)
        coo.sum_duplicates()
        keep = coo.data != 0
        coords = np.stack([coo.row[keep], coo.col[keep]], axis=1).astype(np.int64)
        return _Coo(coords, coo.data[keep], tuple(int(s) for s in coo.shape))
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise MatrixError(f"{name}: values of type {arr.dtype} (expected integers or reals)")
    if arr.ndim != ndim:
        raise MatrixError(f"{name}: {arr.ndim}-dimensional array for a tensor of {ndim} ranks")
    nz = np.nonzero(arr)
    coords = np.stack(nz, axis=1).astype(np.int64) if ndim else np.zeros((0, 0), np.int64)
    return _Coo(coords, arr[nz], tuple(int(s) for s in arr.shape))


def _python_values(values: npt.NDArray[Any], integral: bool) -> list[Any]:
    if integral:
        return [int(v) for v in values.tolist()]
    return [float(v) for v in values.tolist()]


def _build_tensor(
    eng: Any,
    name: str,
    coo: _Coo,
    declared: tuple[str, ...],
    order: tuple[str, ...],
    integral: bool,
) -> Any:
    perm = [declared.index(r) for r in order]
    coords = coo.coords[:, perm] if len(coo.values) else np.zeros((0, len(order)), np.int64)
    shape = [coo.shape[i] for i in perm]
    if len(coo.values):
        idx = np.lexsort(coords.T[::-1])
        coords = coords[idx]
        values = _python_values(coo.values[idx], integral)
    else:
        values = []

    def rec(lo: int, hi: int, level: int) -> Any:
        col = coords[lo:hi, level]
        if level == len(order) - 1:
            return eng.Fiber(col.tolist(), values[lo:hi], active_range=(0, shape[level]))
        if hi == lo:
            return eng.Fiber([], [], active_range=(0, shape[level]))
        change = np.flatnonzero(np.diff(col)) + 1
        starts = np.concatenate(([0], change)) + lo
        ends = np.concatenate((change, [hi - lo])) + lo
        payloads = [rec(int(s), int(t), level + 1) for s, t in zip(starts, ends, strict=True)]
        return eng.Fiber(col[starts - lo].tolist(), payloads, active_range=(0, shape[level]))

    root = rec(0, len(values), 0)
    return eng.Tensor.fromFiber(rank_ids=list(order), fiber=root, shape=shape, name=name)


# --------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------


def _to_dense(
    eng: Any,
    tensor: Any,
    order: tuple[str, ...],
    declared: tuple[str, ...],
    shapes: Mapping[str, int],
    dtype: Any,
) -> npt.NDArray[Any]:
    get = eng.Payload.get
    if not order:
        return np.array(get(tensor.getRoot()), dtype=dtype)
    arr = np.zeros([shapes[r] for r in order], dtype=dtype)

    def walk(fiber: Any, prefix: tuple[int, ...]) -> None:
        for c, p in fiber:
            if len(prefix) + 1 == len(order):
                arr[prefix + (c,)] = get(p)
            else:
                walk(p, prefix + (c,))

    walk(tensor.getRoot(), ())
    perm = [order.index(r) for r in declared]
    return arr.transpose(perm)


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


def run_reference(
    spec: Spec,
    tensors: Mapping[str, Any],
    *,
    params: Mapping[str, int] | None = None,
    engine: Engine | str = "auto",
) -> ReferenceResult:
    """Execute the spec's HiFiber program on ``tensors`` (see the module docstring)."""
    values = bind_params(spec, params or {})
    plans = plan_spec(spec)
    program = render(spec, plans, values)
    name, eng = load_engine(engine)

    inputs = program.inputs
    scalars = sorted({s for p in plans for s in p.scalars})
    _check_names_given(spec, list(inputs), scalars, tensors)
    coos = {t: _to_coo(t, tensors[t], len(spec.declaration[t])) for t in inputs}
    scalar_values = {s: _scalar(s, tensors[s]) for s in scalars}
    integral = all(c.values.dtype.kind in "biu" for c in coos.values()) and all(
        a.dtype.kind in "biu" for a in scalar_values.values()
    )
    shapes = _rank_shapes(spec, coos)

    ns: dict[str, Any] = {
        "__name__": "hifiber",
        "Tensor": eng.Tensor,
        "Fiber": eng.Fiber,
        "Payload": eng.Payload,
    }
    for t, var in inputs.items():
        order = tuple(spec.mapping.rank_order.get(t, spec.declaration[t]))
        ns[var] = _build_tensor(eng, t, coos[t], tuple(spec.declaration[t]), order, integral)
    for rank, size in shapes.items():
        ns[program.shape_var(rank)] = size
    for s, arr in scalar_values.items():
        ns[program.scalar_var(s)] = int(arr) if integral else float(arr)
    recorder = Recorder(_layout(plans))
    ns["record"] = recorder

    _exec(program.source, ns, name, spec)

    dtype = np.int64 if integral else np.float64
    outputs = {}
    for out, var in program.outputs.items():
        plan = next(p for p in plans if p.output.name == out)
        outputs[out] = _to_dense(
            eng, ns[var], plan.output.rank_order, plan.output.declared, shapes, dtype
        )
    return ReferenceResult(outputs, name, recorder.stamps(), program.source, dict(values))


def _check_names_given(
    spec: Spec, inputs: list[str], scalars: list[str], tensors: Mapping[str, Any]
) -> None:
    """Every input and scalar given, and nothing else."""
    wanted = inputs + scalars
    missing = [t for t in wanted if t not in tensors]
    if missing:
        raise MatrixError(
            f"the reference of {comment(spec.name)} needs {', '.join(missing)} "
            f"(inputs: {', '.join(wanted)})"
        )
    unknown = sorted(set(tensors) - set(wanted), key=str)
    if unknown:
        raise MatrixError(
            f"{comment(', '.join(map(str, unknown)))}: not an input of {comment(spec.name)} "
            f"(inputs: {', '.join(wanted)})"
        )


def _scalar(name: str, value: Any) -> npt.NDArray[Any]:
    arr = np.asarray(value)
    if arr.ndim != 0 or arr.dtype.kind not in "biuf":
        raise MatrixError(f"scalar {name}: expected one number, got {comment(repr(value))}")
    return arr


def _rank_shapes(spec: Spec, coos: Mapping[str, _Coo]) -> dict[str, int]:
    """The size of every rank, which all tensors holding it must agree on."""
    shapes: dict[str, int] = {}
    owner: dict[str, str] = {}
    for t, coo in coos.items():
        for rank, size in zip(spec.declaration[t], coo.shape, strict=True):
            if rank in shapes and shapes[rank] != size:
                raise MatrixError(
                    f"rank {rank} has size {shapes[rank]} in {owner[rank]} but {size} in {t}"
                )
            shapes[rank] = size
            owner[rank] = t
    return shapes


def _layout(
    plans: list[EinsumPlan],
) -> dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]]:
    return {
        p.output.name: (
            p.index_vars,
            tuple(r for r, _ in p.space),
            tuple(r for r, _ in p.time),
        )
        for p in plans
    }


def _exec(source: str, ns: dict[str, Any], engine: str, spec: Spec) -> None:
    shown = comment(spec.name)  # a file name may hold anything: one printable line
    filename = f"<hifiber {shown}>"
    code = compile(source, filename, "exec")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        exec(code, ns)
    except TeaalLoopsError:
        raise
    except Exception as err:
        where = ""
        for frame in reversed(traceback.extract_tb(sys.exc_info()[2])):
            if frame.filename == filename:
                where = f" at program line {frame.lineno}: {(frame.line or '').strip()}"
                break
        hint = ""
        if "swizzleRanks" in where and isinstance(err, ValueError):
            hint = (
                " (fibertree cannot swizzle a split rank whose partition coordinate lies outside "
                "its fiber's active range: use uniform_shape sizes that are multiples of the "
                "size below them, or a loop order that keeps each rank's splits together)"
            )
        raise TeaalLoopsError(
            f"the HiFiber program of {shown} failed on {engine}{comment(where)}: "
            f"{type(err).__name__}: {comment(err)}{hint}"
        ) from err
