"""CUDA code generation: schedule IR -> Jinja2 templates -> CUDA source.

``render_schedule(schedule, dtype=..., layout=..., index_bits=...)`` is the one entry point most
callers need; :mod:`teaal_loops.codegen.files` writes the ``generated/`` tree.
"""

from __future__ import annotations

from teaal_loops.codegen.config import (
    VECTOR_PARAMS,
    KernelConfig,
    make_config,
    normalize_dtype,
)
from teaal_loops.codegen.render import clear_caches, comment_text, render, template_dir
from teaal_loops.ir.model import BoundSchedule, Schedule


def render_schedule(
    schedule: Schedule,
    *,
    dtype: object = "float32",
    layout: str | None = None,
    index_bits: int = 32,
    bound: BoundSchedule | None = None,
) -> str:
    """CUDA source for ``schedule`` (see :func:`teaal_loops.codegen.config.make_config`)."""
    return render(
        make_config(schedule, dtype=dtype, layout=layout, index_bits=index_bits, bound=bound)
    )


__all__ = [
    "VECTOR_PARAMS",
    "KernelConfig",
    "clear_caches",
    "comment_text",
    "make_config",
    "normalize_dtype",
    "render",
    "render_schedule",
    "template_dir",
]
