"""The driver: spec file -> schedule -> source -> kernel, for the CLI, the Python API and auto.

    kernel = teaal_loops.compile("specs/merge_path.yaml", dtype="float32", params={...})
    y = kernel(A, x)                 # A: scipy.sparse, cupyx.scipy.sparse, NumPy or CuPy;
                                     # prepared once, remembered for the next call with A
    owner = kernel.trace(A, x)       # owning thread of every nonzero (trace build)
    prepared = kernel.prepare(A)     # upload + validate now; kernel(prepared, x) reuses it
    kernel.launch(prepared, x_dev, y_dev)      # raw launch (caller zeroes y if needed)
    kernel.launch_into(prepared, x_dev, y_dev) # zeroing + launch, no allocation
    graph = kernel.capture(prepared, x_dev, y_dev); graph.launch()   # a CUDA graph
    op = kernel.linear_operator(A)   # for cupyx.scipy.sparse.linalg.cg, gmres, eigsh, ...
    kernel.forget(A)                 # after editing A's arrays in place (see docs/api.md)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from teaal_loops.auto import is_auto
from teaal_loops.errors import ParameterError
from teaal_loops.ir.model import Schedule
from teaal_loops.pipeline.auto_kernel import AutoKernel
from teaal_loops.pipeline.stages import (
    kernel_source,
    load_schedule,
    make_kernel,
    read_spec,
)
from teaal_loops.runtime import Kernel


def compile(  # noqa: A001 - the public name the API promises: teaal_loops.compile
    spec: Any,
    *,
    layout: str | None = None,
    dtype: object = "float32",
    params: Mapping[str, int] | None = None,
    padding_limit: float | None | str = "default",
) -> Kernel | AutoKernel:
    """A :class:`Kernel` for ``spec``: a path to a spec YAML, a parsed Spec, or a Schedule.

    ``padding_limit`` bounds padded layouts (ELL, DIA, BCSR) at that many times the CSR bytes
    (None: no bound; default 20, loops' SKIP_TOO_LARGE). ``layout=None`` takes the spec's
    (its ``format`` section, else its rank order: CSR for
    ``[M, K]``). A spec saying ``x-teaal-loops: {schedule: auto}`` gives an
    :class:`~teaal_loops.pipeline.auto_kernel.AutoKernel` that chooses per matrix. Nothing
    touches the GPU until the kernel is called; unknown layouts, dtypes and parameters fail here.
    """
    if isinstance(spec, Schedule):
        return make_kernel(
            spec, dtype=dtype, layout=layout, params=params, padding_limit=padding_limit
        )
    if isinstance(spec, (str, Path)):
        spec = read_spec(spec)
    if is_auto(spec):
        if params:
            raise ParameterError(
                "schedule auto chooses the parameters per matrix; drop params= or choose a "
                "schedule in the spec"
            )
        return AutoKernel(spec, dtype=dtype, layout=layout, padding_limit=padding_limit)
    schedule = load_schedule(spec, params=params, layout=layout)
    return make_kernel(schedule, dtype=dtype, layout=layout, padding_limit=padding_limit)


def compile_for(
    spec: Any,
    A: Any,
    *,
    layout: str | None = None,
    dtype: object = "float32",
    params: Mapping[str, int] | None = None,
    padding_limit: float | None | str = "default",
) -> Kernel:
    """:func:`compile` for one matrix ``A``: ``schedule: auto`` is resolved with its statistics."""
    kernel = compile(
        spec, layout=layout, dtype=dtype, params=params, padding_limit=padding_limit
    )
    return kernel.kernel_for(A) if isinstance(kernel, AutoKernel) else kernel


__all__ = [
    "AutoKernel",
    "compile",
    "compile_for",
    "kernel_source",
    "load_schedule",
    "make_kernel",
    "read_spec",
]
