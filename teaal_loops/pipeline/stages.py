"""The pipeline's stages, one function each: spec file -> Spec -> Schedule -> source -> kernel.

The command line, the Python API (:func:`teaal_loops.compile`) and ``auto`` all go through
these, so a spec means the same thing on every path.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from teaal_loops.codegen import make_config, render
from teaal_loops.errors import spec_errors
from teaal_loops.ir.model import Schedule
from teaal_loops.lowering import lower
from teaal_loops.runtime import Kernel
from teaal_loops.spec import load_spec
from teaal_loops.spec.model import Spec


def read_spec(spec: str | Path | Spec) -> Spec:
    """A parsed spec from a path (or the spec itself)."""
    return spec if isinstance(spec, Spec) else load_spec(str(spec))


def load_schedule(
    spec: str | Path | Spec,
    *,
    params: Mapping[str, int] | None = None,
    layout: str | None = None,
) -> Schedule:
    """Parse (if given a path) and lower one spec; an error the spec's values caused points
    at the value (its key path located in the spec)."""
    parsed = read_spec(spec)
    with spec_errors(parsed):
        return lower(parsed, params=dict(params or {}), layout=layout)


def kernel_source(
    schedule: Schedule,
    *,
    dtype: object = "float32",
    layout: str | None = None,
    index_bits: int = 32,
    regenerate: str | None = None,
) -> str:
    """CUDA source of one kernel of ``schedule``."""
    cfg = make_config(schedule, dtype=dtype, layout=layout, index_bits=index_bits)
    return render(cfg, regenerate)


def make_kernel(
    schedule: Schedule,
    *,
    dtype: object = "float32",
    layout: str | None = None,
    params: Mapping[str, int] | None = None,
    padding_limit: float | None | str = "default",
) -> Kernel:
    return Kernel(
        schedule, dtype=dtype, layout=layout, params=params, padding_limit=padding_limit
    )

