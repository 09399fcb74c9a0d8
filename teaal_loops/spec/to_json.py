"""The normalized spec as JSON-able data: what ``teaal-loops parse`` prints."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from teaal_loops.spec.expressions import expr_to_str
from teaal_loops.spec.model import (
    ExprNode,
    Intersect,
    RankPartitioning,
    ScalarRef,
    SpaceTime,
    Spec,
    Take,
    TensorAccess,
    TensorFormat,
    Union,
    Warning_,
)


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


def _einsums_json(spec: Spec) -> list[dict[str, Any]]:
    return [
        {
            "output": e.name,
            "text": e.text,
            "normalized": f"{expr_to_str(e.output)} = {expr_to_str(e.expr)}",
            "expr": expr_to_json(e.expr),
            "final_ranks": list(spec.final_ranks[e.name]),
            "loop_order": list(spec.loop_order_of(e.name)),
            "loop_order_given": e.name in spec.mapping.loop_order,
        }
        for e in spec.einsums
    ]


def _partitioning_json(p: RankPartitioning) -> dict[str, Any]:
    return {
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


def _spacetime_json(st: SpaceTime) -> dict[str, Any]:
    return {
        "space": [{"rank": r.rank, "style": r.style} for r in st.space],
        "time": [{"rank": r.rank, "style": r.style} for r in st.time],
        "slip": st.slip,
    }


def _format_json(f: TensorFormat) -> dict[str, Any]:
    ranks = {}
    for r in f.ranks:
        attrs = (("format", r.format), ("layout", r.layout), ("cbits", r.cbits), ("pbits", r.pbits))
        ranks[r.rank] = {k: v for k, v in attrs if v is not None}
    return {"rank-order": list(f.rank_order), "ranks": ranks}


def spec_to_json(spec: Spec) -> dict[str, Any]:
    """The normalized spec as JSON-able data (what ``teaal-loops parse`` prints)."""
    ext = spec.extensions
    return {
        "source": spec.source,
        "name": spec.name,
        "declaration": _plain(spec.declaration),
        "einsums": _einsums_json(spec),
        "mapping": {
            "rank-order": _plain(spec.mapping.rank_order),
            "partitioning": {
                out: [_partitioning_json(p) for p in parts]
                for out, parts in spec.mapping.partitioning.items()
            },
            "loop-order": _plain(spec.mapping.loop_order),
            "spacetime": {out: _spacetime_json(st) for out, st in spec.mapping.spacetime.items()},
        },
        "format": {
            tensor: {f.name: _format_json(f) for f in fs} for tensor, fs in spec.formats.items()
        },
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
