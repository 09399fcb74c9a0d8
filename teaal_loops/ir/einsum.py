"""Which einsum a spec computes, in the roles the schedule IR gives its tensors and ranks.

The generator handles the SpMV family ``Z[m] = A[m, k] * B[k]`` (any tensor, rank and index
names, either factor order). :func:`recognise_spmv` names the roles: the sparse matrix, the
dense vector, the output, the rank the output keeps (``M``) and the contracted rank (``K``).

The matrix must be declared with the kept rank first (``A: [M, K]``): the runtime computes
``A @ x`` of the matrix it is given, so a declaration ``A: [K, M]`` (the transposed product
``Z[m] = A[k, m] * B[k]``) would silently compute something else and is refused. A stored
column-major order is a ``rank-order`` (``A: [K, M]`` under ``mapping.rank-order``), which the
CSC layout serves.
"""

from __future__ import annotations

from dataclasses import dataclass

from teaal_loops.errors import UnsupportedMappingError
from teaal_loops.spec.model import Einsum, Intersect, Spec, TensorAccess


@dataclass(frozen=True)
class SpmvShape:
    """The roles of the tensors and ranks in ``Z[m] = A[m, k] * B[k]``."""

    einsum: Einsum
    output: str
    matrix: str
    vector: str
    row_rank: str  # the matrix rank the output keeps (M)
    col_rank: str  # the contracted rank (K)
    row_var: str  # their index variables in the einsum (m, k)
    col_var: str
    matrix_rank_order: tuple[str, ...]


def recognise_spmv(spec: Spec) -> SpmvShape:
    """Find the one SpMV-shaped einsum of ``spec`` and name the roles of its tensors and ranks."""
    candidates = [e for e in spec.einsums if _spmv_roles(spec, e) is not None]
    if not candidates:
        texts = "; ".join(e.text for e in spec.einsums) or "none"
        raise UnsupportedMappingError(
            f"the GPU generator supports SpMV, Z[m] = A[m, k] * B[k] (any names, either factor "
            f"order); this spec's einsums are: {texts}",
            location=spec.einsums[0].location if spec.einsums else None,
            key_path="einsum.expressions",
        )
    if len(spec.einsums) > 1:
        others = [e.text for e in spec.einsums if e is not candidates[0]]
        raise UnsupportedMappingError(
            f"the GPU generator lowers one SpMV einsum per spec; also found: {'; '.join(others)}",
            location=spec.einsums[0].location,
            key_path="einsum.expressions",
        )
    roles = _spmv_roles(spec, candidates[0])
    assert roles is not None
    return roles


def _spmv_roles(spec: Spec, e: Einsum) -> SpmvShape | None:
    out = e.output
    if len(out.indices) != 1 or not out.indices[0].is_plain:
        return None
    if not isinstance(e.expr, Intersect) or len(e.expr.factors) != 2:
        return None
    factors = e.expr.factors
    if not all(isinstance(f, TensorAccess) for f in factors):
        return None
    accesses = [f for f in factors if isinstance(f, TensorAccess)]
    if any(not all(i.is_plain for i in f.indices) for f in accesses):
        return None
    mats = [f for f in accesses if len(f.indices) == 2]
    vecs = [f for f in accesses if len(f.indices) == 1]
    if len(mats) != 1 or len(vecs) != 1:
        return None
    m_var = out.indices[0].variables[0]
    mat, vec = mats[0], vecs[0]
    mat_vars = [i.variables[0] for i in mat.indices]
    k_var = vec.indices[0].variables[0]
    if sorted(mat_vars) != sorted([m_var, k_var]) or m_var == k_var:
        return None
    declared = spec.declaration.get(mat.tensor)
    if declared is None or len(declared) != 2:
        return None
    if mat_vars.index(m_var) != 0:
        raise UnsupportedMappingError(
            f"{mat.tensor} is indexed [{', '.join(mat_vars)}] in {e.text}: the transposed "
            f"product (the kept index {m_var} second) is not supported; write "
            f"{mat.tensor}[{m_var}, {k_var}] with {mat.tensor} declared "
            f"[{declared[mat_vars.index(m_var)]}, {declared[mat_vars.index(k_var)]}] and give "
            f"a column-major rank-order (CSC) if that is how it is stored",
            location=e.location,
            key_path="einsum.expressions",
        )
    order = tuple(spec.mapping.rank_order.get(mat.tensor, declared))
    return SpmvShape(
        einsum=e,
        output=out.tensor,
        matrix=mat.tensor,
        vector=vec.tensor,
        row_rank=declared[mat_vars.index(m_var)],
        col_rank=declared[mat_vars.index(k_var)],
        row_var=m_var,
        col_var=k_var,
        matrix_rank_order=order,
    )


