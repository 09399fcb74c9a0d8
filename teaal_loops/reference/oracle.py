"""A NumPy/SciPy oracle for a spec's einsums (values only: no spacetime).

Used where the HiFiber reference would be too slow (it runs at Python speed) and by the tests
as an independent check of the reference. Semantics are the einsum's: a product is summed over
the indices absent from the output, a sum adds its terms, ``take(A, B, i)`` is argument ``i``
where every argument is nonzero. A sparse matrix times a dense operand (SpMV, SpMM) stays
sparse; everything else is computed densely.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from teaal_loops.errors import MatrixError
from teaal_loops.reference.plan import plan_spec
from teaal_loops.spec.model import (
    Einsum,
    ExprNode,
    Intersect,
    ScalarRef,
    Spec,
    Take,
    TensorAccess,
    Union,
)


def numpy_oracle(spec: Spec, tensors: Mapping[str, Any]) -> dict[str, npt.NDArray[Any]]:
    """Every einsum's output, computed with NumPy/SciPy (float64, or int64 for integers)."""
    plan_spec(spec)  # refuse what the reference refuses, with the same messages
    env: dict[str, Any] = dict(tensors)
    out: dict[str, npt.NDArray[Any]] = {}
    for e in spec.einsums:
        value = _einsum(e, env)
        out[e.name] = value
        env[e.name] = value
    return out


def _is_sparse(x: Any) -> bool:
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover
        return False
    return bool(sp.issparse(x))


def _dense(x: Any) -> npt.NDArray[Any]:
    arr = x.toarray() if _is_sparse(x) else np.asarray(x)
    if arr.dtype.kind in "biu":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        return arr.astype(np.float64)
    raise MatrixError(f"values of type {arr.dtype} (expected integers or reals)")


def _einsum(e: Einsum, env: Mapping[str, Any]) -> npt.NDArray[Any]:
    out_vars = [i.variables[0] for i in e.output.indices]
    fast = _sparse_product(e, env, out_vars)
    if fast is not None:
        return fast
    letters: dict[str, str] = {}

    def letter(v: str) -> str:
        if v not in letters:
            letters[v] = (
                chr(ord("a") + len(letters))
                if len(letters) < 26
                else chr(ord("A") + len(letters) - 26)
            )
        return letters[v]

    def term_value(node: ExprNode) -> npt.NDArray[Any]:
        """A product term: einsum of its tensors (times its scalars), onto the output."""
        scalars = 1
        operands: list[npt.NDArray[Any]] = []
        subs: list[str] = []
        mask_from: list[int] = []
        factors: tuple[ExprNode, ...]
        if isinstance(node, Take):
            factors = node.args
        elif isinstance(node, Intersect):
            factors = node.factors
        else:
            factors = (node,)
        for i, f in enumerate(factors):
            if isinstance(f, ScalarRef):
                scalars = scalars * np.asarray(env[f.name]).item()
                continue
            assert isinstance(f, TensorAccess)
            arr = _dense(env[f.tensor])
            if isinstance(node, Take) and i != node.keep:
                arr = (arr != 0).astype(np.int64)  # take: the others only mask
                mask_from.append(i)
            operands.append(arr)
            subs.append("".join(letter(idx.variables[0]) for idx in f.indices))
        target = "".join(letter(v) for v in out_vars)
        if not operands:
            return np.asarray(scalars)
        value = np.einsum(",".join(subs) + "->" + target, *operands)
        return value * scalars if scalars != 1 else value

    expr = e.expr
    if isinstance(expr, Union):
        total: Any = None
        for i, term in enumerate(expr.terms):
            v = term_value(term)
            if expr.negated and expr.negated[i]:
                v = -v
            total = v if total is None else total + v
        return np.asarray(total)
    return np.asarray(term_value(expr))


def _sparse_product(e: Einsum, env: Mapping[str, Any], out_vars: list[str]) -> Any:
    """``Z[m(,n)] = A[m, k] * B[k(, n)]`` with A sparse: a SciPy product, no densifying."""
    expr = e.expr
    if not isinstance(expr, Intersect) or len(expr.factors) != 2:
        return None
    a, b = expr.factors
    if not (isinstance(a, TensorAccess) and isinstance(b, TensorAccess)):
        return None
    if not _is_sparse(env.get(a.tensor)) or len(a.indices) != 2:
        return None
    m, k = (i.variables[0] for i in a.indices)
    bv = [i.variables[0] for i in b.indices]
    mat = env[a.tensor].tocsr()
    if mat.dtype.kind in "biu":
        mat = mat.astype(np.int64)
    else:
        mat = mat.astype(np.float64)
    other = _dense(env[b.tensor])
    if bv == [k] and out_vars == [m]:
        return np.asarray(mat @ other)
    if len(bv) == 2 and bv[0] == k and out_vars == [m, bv[1]]:
        return np.asarray(mat @ other)
    return None
