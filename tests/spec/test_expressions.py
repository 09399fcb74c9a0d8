"""The einsum parser: every construct of TeAAL's grammar and every way to get it wrong."""

from __future__ import annotations

import pytest

from teaal_loops.errors import Location, SpecError
from teaal_loops.spec.expressions import expr_accesses, expr_to_str, parse_einsum
from teaal_loops.spec.model import (
    AffineIndex,
    Intersect,
    ScalarRef,
    Take,
    TensorAccess,
    Union,
)


def _locate(offset: int) -> Location:
    # Column = offset + 1 on an imaginary line 7, so tests can check exact positions.
    return Location("e.yaml", 7, offset + 1)


def parse(text: str):
    return parse_einsum(text, _locate, "einsum.expressions[0]", Location("e.yaml", 7, 1))


def error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse(text)
    return info.value


def test_spmv_is_an_intersection_of_two_accesses() -> None:
    e = parse("Z[m] = A[m, k] * B[k]")
    assert e.name == "Z"
    assert e.output == TensorAccess("Z", (AffineIndex(((1, "m"),)),))
    assert isinstance(e.expr, Intersect)
    a, b = e.expr.factors
    assert isinstance(a, TensorAccess) and a.tensor == "A"
    assert [str(i) for i in a.indices] == ["m", "k"]
    assert isinstance(b, TensorAccess) and b.tensor == "B"


def test_sum_is_a_union_without_negated_terms() -> None:
    e = parse("Z[m, n] = T1[m, n] + C[m, n]")
    assert isinstance(e.expr, Union)
    assert [t.tensor for t in e.expr.terms if isinstance(t, TensorAccess)] == ["T1", "C"]
    assert e.expr.negated == (False, False)


def test_products_bind_tighter_than_sums() -> None:
    e = parse("Z[m] = A[m] * B[m] + C[m] * D[m] * E[m]")
    assert isinstance(e.expr, Union)
    first, second = e.expr.terms
    assert isinstance(first, Intersect) and len(first.factors) == 2
    assert isinstance(second, Intersect) and len(second.factors) == 3


def test_take_keeps_the_named_argument() -> None:
    e = parse("T[k,m,n] = take(A[k,m], B[k,n], 1)")
    assert isinstance(e.expr, Take)
    assert e.expr.keep == 1
    assert [a.tensor for a in e.expr.args if isinstance(a, TensorAccess)] == ["A", "B"]


def test_take_inside_a_sum_and_with_a_scalar() -> None:
    e = parse("Z[m] = take(A[m], b, 0) + C[m]")
    assert isinstance(e.expr, Union)
    take = e.expr.terms[0]
    assert isinstance(take, Take) and isinstance(take.args[1], ScalarRef)


def test_bare_names_are_scalars() -> None:
    e = parse("A[] = b")
    assert e.output.indices == ()
    assert isinstance(e.expr, ScalarRef) and e.expr.name == "b"
    e2 = parse("Z[m] = a * X[m]")
    assert isinstance(e2.expr, Intersect)
    assert e2.expr.factors[0] == ScalarRef("a")


def test_affine_indices_with_integer_coefficients() -> None:
    e = parse("O[z, u, x, y] = I[z, c, 2*x + r, g*y + s] * F[u, c, r, s]".replace("g*y", "3*y"))
    i = expr_accesses(e.expr)[0]
    assert i.indices[2] == AffineIndex(((2, "x"), (1, "r")))
    assert i.indices[3] == AffineIndex(((3, "y"), (1, "s")))
    assert not i.indices[2].is_plain and i.indices[0].is_plain
    assert i.indices[2].variables == ("x", "r")


def test_negative_coefficient() -> None:
    e = parse("Z[m] = A[-1*k+m] * B[k]")
    assert expr_accesses(e.expr)[0].indices[0] == AffineIndex(((-1, "k"), (1, "m")))
    assert str(expr_accesses(e.expr)[0].indices[0]) == "-1*k+m"


def test_whitespace_is_free_and_text_is_kept() -> None:
    e = parse("  Z[ m ]=A[m,k]*B[ k ]  ")
    assert e.text == "Z[ m ]=A[m,k]*B[ k ]"
    assert expr_to_str(e.expr) == "A[m, k] * B[k]"


def test_accesses_carry_their_column() -> None:
    e = parse("Z[m] = A[m, k] * B[k]")
    a, b = expr_accesses(e.expr)
    assert a.location == Location("e.yaml", 7, 8)
    assert b.location == Location("e.yaml", 7, 18)


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("Z[m] = A[m, k] \u2217 B[k]", 16, "U+2217"),
        ("Z[m] = A[m, k] \u00d7 B[k]", 16, "did you mean '*'"),
        ("Z[m] = A[m, k] * B[k] ; ", 23, "';'"),
        ("Z[m] = A[m, k] * B[k]\u2212C[m]", 22, "did you mean '-'"),
    ],
)
def test_bad_characters_point_at_their_column(text: str, column: int, fragment: str) -> None:
    err = error(text)
    assert err.location == Location("e.yaml", 7, column)
    assert fragment in err.message
    assert err.key_path == "einsum.expressions[0]"


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("Z[m] = A[m] - B[m]", 13, "no subtraction"),
        ("Z[m] = (A[m] + B[m]) * C[m]", 8, "no parentheses"),
        ("Z[m] = A[m+1]", 12, "no constant offsets"),
        ("Z[m] = A[m-k]", 11, "only add terms"),
        ("Z[m] = A[k*2]", 10, "coefficient comes first"),
        ("Z[m] = A[0*m]", 10, "coefficient 0"),
        ("Z[m] = A[2.5*m]", 10, "integers"),
        ("Z[m] = take(A[m], B[m], 2)", 25, "keeps argument 2 but has only 2"),
        ("Z[m] = take(A[m], B[m])", 23, "index of the argument to keep"),
        ("Z = A[m]", 3, "needs its index list"),
        ("= A[m]", 1, "output tensor"),
        ("Z[m] A[m]", 6, "'='"),
        ("Z[m] = A[m] = B[m]", 13, "second '='"),
        ("Z[m] = A[m, k", 14, "',' or ']'"),
        ("Z[m] = A[m] B[m]", 13, "unexpected 'B'"),
        ("Z[m] = ", 8, "the end of the expression"),
        ("Z[m] = A[m] +", 14, "the end of the expression"),
    ],
)
def test_syntax_errors_say_what_and_where(text: str, column: int, fragment: str) -> None:
    err = error(text)
    assert fragment in err.message, err.message
    assert err.location is not None and err.location.column == column, err.cli_line()
    assert "einsum.expressions[0]" in err.cli_line()


def test_empty_einsum() -> None:
    err = error("   ")
    assert "empty einsum" in err.message
    assert err.expected is not None


def test_take_as_a_plain_name_is_a_scalar() -> None:
    e = parse("Z[] = take")
    assert e.expr == ScalarRef("take")
