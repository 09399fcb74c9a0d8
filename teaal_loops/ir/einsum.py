"""Which einsum a spec computes, in the roles the schedule IR gives its tensors and ranks.

The generator handles one family: one sparse 2-D operand times dense operands.

=========  ==========================================  ======================================
form       einsum (any tensor, rank and index names)    roles
=========  ==========================================  ======================================
spmv       ``Z[m] = A[m, k] * B[k]``                    A sparse, B a dense vector
spmm       ``Z[m, n] = A[m, k] * B[k, n]``              A sparse, B dense ``[K, N]``
sddmm      ``Z[m, n] = C[m, n] * A[m, k] * B[k, n]``    C sparse (sampler), A, B dense
=========  ==========================================  ======================================

* **Transposed forms:** the sparse operand of SpMV and SpMM may be declared the other way round
  (``Z[m] = A[k, m] * B[k]`` with ``A: [K, M]``): the product is then ``A^T @ B``, and the
  runtime hands ``A^T`` (the same arrays, read the other way) to the layout.
* **TeAAL's two-einsum forms:** ``T1[m, n] = A[m, k] * B[k, n]`` followed by
  ``Z[m, n] = C[m, n] * T1[m, n]`` is SDDMM (the dense product is only needed at C's nonzeros,
  so it is computed only there: ``T1`` is never materialised); followed by
  ``Z = a * T1 + b * C`` it is the product with a scalar epilogue (``a``, ``b`` scalars, ``C``
  dense, shaped like ``Z``).
* **Which operand is sparse:** the tensor the spec's ``format`` section gives a compressed
  (``C``) rank. Without a format: the sampler of SDDMM (the factor indexed like the output),
  else the product's only 2-D factor, else its first 2-D factor (``A`` in ``A[m, k] * B[k, n]``).
  Operands are bound by their names in the spec.

Anything else (two sparse operands, SpGEMM, 3-D tensors, affine indices) is refused with one
located line naming the supported forms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from teaal_loops.errors import UnsupportedMappingError
from teaal_loops.spec.model import (
    Einsum,
    ExprNode,
    Intersect,
    ScalarRef,
    Spec,
    TensorAccess,
    Union,
)

SUPPORTED_FORMS = (
    "SpMV Z[m] = A[m, k] * B[k]; transposed SpMV Z[m] = A[k, m] * B[k]; "
    "SpMM Z[m, n] = A[m, k] * B[k, n] (and A[k, m]); "
    "SDDMM Z[m, n] = C[m, n] * A[m, k] * B[k, n] (or T1 = A * B; Z = C * T1); "
    "an epilogue Z = a * T1 + b * C after SpMV or SpMM (any names; one sparse 2-D operand)"
)


@dataclass(frozen=True)
class DenseOperand:
    """A dense input (or the epilogue's addend): its name, the index variables it is read
    with in the einsum, and the rank order it is stored in (row-major in that order)."""

    name: str
    variables: tuple[str, ...]
    ranks: tuple[str, ...]  # declared ranks, in the einsum's index order
    storage: tuple[str, ...]  # rank-order (default: the declaration)


# Scalar names reach generated comments and Python keywords: plain ASCII identifiers only
# (the einsum parser accepts no other names; checked again here, where they leave the spec).
_SCALAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Epilogue:
    """``Z = alpha * T1 + beta * C``: scalar names (None: 1) and the dense addend (None: no
    addend, and then ``beta`` is None too); ``output`` is ``Z``, ``text`` the einsum."""

    alpha: str | None
    beta: str | None
    addend: DenseOperand | None
    output: str = ""
    text: str = ""


@dataclass(frozen=True)
class EinsumShape:
    """The roles of the tensors and ranks of one einsum of the family (module docstring).

    ``row_rank``/``col_rank`` are the sparse operand's ranks as the product reads it (after
    undoing a transposed declaration): rows are kept by the output; columns are contracted
    (SpMV, SpMM) or kept as the output's second rank (SDDMM). ``dense_rank`` is the rank of
    the dense operands that the sparse one lacks: N of SpMM (kept), K of SDDMM (contracted).
    """

    einsum: Einsum
    output: str
    matrix: str  # the sparse operand
    vector: str  # SpMV/SpMM: the dense operand B; SDDMM: the row factor A
    row_rank: str
    col_rank: str
    row_var: str
    col_var: str
    matrix_rank_order: tuple[str, ...]
    kind: str = "spmv"  # "spmv" | "spmm" | "sddmm"
    transposed: bool = False  # the sparse operand is declared [col, row]
    dense: tuple[DenseOperand, ...] = ()  # dense inputs, in the kernel's order
    dense_rank: str | None = None
    dense_var: str | None = None
    output_storage: tuple[str, ...] = ()
    epilogue: Epilogue | None = None
    intermediate: str | None = None  # T1 of the two-einsum forms
    text: str = ""  # every einsum of the form, "; "-joined


def recognise_einsum(spec: Spec) -> EinsumShape:
    """The form of ``spec``'s einsums (module docstring), or a located refusal."""
    einsums = spec.einsums
    if len(einsums) == 1:
        shape = _product_form(spec, einsums[0])
    elif len(einsums) == 2:
        shape = _two_einsum_form(spec, einsums[0], einsums[1])
    else:
        shape = None
    if shape is None:
        raise _refusal(spec)
    return shape


def _refusal(spec: Spec, why: str = "") -> UnsupportedMappingError:
    texts = "; ".join(e.text for e in spec.einsums) or "none"
    return UnsupportedMappingError(
        f"{why + ': ' if why else ''}the GPU generator supports {SUPPORTED_FORMS}; this "
        f"spec's einsums are: {texts}",
        location=spec.einsums[0].location if spec.einsums else None,
        key_path="einsum.expressions",
    )


def _plain_accesses(expr: ExprNode) -> list[TensorAccess] | None:
    """The factors of a product of plain tensor accesses (None for anything else)."""
    factors = expr.factors if isinstance(expr, Intersect) else (expr,)
    out = []
    for f in factors:
        if not isinstance(f, TensorAccess) or not all(i.is_plain for i in f.indices):
            return None
        out.append(f)
    return out


def _vars(access: TensorAccess) -> tuple[str, ...]:
    return tuple(i.variables[0] for i in access.indices)


def _sparse_candidates(spec: Spec, accesses: list[TensorAccess]) -> list[TensorAccess]:
    """The factors the format section makes sparse (a compressed rank)."""
    out = []
    for a in accesses:
        formats = spec.formats.get(a.tensor, ())
        if any(r.format == "C" for f in formats for r in f.ranks):
            out.append(a)
    return out


def _storage(spec: Spec, name: str) -> tuple[str, ...]:
    return tuple(spec.mapping.rank_order.get(name, spec.declaration.get(name, ())))


def _dense(spec: Spec, access: TensorAccess) -> DenseOperand:
    return DenseOperand(
        access.tensor, _vars(access), tuple(spec.declaration[access.tensor]),
        _storage(spec, access.tensor),
    )


def _product_form(spec: Spec, e: Einsum) -> EinsumShape | None:
    """SpMV, SpMM or one-einsum SDDMM from the product einsum ``e``."""
    accesses = _plain_accesses(e.expr)
    out = e.output
    if accesses is None or not all(i.is_plain for i in out.indices):
        return None
    out_vars = _vars(out)
    if len(set(out_vars)) != len(out_vars) or len(out_vars) not in (1, 2):
        return None
    if any(len(spec.declaration.get(a.tensor, ())) != len(a.indices) for a in accesses):
        return None
    if len({a.tensor for a in accesses}) != len(accesses) or any(
        len(set(_vars(a))) != len(a.indices) for a in accesses
    ):
        return None
    if len(accesses) == 3:
        return _sddmm(spec, e, accesses, out_vars)
    if len(accesses) == 2:
        return _spmv_spmm(spec, e, accesses, out_vars)
    return None


def _pick_sparse(spec: Spec, e: Einsum, candidates: list[TensorAccess],
                 accesses: list[TensorAccess]) -> TensorAccess | None:
    by_format = _sparse_candidates(spec, accesses)
    if len(by_format) > 1:
        raise _refusal(spec, f"{' and '.join(a.tensor for a in by_format)} are both sparse "
                             "(compressed ranks in the format section): two sparse operands")
    if by_format:
        return by_format[0] if by_format[0] in candidates else None
    return candidates[0] if candidates else None


def _spmv_spmm(spec: Spec, e: Einsum, accesses: list[TensorAccess],
               out_vars: tuple[str, ...]) -> EinsumShape | None:
    m_var = out_vars[0]
    candidates = [a for a in accesses if len(a.indices) == 2 and m_var in _vars(a)]
    sparse = _pick_sparse(spec, e, candidates, accesses)
    if sparse is None:
        return None
    (dense_access,) = [a for a in accesses if a is not sparse]
    s_vars = _vars(sparse)
    k_var = next(v for v in s_vars if v != m_var)
    d_vars = _vars(dense_access)
    if k_var in out_vars or k_var not in d_vars:
        return None
    if len(out_vars) == 1:
        if d_vars != (k_var,):
            return None
        n_var = None
    else:
        n_var = out_vars[1]
        if sorted(d_vars) != sorted([k_var, n_var]) or n_var in s_vars:
            return None
    declared = spec.declaration[sparse.tensor]
    row_rank = declared[s_vars.index(m_var)]
    col_rank = declared[s_vars.index(k_var)]
    dense_rank = None
    if n_var is not None:
        dense_rank = spec.declaration[dense_access.tensor][d_vars.index(n_var)]
    return EinsumShape(
        einsum=e,
        output=e.output.tensor,
        matrix=sparse.tensor,
        vector=dense_access.tensor,
        row_rank=row_rank,
        col_rank=col_rank,
        row_var=m_var,
        col_var=k_var,
        matrix_rank_order=_storage(spec, sparse.tensor),
        kind="spmv" if n_var is None else "spmm",
        transposed=s_vars.index(m_var) != 0,
        dense=(_dense(spec, dense_access),),
        dense_rank=dense_rank,
        dense_var=n_var,
        output_storage=_storage(spec, e.output.tensor),
        text=e.text,
    )


def _sddmm(spec: Spec, e: Einsum, accesses: list[TensorAccess],
           out_vars: tuple[str, ...]) -> EinsumShape | None:
    """``Z[m, n] = C[m, n] * A[m, k] * B[k, n]`` (factors in any order)."""
    if len(out_vars) != 2:
        return None
    m_var, n_var = out_vars
    samplers = [a for a in accesses if _vars(a) == out_vars]
    sparse = _pick_sparse(spec, e, samplers, accesses)
    if sparse is None:
        return None
    rest = [a for a in accesses if a is not sparse]
    row = next((a for a in rest if len(a.indices) == 2 and _vars(a)[0] == m_var), None)
    col = next((a for a in rest if len(a.indices) == 2 and _vars(a)[1] == n_var), None)
    if row is None or col is None or row is col:
        return None
    k_var = _vars(row)[1]
    if _vars(col)[0] != k_var or k_var in out_vars:
        return None
    declared = spec.declaration[sparse.tensor]
    return EinsumShape(
        einsum=e,
        output=e.output.tensor,
        matrix=sparse.tensor,
        vector=row.tensor,
        row_rank=declared[0],
        col_rank=declared[1],
        row_var=m_var,
        col_var=n_var,
        matrix_rank_order=_storage(spec, sparse.tensor),
        kind="sddmm",
        dense=(_dense(spec, row), _dense(spec, col)),
        dense_rank=spec.declaration[row.tensor][1],
        dense_var=k_var,
        output_storage=_storage(spec, e.output.tensor),
        text=e.text,
    )


def _two_einsum_form(spec: Spec, first: Einsum, second: Einsum) -> EinsumShape | None:
    """``T1 = product; Z = C * T1`` (SDDMM) or ``Z = a * T1 + b * C`` (epilogue)."""
    t1 = first.output.tensor
    if not all(i.is_plain for i in second.output.indices):
        return None
    out_vars = _vars(second.output)
    if _vars(first.output) != out_vars:
        return None
    sampled = _plain_accesses(second.expr)
    if sampled is not None and len(sampled) == 2 and t1 in {a.tensor for a in sampled}:
        (sampler,) = [a for a in sampled if a.tensor != t1]
        t1_access = next(a for a in sampled if a.tensor == t1)
        if _vars(sampler) != out_vars or _vars(t1_access) != out_vars or len(out_vars) != 2:
            return None
        product = _plain_accesses(first.expr)
        if product is None or len(product) != 2:
            return None
        fused = Einsum(
            text=f"{first.text}; {second.text}",
            output=second.output,
            expr=Intersect((sampler, *product)),
            location=first.location,
        )
        shape = _sddmm(spec, fused, [sampler, *product], out_vars)
        if shape is None:
            return None
        return replace(shape, intermediate=t1, text=fused.text, einsum=second)
    epilogue = _epilogue(spec, second, t1, out_vars)
    if epilogue is None:
        return None
    shape = _product_form(spec, first)
    if shape is None:
        return None
    if shape.kind == "sddmm":
        raise _refusal(spec, f"the epilogue {second.text} follows an SDDMM ({first.text}): an "
                             "epilogue is generated after SpMV and SpMM only")
    if spec.extensions is not None and spec.extensions.schedule == "auto":
        # auto picks a library SpMV kernel per matrix, which would drop the epilogue
        raise UnsupportedMappingError(
            f"schedule: auto chooses among plain SpMV kernels; this spec adds the epilogue "
            f"{second.text}: give its mapping instead",
            location=spec.location_of("x-teaal-loops.schedule"),
            key_path="x-teaal-loops.schedule",
        )
    # The product keeps T1 as its output (the mapping is T1's); it is written straight into
    # Z's storage (T1 is never materialised), and the epilogue then updates Z in place.
    return replace(
        shape, epilogue=epilogue, intermediate=t1, text=f"{first.text}; {second.text}",
        output_storage=_storage(spec, second.output.tensor),
    )


def _epilogue(spec: Spec, e: Einsum, t1: str, out_vars: tuple[str, ...]) -> Epilogue | None:
    """``Z = [a *] T1 [+ [b *] C]``: each term a product of at most one scalar and one access."""
    terms = e.expr.terms if isinstance(e.expr, Union) else (e.expr,)
    if isinstance(e.expr, Union) and any(e.expr.negated):
        return None
    parsed: list[tuple[str | None, TensorAccess]] = []
    for term in terms:
        factors = term.factors if isinstance(term, Intersect) else (term,)
        scalars = [f for f in factors if isinstance(f, ScalarRef)]
        tensors = [f for f in factors if isinstance(f, TensorAccess)]
        if len(scalars) > 1 or len(tensors) != 1 or len(scalars) + len(tensors) != len(factors):
            return None
        if not all(i.is_plain for i in tensors[0].indices) or _vars(tensors[0]) != out_vars:
            return None
        parsed.append((scalars[0].name if scalars else None, tensors[0]))
    main = [p for p in parsed if p[1].tensor == t1]
    rest = [p for p in parsed if p[1].tensor != t1]
    if len(main) != 1 or len(rest) > 1:
        return None
    if rest and _sparse_candidates(spec, [rest[0][1]]):
        return None  # a sparse addend: two sparse operands
    for name, _ in parsed:
        if name is not None and not _SCALAR_NAME.fullmatch(name):
            raise _refusal(spec, f"scalar {name!r} is not an identifier")
    addend = _dense(spec, rest[0][1]) if rest else None
    return Epilogue(main[0][0], rest[0][0] if rest else None, addend,
                    output=e.output.tensor, text=e.text)


