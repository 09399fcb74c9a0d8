"""The TeAAL spec front end: YAML in, a validated immutable :class:`Spec` out.

    from teaal_loops.spec import load_spec
    spec = load_spec("specs/thread_mapped.yaml")
    spec.final_ranks["Z"]      # ('M2', 'M1', 'M0', 'K')
    spec.loop_order_of("Z")    # the given loop-order, else the final ranks
    spec.parameters            # ('NUM_TILES', 'NUM_THREADS')

Every problem with the input is a :class:`~teaal_loops.errors.SpecError` whose ``str()`` is
``FILE:LINE:COL: error: KEY.PATH: MESSAGE (expected ...)``; findings that TeAAL would silently
ignore (unknown keys) are collected in ``spec.warnings``. ``strict=True`` accepts only
TeAAL's own dialect and rejects our extensions (the ``x-teaal-loops`` section and the
``x_merge_path`` partitioning function).
"""

from __future__ import annotations

import os

from teaal_loops.errors import Location, SpecError
from teaal_loops.spec.context import Context
from teaal_loops.spec.model import Spec
from teaal_loops.spec.parse import MAX_SPEC_BYTES, parse_document, read_spec_text
from teaal_loops.spec.to_json import expr_to_json, spec_to_json
from teaal_loops.spec.validate import build_spec

__all__ = ["Spec", "load_spec", "load_spec_string", "spec_to_json", "expr_to_json"]


def load_spec(path: str | os.PathLike[str], *, strict: bool = False) -> Spec:
    """Load and validate the spec file at ``path``.

    Raises :class:`SpecError` for malformed specs and for files that cannot be read (missing,
    not a regular file, larger than 16 MiB, not UTF-8), naming the file."""
    name = os.fspath(path)
    return load_spec_string(read_spec_text(name), source=name, strict=strict)


def load_spec_string(text: str, *, source: str | None = None, strict: bool = False) -> Spec:
    """Parse and validate spec ``text``; ``source`` names it in messages (``<string>`` if None)."""
    if len(text) > MAX_SPEC_BYTES:
        raise SpecError(
            f"the spec has {len(text)} characters; at most {MAX_SPEC_BYTES} are read",
            location=Location(source),
        )
    ctx = Context(source, strict)
    draft = parse_document(text, ctx)
    return build_spec(draft, ctx)
