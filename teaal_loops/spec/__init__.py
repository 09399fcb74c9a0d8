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

import math
import os
from collections.abc import Mapping
from typing import Any

from teaal_loops.spec.expressions import expr_to_str
from teaal_loops.spec.model import (
    ExprNode,
    Intersect,
    ScalarRef,
    Spec,
    Take,
    TensorAccess,
    Union,
    Warning_,
)
from teaal_loops.spec.parse import Context, parse_document, read_spec_text
from teaal_loops.spec.validate import build_spec

__all__ = ["Spec", "load_spec", "load_spec_string", "spec_to_json", "expr_to_json"]


def load_spec(path: str | os.PathLike[str], *, strict: bool = False) -> Spec:
    """Load and validate the spec file at ``path``.

    Raises :class:`SpecError` for malformed specs (and ``OSError`` subclasses for missing or
    unreadable files, which the CLI reports as one line)."""
    name = os.fspath(path)
    return load_spec_string(read_spec_text(name), source=name, strict=strict)


def load_spec_string(text: str, *, source: str | None = None, strict: bool = False) -> Spec:
    """Parse and validate spec ``text``; ``source`` names it in messages (``<string>`` if None)."""
    ctx = Context(source, strict)
    draft = parse_document(text, ctx)
    return build_spec(draft, ctx)


# ------------------------------------------------------------------------------------------
# JSON (``teaal-loops parse``)
# ------------------------------------------------------------------------------------------


def expr_to_json(node: ExprNode) -> dict[str, Any]:
    """An expression tree as JSON: ``{"op": "intersect", "factors": [...]}`` and so on."""
    if isinstance(node, TensorAccess):
        return {
            "op": "tensor",
            "tensor": node.tensor,
            "indices": [str(i) for i in node.indices],
        }
    if isinstance(node, ScalarRef):
        return {"op": "scalar", "name": node.name}
    if isinstance(node, Intersect):
        return {"op": "intersect", "factors": [expr_to_json(f) for f in node.factors]}
    if isinstance(node, Union):
        return {
            "op": "union",
            "terms": [expr_to_json(t) for t in node.terms],
            "negated": list(node.negated),
        }
    assert isinstance(node, Take)
    return {"op": "take", "args": [expr_to_json(a) for a in node.args], "keep": node.keep}


def _plain(value: object) -> object:
    """Read-only mappings and tuples back to JSON-able dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _warning_json(w: Warning_) -> dict[str, Any]:
    loc = w.location
    return {
        "message": w.message,
        "key_path": w.key_path,
        "file": loc.file if loc else None,
        "line": loc.line if loc else None,
        "column": loc.column if loc else None,
    }


def spec_to_json(spec: Spec) -> dict[str, Any]:
    """The normalized spec as JSON-able data (what ``teaal-loops parse`` prints)."""
    einsums = []
    for e in spec.einsums:
        out = e.name
        einsums.append(
            {
                "output": out,
                "text": e.text,
                "normalized": f"{expr_to_str(e.output)} = {expr_to_str(e.expr)}",
                "expr": expr_to_json(e.expr),
                "final_ranks": list(spec.final_ranks[out]),
                "loop_order": list(spec.loop_order_of(out)),
                "loop_order_given": out in spec.mapping.loop_order,
            }
        )
    partitioning = {
        out: [
            {
                "ranks": list(p.ranks),
                "name": p.name,
                "functions": [
                    {
                        "kind": f.kind,
                        "text": f.text,
                        "size": f.size,
                        "leader": f.leader,
                        "target": f.target,
                        "extension": f.kind.startswith("x_"),
                    }
                    for f in p.functions
                ],
                "produces": list(p.produces),
                "intermediates": list(p.intermediates),
            }
            for p in parts
        ]
        for out, parts in spec.mapping.partitioning.items()
    }
    spacetime = {
        out: {
            "space": [{"rank": r.rank, "style": r.style} for r in st.space],
            "time": [{"rank": r.rank, "style": r.style} for r in st.time],
            "slip": st.slip,
        }
        for out, st in spec.mapping.spacetime.items()
    }
    formats = {
        tensor: {
            f.name: {
                "rank-order": list(f.rank_order),
                "ranks": {
                    r.rank: {
                        k: v
                        for k, v in (
                            ("format", r.format),
                            ("layout", r.layout),
                            ("cbits", r.cbits),
                            ("pbits", r.pbits),
                        )
                        if v is not None
                    }
                    for r in f.ranks
                },
            }
            for f in fs
        }
        for tensor, fs in spec.formats.items()
    }
    ext = spec.extensions
    return {
        "source": spec.source,
        "name": spec.name,
        "declaration": _plain(spec.declaration),
        "einsums": einsums,
        "mapping": {
            "rank-order": _plain(spec.mapping.rank_order),
            "partitioning": partitioning,
            "loop-order": _plain(spec.mapping.loop_order),
            "spacetime": spacetime,
        },
        "format": formats,
        "architecture": _plain(spec.architecture),
        "bindings": _plain(spec.bindings),
        "x-teaal-loops": None
        if ext is None
        else {
            "schedule": ext.schedule,
            "layout": ext.layout,
            "block_threads": ext.block_threads,
            "params": dict(ext.params),
        },
        "final_ranks": _plain(spec.final_ranks),
        "parameters": list(spec.parameters),
        "warnings": [_warning_json(w) for w in spec.warnings],
    }
