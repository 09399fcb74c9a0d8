"""The ``einsum`` section: the declaration (tensor -> rank names) and the expressions."""

from __future__ import annotations

from teaal_loops.spec.context import Context
from teaal_loops.spec.draft import Draft
from teaal_loops.spec.expressions import parse_einsum
from teaal_loops.spec.model import Einsum
from teaal_loops.spec.yaml_positions import YEntry

EINSUM_KEYS = ("declaration", "expressions")


def parse_einsum_section(entry: YEntry, ctx: Context) -> Draft:
    section = ctx.want_map(
        entry.value, "einsum", "a mapping with declaration and expressions", where=entry
    )
    if section.get("expressions") is None and (typo := section.get("expression")) is not None:
        ctx.fail(
            "unknown key 'expression'; did you mean 'expressions:'? (the einsum list is "
            "called expressions)",
            typo,
            "einsum.expression",
            expected="expressions:",
        )
    ctx.check_keys(section, EINSUM_KEYS, "einsum")

    decl_entry = section.get("declaration")
    if decl_entry is None:
        ctx.fail(
            "the einsum section has no declaration",
            entry,
            "einsum.declaration",
            expected="declaration: a mapping from each tensor to its rank names, e.g. A: [M, K]",
        )
    declaration: dict[str, tuple[str, ...]] = {}
    declaration_loc: dict[str, YEntry] = {}
    decl = ctx.want_map(
        decl_entry.value, "einsum.declaration", "a mapping tensor -> [RANKS]", decl_entry
    )
    for t in decl.entries:
        path = f"einsum.declaration.{t.key}"
        ctx.key_name(t, path, "a tensor name such as A or Z")
        declaration[t.key] = ctx.rank_list(t, path, "the tensor's rank names, e.g. [M, K]")
        declaration_loc[t.key] = t

    expr_entry = section.get("expressions")
    if expr_entry is None:
        ctx.fail(
            "the einsum section has no expressions",
            entry,
            "einsum.expressions",
            expected="expressions: a list of einsums such as - Z[m] = A[m, k] * B[k]",
        )
    einsums, paths = _expressions(expr_entry, ctx)
    return Draft(ctx.source, declaration, declaration_loc, einsums, paths)


def _expressions(entry: YEntry, ctx: Context) -> tuple[list[Einsum], list[str]]:
    items = ctx.want_list(
        entry.value, "einsum.expressions", "a list of einsums (- Z[m] = A[m, k] * B[k])", entry
    )
    einsums: list[Einsum] = []
    paths: list[str] = []
    for i, item in enumerate(items.items):
        path = f"einsum.expressions[{i}]"
        s = ctx.want_str(item, path, "an einsum such as Z[m] = A[m, k] * B[k]")
        einsums.append(parse_einsum(str(s.value), s.location_of, path, s.location))
        paths.append(path)
    if not einsums:
        ctx.fail(
            "the expressions list is empty", entry, "einsum.expressions", "at least one einsum"
        )
    return einsums, paths
