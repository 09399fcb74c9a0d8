"""A product with TeAAL's scalar epilogue: ``Z = alpha * T1 + beta * C`` after SpMV or SpMM.

``kernel(A, x, C, a=2.0, b=0.5)``: the addend ``C`` follows the product's operands, the scalars
are passed by their names in the spec (:mod:`teaal_loops.runtime.operands` checks them all, and
``C``, before any launch). The product runs exactly as without an epilogue, writing ``T1``
(rounded to the kernel's dtype) into the output ``Z``; the source's second kernel,
``teaal_epilogue``, then updates every element of ``Z`` once, on the same stream, right after
it. Nothing synchronises with the host.

``launch_into`` (SpMV) runs both launches into the caller's arrays, without allocating, and
``kernel.capture`` records both (and the scalars' values) in one CUDA graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from teaal_loops.codegen.config import EPILOGUE_BLOCK_THREADS, EPILOGUE_KERNEL
from teaal_loops.errors import UnsupportedMappingError
from teaal_loops.runtime import backend
from teaal_loops.runtime.device_matrix import check_device_vector, to_device_vector
from teaal_loops.runtime.graphs import capture_launch
from teaal_loops.runtime.operands import (
    epilogue_addend,
    epilogue_arguments,
    epilogue_grid,
    epilogue_scalars,
    split_epilogue_operands,
)

MAX_BLOCKS = 2**31 - 1  # CUDA's grid limit along x; beyond it the kernel's threads stride


def call_with_epilogue(
    kernel: Any, A: Any, operands: Sequence[Any], out: Any, scalars: Mapping[str, Any]
) -> Any:
    """``Z = alpha * (A @ B) + beta * C`` (module docstring): a new output, or ``out``."""
    schedule = kernel.schedule
    if schedule.form.epilogue is None:
        epilogue_scalars(schedule, scalars, kernel.dtype)  # one line: no epilogue, no scalars
    product, addend = split_epilogue_operands(schedule, operands)
    alpha, beta = epilogue_scalars(schedule, scalars, kernel.dtype)  # before any device work
    cupy = kernel._cp()
    prepared = kernel.prepared_for(A)
    epi = schedule.form.epilogue
    if schedule.form.kind == "spmv":
        x = _vector(kernel, prepared, product[0], schedule.form.operands or ("x",))
        rows = prepared.shape.rows
        y = (kernel.new_output(prepared) if out is None
             else check_device_vector(cupy, out, kernel.dtype, rows, "out"))
        c = None if addend is None else epilogue_addend(cupy, addend, kernel.dtype, y, epi)
        if out is not None:
            kernel.zero_output(prepared, y)
        kernel.launch(prepared, x, y)
    else:
        call, y, geometry = kernel.dense_operands(prepared, product, out)
        c = None if addend is None else epilogue_addend(cupy, addend, kernel.dtype, y, epi)
        if out is not None and prepared.accumulates:
            y.fill(0)
        kernel.launch_dense(prepared, call, y, None, *geometry)
    launch_epilogue(kernel, prepared, y, c, alpha, beta)
    return y


def launch_into_with_epilogue(
    kernel: Any, prepared: Any, x: Any, y: Any, addend: Sequence[Any],
    scalars: Mapping[str, Any],
) -> None:
    """SpMV's ``launch_into`` with the epilogue: ``x``, ``y`` and ``C`` contiguous CuPy
    vectors of the kernel's dtype (checked by the caller for ``x`` and ``y``); zeroing where
    the product accumulates, the product, then the epilogue; no allocation."""
    c, alpha, beta = _checked_addend(kernel, prepared, y, addend, scalars)
    kernel.zero_output(prepared, y)
    kernel.launch(prepared, x, y)
    launch_epilogue(kernel, prepared, y, c, alpha, beta)


class _Bound:
    """What :func:`~teaal_loops.runtime.graphs.capture_launch` needs of a kernel, with the
    epilogue's addend and scalars bound: its dtype and ``launch_into(prepared, x, y)``."""

    def __init__(self, kernel: Any, addend: Sequence[Any], scalars: Mapping[str, Any]) -> None:
        self.dtype = kernel.dtype
        self._kernel, self._addend, self._scalars = kernel, tuple(addend), dict(scalars)

    def launch_into(self, prepared: Any, x: Any, y: Any) -> None:
        self._kernel.launch_into(prepared, x, y, *self._addend, **self._scalars)


def capture_with_epilogue(
    kernel: Any, A: Any, x: Any, y: Any, addend: Sequence[Any], scalars: Mapping[str, Any],
    stream: Any,
) -> Any:
    """A CUDA graph of ``launch_into(A, x, y, C, **scalars)``: the zeroing, the product and
    the epilogue. Everything is checked, compiled and loaded before the capture begins (a
    refusal leaves no stream capturing); the graph reads ``C``'s memory, which the returned
    object keeps alive (``.addend``)."""
    prepared = kernel.warm_up(A)
    cupy = kernel._cp()
    check_device_vector(cupy, x, kernel.dtype, prepared.shape.cols, "x")
    check_device_vector(cupy, y, kernel.dtype, prepared.shape.rows, "y")
    _checked_addend(kernel, prepared, y, addend, scalars)
    _function(prepared)
    captured = capture_launch(_Bound(kernel, addend, scalars), prepared, x, y, stream=stream)
    captured.addend = tuple(addend)
    return captured


def _checked_addend(
    kernel: Any, prepared: Any, y: Any, addend: Sequence[Any], scalars: Mapping[str, Any]
) -> tuple[Any, float, float]:
    """(C or None, alpha, beta) for SpMV's launch_into: C a contiguous CuPy vector like y."""
    schedule = kernel.schedule
    if schedule.form.epilogue is None:
        epilogue_scalars(schedule, scalars, kernel.dtype)  # one line: no epilogue, no scalars
    _, c_in = split_epilogue_operands(schedule, (y, *addend))
    alpha, beta = epilogue_scalars(schedule, scalars, kernel.dtype)
    epi = schedule.form.epilogue
    if c_in is None or epi is None or epi.addend is None:
        return None, alpha, beta
    cupy = kernel._cp()
    check_device_vector(cupy, c_in, kernel.dtype, prepared.shape.rows, epi.addend)
    return epilogue_addend(cupy, c_in, kernel.dtype, y, epi), alpha, beta


def _function(prepared: Any) -> Any:
    """The epilogue kernel of ``prepared``'s source (compiled and loaded once)."""
    fn = prepared._functions.get("epilogue")
    if fn is None:
        fn = backend.get_function(prepared.source, EPILOGUE_KERNEL)
        prepared._functions["epilogue"] = fn
    return fn


def refuse_product_only(schedule: Any, what: str) -> None:
    """``what`` runs the product alone: refused (one line) for a spec with an epilogue, whose
    map ``Z = a * T1 + b * C`` it would silently drop."""
    epi = schedule.form.epilogue
    if epi is not None:
        raise UnsupportedMappingError(
            f"{what} runs the product alone, but {schedule.spec_name} ends with the epilogue "
            f"{epi.text}: compile the product's einsum on its own for it"
        )


def launch_epilogue(
    kernel: Any, prepared: Any, z: Any, c: Any, alpha: float, beta: float
) -> None:
    """One launch of ``teaal_epilogue`` on ``z`` (the product, in place) on the current
    stream: one thread per element of ``z``."""
    args, elements = epilogue_arguments(prepared.config.epilogue_params(), z, c, alpha, beta)
    if elements == 0:
        return
    fn = _function(prepared)
    blocks = epilogue_grid(elements, EPILOGUE_BLOCK_THREADS, MAX_BLOCKS)
    fn((blocks, 1, 1), (EPILOGUE_BLOCK_THREADS, 1, 1), args)


def _vector(kernel: Any, prepared: Any, x: Any, names: tuple[str, ...]) -> Any:
    """SpMV's dense operand as a contiguous CuPy vector, errors naming it as the spec does."""
    cupy = kernel._cp()
    cols = prepared.shape.cols
    if (isinstance(x, cupy.ndarray) and x.dtype == kernel.dtype and x.shape == (cols,)
            and x.flags.c_contiguous):
        return x
    return to_device_vector(x, kernel.dtype, cols, name=names[0])
