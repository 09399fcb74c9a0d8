"""Running generated kernels on the GPU through CuPy (imported lazily, only when a kernel runs).

    kernel = teaal_loops.compile("specs/merge_path.yaml", dtype="float32", params={...})
    y = kernel(A, x)                 # A: scipy.sparse, cupyx.scipy.sparse, NumPy or CuPy
    owner = kernel.trace(A, x)       # owning thread of every nonzero (trace build)
    prepared = kernel.prepare(A)     # upload + validate once; kernel(prepared, x) reuses it
    kernel.launch(prepared, x_dev, y_dev)   # raw launch for timing (caller zeroes y if needed)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from teaal_loops.errors import ParameterError
from teaal_loops.runtime.auto_kernel import AutoKernel
from teaal_loops.runtime.backend import cupy_module, device_info, gpu_available
from teaal_loops.runtime.kernel import Kernel, PreparedMatrix


def compile(  # noqa: A001 - the public name the API promises: teaal_loops.compile
    spec: Any,
    *,
    layout: str | None = None,
    dtype: object = "float32",
    params: Mapping[str, int] | None = None,
) -> Kernel | AutoKernel:
    """A :class:`Kernel` for ``spec``: a path to a spec YAML, a parsed Spec, or a Schedule.

    ``layout=None`` takes the spec's (its ``format`` section, else its rank order: CSR for
    ``[M, K]``). A spec saying ``x-teaal-loops: {schedule: auto}`` gives an
    :class:`~teaal_loops.runtime.auto_kernel.AutoKernel` that chooses per matrix. Nothing
    touches the GPU until the kernel is called; unknown layouts, dtypes and parameters fail here.
    """
    from teaal_loops.ir.model import Schedule

    if isinstance(spec, Schedule):
        return Kernel(spec, dtype=dtype, layout=layout, params=params)
    from teaal_loops.ir import lower

    if isinstance(spec, (str, Path)):
        from teaal_loops.spec import load_spec

        spec = load_spec(str(spec))
    from teaal_loops.auto import is_auto

    if is_auto(spec):
        if params:
            raise ParameterError(
                "schedule auto chooses the parameters per matrix; drop params= or choose a "
                "schedule in the spec"
            )
        return AutoKernel(spec, dtype=dtype, layout=layout)
    schedule = lower(spec, params=dict(params or {}), layout=layout)
    return Kernel(schedule, dtype=dtype, layout=layout)


def compile_for(
    spec: Any,
    A: Any,
    *,
    layout: str | None = None,
    dtype: object = "float32",
    params: Mapping[str, int] | None = None,
) -> Kernel:
    """:func:`compile` for one matrix ``A``: ``schedule: auto`` is resolved with its statistics."""
    kernel = compile(spec, layout=layout, dtype=dtype, params=params)
    return kernel.kernel_for(A) if isinstance(kernel, AutoKernel) else kernel


__all__ = [
    "AutoKernel",
    "Kernel",
    "PreparedMatrix",
    "compile",
    "compile_for",
    "cupy_module",
    "device_info",
    "gpu_available",
]
