"""Tokenizer and parser for one einsum expression (``Z[m] = A[m, k] * B[k]``).

The grammar is TeAAL's (``teaal/parse/equation.py``), reimplemented as a recursive-descent
parser so that every error can point at the exact character:

    einsum  := output "=" expr
    output  := NAME "[" ranks "]"
    expr    := term ("+" term)*                  terms are unioned
    term    := factor ("*" factor)*              factors are intersected
             | "take(" factor ("," factor)* "," INT ")"
    factor  := NAME                              a scalar
             | NAME "[" ranks "]"                a tensor access
    ranks   := [iexpr ("," iexpr)*]
    iexpr   := iterm ("+" iterm)*                affine index: q+s, 2*e+r, -1*x
    iterm   := NAME | ["-"] INT "*" NAME

TeAAL has no subtraction of terms, no parentheses and no constant offsets in index
expressions; each gets a message saying so rather than a generic syntax error.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from teaal_loops.errors import Location, SpecError
from teaal_loops.spec.model import (
    AffineIndex,
    Einsum,
    ExprNode,
    Intersect,
    ScalarRef,
    Take,
    TensorAccess,
    Union,
)
from teaal_loops.spec.yaml_positions import quote

Locate = Callable[[int], Location]

_PUNCT = set("[](),=+*-")
MAX_INT_DIGITS = 18  # coefficients and take() indices: int64 with room to spare

# Characters people paste from papers and slides, with what they probably meant.
_LOOKALIKES = {
    "\u2217": "*",  # asterisk operator
    "\u00d7": "*",  # multiplication sign
    "\u22c5": "*",  # dot operator
    "\u00b7": "*",  # middle dot
    "\u2212": "-",  # minus sign
    "\u2013": "-",  # en dash
    "\uff0b": "+",  # fullwidth plus
    "\uff1d": "=",  # fullwidth equals
    "\u3010": "[",
    "\u3011": "]",
    "\uff0c": ",",  # fullwidth comma
    "\u00a0": " ",  # no-break space
}


@dataclass(frozen=True)
class Token:
    kind: str  # "NAME", "INT", or the punctuation character itself, or "EOF"
    text: str
    offset: int


def describe_char(ch: str) -> str:
    """``'∗' (U+2217 ASTERISK OPERATOR)``; the code point makes invisible differences visible."""
    name = unicodedata.name(ch, "unnamed character")
    shown = repr(ch) if ch.isprintable() else "a non-printable character"
    return f"{shown} (U+{ord(ch):04X} {name})"


def tokenize(text: str, locate: Locate, key_path: str) -> list[Token]:
    tokens: list[Token] = []
    # Leading and trailing white space (a block scalar ends with a newline) is not part of the
    # einsum; inside it, a line break is an error: the text lands in generated comments.
    i = len(text) - len(text.lstrip())
    n = len(text.rstrip())
    while i < n:
        ch = text[i]
        if ch in " \t":
            i += 1
            continue
        if ch in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029":
            raise SpecError(
                f"line break inside einsum {quote(text.strip())}",
                location=locate(i),
                key_path=key_path,
                expected="the whole einsum on one line",
            )
        if ch.isascii() and (ch.isalpha() or ch == "_"):
            j = i + 1
            while j < n and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                j += 1
            tokens.append(Token("NAME", text[i:j], i))
            i = j
            continue
        if ch.isascii() and ch.isdigit():
            j = i + 1
            while j < n and text[j].isascii() and text[j].isdigit():
                j += 1
            if j < n and text[j] == "." and j + 1 < n and text[j + 1].isdigit():
                raise SpecError(
                    f"number {text[i : j + 2]}... in an einsum: TeAAL coefficients and take() "
                    "indices are integers",
                    location=locate(i),
                    key_path=key_path,
                    expected="an integer",
                )
            if j - i > MAX_INT_DIGITS:
                raise SpecError(
                    f"integer {text[i : i + 8]}... ({j - i} digits) in an einsum is too large",
                    location=locate(i),
                    key_path=key_path,
                    expected=f"at most {MAX_INT_DIGITS} digits",
                )
            tokens.append(Token("INT", text[i:j], i))
            i = j
            continue
        if ch in _PUNCT:
            tokens.append(Token(ch, ch, i))
            i += 1
            continue
        hint = ""
        if ch in _LOOKALIKES:
            hint = f"; did you mean {_LOOKALIKES[ch]!r}?"
        elif ch in "()":
            hint = ""
        raise SpecError(
            f"unexpected character {describe_char(ch)} in einsum {quote(text.strip())}{hint}",
            location=locate(i),
            key_path=key_path,
            expected="names, integers and the operators = + * , [ ] take(...)",
        )
    tokens.append(Token("EOF", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str, locate: Locate, key_path: str) -> None:
        self.text = text
        self.locate = locate
        self.key_path = key_path
        self.tokens = tokenize(text, locate, key_path)
        self.pos = 0

    # ---- helpers ----------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, k: int = 1) -> Token:
        return self.tokens[min(self.pos + k, len(self.tokens) - 1)]

    def advance(self) -> Token:
        t = self.tok
        if t.kind != "EOF":
            self.pos += 1
        return t

    def error(
        self, message: str, token: Token | None = None, expected: str | None = None
    ) -> SpecError:
        t = token or self.tok
        return SpecError(
            f"{message} in einsum {quote(self.text.strip())}",
            location=self.locate(t.offset),
            key_path=self.key_path,
            expected=expected,
        )

    def found(self, t: Token | None = None) -> str:
        t = t or self.tok
        return "the end of the expression" if t.kind == "EOF" else repr(t.text)

    def expect(self, kind: str, expected: str) -> Token:
        if self.tok.kind != kind:
            raise self.error(f"found {self.found()}", expected=expected)
        return self.advance()

    # ---- grammar ----------------------------------------------------------------------------
    def einsum(self) -> tuple[TensorAccess, ExprNode]:
        if self.tok.kind != "NAME":
            raise self.error(
                f"found {self.found()} where the output tensor should start",
                expected="an output tensor such as Z[m]",
            )
        name = self.advance()
        if self.tok.kind != "[":
            raise self.error(
                f"the output {name.text} needs its index list (write {name.text}[...], or "
                f"{name.text}[] for a scalar); found {self.found()}",
                expected="'['",
            )
        output = self.access(name)
        if self.tok.kind != "=":
            raise self.error(f"found {self.found()} after the output", expected="'='")
        self.advance()
        expr = self.expr()
        if self.tok.kind != "EOF":
            if self.tok.kind == "=":
                raise self.error("a second '=' (one einsum per list entry)")
            raise self.error(f"unexpected {self.found()}", expected="'+', '*' or the end")
        return output, expr

    def expr(self) -> ExprNode:
        terms = [self.term()]
        while self.tok.kind in ("+", "-"):
            if self.tok.kind == "-":
                raise self.error(
                    "'-' between terms: TeAAL einsums have no subtraction (terms are unioned "
                    "with '+'; '-' only signs an index coefficient such as -1*k)"
                )
            self.advance()
            terms.append(self.term())
        if len(terms) == 1:
            return terms[0]
        return Union(tuple(terms), tuple(False for _ in terms))

    def term(self) -> ExprNode:
        if self.tok.kind == "NAME" and self.tok.text == "take" and self.peek().kind == "(":
            return self.take()
        factors = [self.factor()]
        while self.tok.kind == "*":
            self.advance()
            factors.append(self.factor())
        if len(factors) == 1:
            return factors[0]
        return Intersect(tuple(factors))

    def take(self) -> Take:
        self.advance()  # take
        self.advance()  # (
        args: list[ExprNode] = []
        while True:
            if self.tok.kind == "INT" and args:
                keep_tok = self.advance()
                break
            args.append(self.factor())
            if self.tok.kind != ",":
                raise self.error(
                    f"found {self.found()} in take(...)",
                    expected="',' and finally the index of the argument to keep, e.g. "
                    "take(A[k], B[k], 0)",
                )
            self.advance()
        if self.tok.kind != ")":
            raise self.error(f"found {self.found()} after take's index", expected="')'")
        self.advance()
        keep = int(keep_tok.text)
        if keep >= len(args):
            raise self.error(
                f"take(...) keeps argument {keep} but has only {len(args)} "
                f"argument{'s' if len(args) != 1 else ''}",
                keep_tok,
                expected=f"an index from 0 to {len(args) - 1}",
            )
        return Take(tuple(args), keep)

    def factor(self) -> ExprNode:
        t = self.tok
        if t.kind == "(":
            raise self.error("'(': TeAAL einsums have no parentheses")
        if t.kind != "NAME":
            raise self.error(
                f"found {self.found()}", expected="a tensor such as A[m, k] or a scalar name"
            )
        self.advance()
        if self.tok.kind == "[":
            return self.access(t)
        return ScalarRef(t.text, self.locate(t.offset))

    def access(self, name: Token) -> TensorAccess:
        self.advance()  # [
        indices: list[AffineIndex] = []
        if self.tok.kind != "]":
            indices.append(self.iexpr())
            while self.tok.kind == ",":
                self.advance()
                indices.append(self.iexpr())
        if self.tok.kind != "]":
            raise self.error(
                f"found {self.found()} in the indices of {name.text}",
                expected="',' or ']'",
            )
        self.advance()
        return TensorAccess(name.text, tuple(indices), self.locate(name.offset))

    def iexpr(self) -> AffineIndex:
        terms = [self.iterm()]
        while self.tok.kind in ("+", "-"):
            if self.tok.kind == "-":
                raise self.error(
                    "'-' in an index expression: TeAAL index expressions only add terms "
                    "(write +-1*x for a negative coefficient)"
                )
            self.advance()
            terms.append(self.iterm())
        return AffineIndex(tuple(terms))

    def iterm(self) -> tuple[int, str]:
        t = self.tok
        if t.kind == "NAME":
            self.advance()
            if self.tok.kind == "*":
                raise self.error(
                    f"'{t.text}*...' in an index: the coefficient comes first (2*{t.text})", t
                )
            return (1, t.text)
        sign = 1
        if t.kind == "-":
            self.advance()
            sign = -1
        if self.tok.kind != "INT":
            raise self.error(
                f"found {self.found()} in an index expression",
                expected="an index variable such as k, or a term such as 2*k",
            )
        num = self.advance()
        if self.tok.kind != "*":
            raise self.error(
                f"constant {num.text} in an index expression: TeAAL index expressions are "
                "sums of variables with integer coefficients (no constant offsets)",
                num,
                expected="'*' and an index variable",
            )
        self.advance()
        var = self.expect("NAME", "an index variable after '*'")
        coef = sign * int(num.text)
        if coef == 0:
            raise self.error(
                "coefficient 0 in an index expression", num, expected="a non-zero integer"
            )
        return (coef, var.text)


def parse_einsum(text: str, locate: Locate, key_path: str, location: Location | None) -> Einsum:
    """Parse ``text`` (one entry of ``einsum.expressions``) into an :class:`Einsum`.

    ``locate(i)`` maps a character offset of ``text`` to its file position, so errors point
    at the offending character. A single term or factor is not wrapped: ``Z[m] = A[m]`` has a
    :class:`TensorAccess` as its expression, ``A[m]*B[m]`` an :class:`Intersect`, and only a
    sum is a :class:`Union`.
    """
    if not text.strip():
        raise SpecError(
            "empty einsum",
            location=location,
            key_path=key_path,
            expected="e.g. Z[m] = A[m, k] * B[k]",
        )
    parser = _Parser(text, locate, key_path)
    output, expr = parser.einsum()
    return Einsum(text=text.strip(), output=output, expr=expr, location=location)


def expr_accesses(node: ExprNode) -> list[TensorAccess]:
    """Every tensor access of an expression, left to right."""
    if isinstance(node, TensorAccess):
        return [node]
    if isinstance(node, ScalarRef):
        return []
    children = (
        node.factors
        if isinstance(node, Intersect)
        else (node.terms if isinstance(node, Union) else node.args)
    )
    out: list[TensorAccess] = []
    for c in children:
        out.extend(expr_accesses(c))
    return out


def expr_terms(node: ExprNode) -> tuple[ExprNode, ...]:
    """The unioned terms of an expression (one term when there is no '+')."""
    return node.terms if isinstance(node, Union) else (node,)


def expr_to_str(node: ExprNode) -> str:
    """Normalized text of an expression (TeAAL syntax)."""
    if isinstance(node, TensorAccess):
        return f"{node.tensor}[{', '.join(str(i) for i in node.indices)}]"
    if isinstance(node, ScalarRef):
        return node.name
    if isinstance(node, Intersect):
        return " * ".join(expr_to_str(f) for f in node.factors)
    if isinstance(node, Union):
        return " + ".join(expr_to_str(t) for t in node.terms)
    return f"take({', '.join(expr_to_str(a) for a in node.args)}, {node.keep})"
