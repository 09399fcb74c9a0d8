"""Hostile input to the HiFiber reference: names and text from a spec never run as code.

The reference program is Python that is compiled and executed. A spec's file name, einsum text,
rank, tensor, scalar and parameter names must neither run injected statements (a sentinel file
must never appear), nor break the program's syntax (keywords), nor alias the program's own names
(``z_ref``, ``record``, ``Tensor``, ``merge_path_shares``, builtins): every case computes the
same values as NumPy and the same stamps as the spec with plain names, or is refused in one line.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.cli import main
from teaal_loops.errors import SpecError
from teaal_loops.reference import hifiber_source, run_reference
from teaal_loops.reference.execute import fibertree_available
from teaal_loops.spec import load_spec_string
from tests.conftest import REPO

ENGINES = ["builtin"] + (["fibertree"] if fibertree_available() else [])

# The four SpMV mappings of specs/, over placeholder names: tensors A, B, Z, ranks M, K,
# parameters P, Q (str.format fields).
MAPPINGS = {
    "thread_mapped": """
  partitioning:
    {Z}:
      {M}: [uniform_shape({P}), uniform_shape({Q})]
  loop-order:
    {Z}: [{M}2, {M}1, {M}0, {K}]
  spacetime:
    {Z}:
      space: [{M}0]
      time: [{M}2, {M}1, {K}]""",
    "group_mapped": """
  partitioning:
    {Z}:
      {M}: [uniform_shape({P}), uniform_shape({Q})]
      {K}: [uniform_occupancy({A}.{Q})]
  loop-order:
    {Z}: [{M}2, {M}1, {M}0, {K}1, {K}0]
  spacetime:
    {Z}:
      space: [{M}0, {K}0]
      time: [{M}2, {M}1, {K}1]""",
    "work_oriented": """
  partitioning:
    {Z}:
      ({M}, {K}): [flatten()]
      {M}{K}: [uniform_occupancy({A}.{P})]
  loop-order:
    {Z}: [{M}{K}1, {M}{K}0]
  spacetime:
    {Z}:
      space: [{M}{K}1]
      time: [{M}{K}0]""",
    "merge_path": """
  partitioning:
    {Z}:
      ({M}, {K}): [flatten()]
      {M}{K}: [x_merge_path({A}.{P})]
  loop-order:
    {Z}: [{M}{K}1, {M}{K}0]
  spacetime:
    {Z}:
      space: [{M}{K}1]
      time: [{M}{K}0]""",
}
PLAIN = {"A": "A", "B": "B", "Z": "Z", "M": "M", "K": "K", "P": "P", "Q": "Q"}
SIZES = (3, 2)


def spmv_spec(mapping: str, *, source: str | None = None, scalar: str = "", **names: str):
    """The SpMV spec of ``mapping`` with the placeholder names replaced by ``names``."""
    n = {**PLAIN, **names}
    m, k = n["M"].lower(), n["K"].lower()
    times = f" * {scalar}" if scalar else ""
    text = f"""
einsum:
  declaration:
    {n["A"]}: [{n["M"]}, {n["K"]}]
    {n["B"]}: [{n["K"]}]
    {n["Z"]}: [{n["M"]}]
  expressions:
    - {n["Z"]}[{m}] = {n["A"]}[{m}, {k}] * {n["B"]}[{k}]{times}
mapping:{MAPPINGS[mapping].format(**n)}
"""
    return load_spec_string(text, source=source), n


def matrix() -> tuple[sp.csr_matrix, np.ndarray]:
    rng = np.random.default_rng(5)
    dense = np.where(rng.random((11, 9)) < 0.35, rng.uniform(0.5, 1.5, (11, 9)), 0.0)
    dense[4] = 0.0  # an empty row
    return sp.csr_matrix(dense), rng.uniform(0.5, 1.5, 9)


def run(spec, n, engine: str, scalar: str = ""):
    a, x = matrix()
    tensors = {n["A"]: a, n["B"]: x}
    if scalar:
        tensors[scalar] = 2.0
    params = {p: size for p, size in zip((n["P"], n["Q"]), SIZES, strict=True)}
    params = {p: v for p, v in params.items() if p in spec.parameters}
    return run_reference(spec, tensors, params=params, engine=engine), a, x


def stamp_values(stamps) -> list[tuple]:
    """The stamps without the rank and index names (which differ from spec to spec)."""
    return [
        (tuple(s.indices.values()), s.space_pairs(), [(r.pos, r.coord) for r in s.time])
        for s in stamps
    ]


def assert_like_plain(mapping: str, engine: str, scalar: str = "", **names: str) -> str:
    spec, n = spmv_spec(mapping, scalar=scalar, **names)
    result, a, x = run(spec, n, engine, scalar)
    factor = 2.0 if scalar else 1.0
    np.testing.assert_allclose(result.outputs[n["Z"]], factor * (a @ x), rtol=1e-12)
    plain_spec, plain = spmv_spec(mapping, scalar="S" if scalar else "")
    expected, _, _ = run(plain_spec, plain, engine, "S" if scalar else "")
    assert stamp_values(result.stamps) == stamp_values(expected.stamps)
    return result.source


def test_the_placeholder_specs_are_the_spec_library() -> None:
    """The plain-named mappings above are those of specs/ (so the hostile cases test them)."""
    for mapping in MAPPINGS:
        spec, _ = spmv_spec(mapping)
        lib = load_spec_string((REPO / "specs" / f"{mapping}.yaml").read_text())
        assert spec.mapping.loop_order == lib.mapping.loop_order
        assert [p.produces for p in spec.partitioning_of("Z")] == [
            p.produces for p in lib.partitioning_of("Z")
        ]


HOSTILE_RANKS = [
    {"M": "IN", "K": "FOR"},  # keywords once lower-cased: `for in, ...` would not compile
    {"M": "IF", "K": "ENUMERATE"},  # a keyword, and the builtin the loops call
    {"K": "Z_REF"},  # the coordinate of K would be the output's payload reference
    {"M": "REF"},  # the fiber of Z at M would be the payload reference
    {"M": "A_VAL", "K": "B_VAL"},  # coordinates named like the input values
    {"M": "RANGE", "K": "MAX"},  # builtins the merge-path helper and the positions call
    {"M": "MP_SIZES", "K": "MP_SHARE_IDS"},  # the merge-path split's own variables
    {"M": "LAMBDA", "K": "MATCH"},  # a keyword and a soft keyword
    {"M": "__BUILTINS__", "K": "_"},
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mapping", list(MAPPINGS))
@pytest.mark.parametrize("names", HOSTILE_RANKS, ids=lambda n: "-".join(n.values()))
def test_rank_names_that_are_keywords_builtins_or_program_names(engine, mapping, names) -> None:
    assert_like_plain(mapping, engine, **names)


HOSTILE_TENSORS_AND_PARAMS = [
    {"P": "Tensor", "Q": "record"},  # the fibertree class and the stamp recorder
    {"P": "enumerate", "Q": "max"},
    {"P": "merge_path_shares", "Q": "SHAPE_M"},
    {"A": "Tensor", "B": "record", "Z": "Fiber"},
    {"Z": "MERGE", "M": "PATH_SHARES"},  # the fiber of Z at M would be merge_path_shares
    {"Z": "MP", "M": "SIZES"},  # ... or mp_sizes
    {"A": "a", "B": "A"},  # tensors that differ only in case
    {"A": "A_M", "B": "A", "K": "MK"},  # A_M at K and A at MK: both "A_MK" when concatenated
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mapping", list(MAPPINGS))
@pytest.mark.parametrize("names", HOSTILE_TENSORS_AND_PARAMS, ids=lambda n: "-".join(n.values()))
def test_tensor_and_parameter_names_that_collide_with_the_program(engine, mapping, names) -> None:
    assert_like_plain(mapping, engine, **names)


@pytest.mark.parametrize("scalar", ["record", "Tensor", "enumerate", "z_ref", "SHAPE_M"])
def test_scalar_names_that_collide_with_the_program(scalar) -> None:
    assert_like_plain("thread_mapped", "builtin", scalar=scalar)


def test_a_parameter_named_like_the_program_names_keeps_its_value() -> None:
    text = assert_like_plain("thread_mapped", "builtin", P="Tensor", Q="record")
    assert 'Tensor(rank_ids=["M2", "M1", "M0"]' in text  # the class is still the class
    assert "Tensor_2 = 3" in text and "record_2 = 2" in text


SENTINEL_CODE = 'open(chr(47).join([{parts}]), "w").write("pwned")'


def sentinel_name(tmp_path: Path) -> tuple[str, Path]:
    """A file name holding a line break and a statement that creates ``tmp_path/PWNED``."""
    sentinel = tmp_path / "PWNED"
    parts = ", ".join(repr(p) for p in sentinel.parts)
    parts = parts.replace("'/'", "''")  # the root: join puts the first slash
    return f"spec\n{SENTINEL_CODE.format(parts=parts)}\n#", sentinel


@pytest.mark.parametrize("mapping", list(MAPPINGS))
def test_a_spec_name_with_a_line_break_runs_nothing(tmp_path, mapping) -> None:
    name, sentinel = sentinel_name(tmp_path)
    # the statement would indeed create the sentinel if it ran
    exec(name.split("\n")[1], {})  # noqa: S102 - proves the sentinel check can fail
    assert sentinel.exists()
    sentinel.unlink()
    spec, n = spmv_spec(mapping, source=f"{name}.yaml")
    result, a, x = run(spec, n, "builtin")
    assert not sentinel.exists()
    np.testing.assert_allclose(result.outputs["Z"], a @ x, rtol=1e-12)
    assert all("open(" not in line or line.startswith("#") for line in result.source.splitlines())


def test_check_on_a_spec_file_whose_name_holds_code(tmp_path, capsys) -> None:
    name, sentinel = sentinel_name(tmp_path)
    path = tmp_path / f"{name}.yaml"
    path.write_text((REPO / "specs" / "work_oriented.yaml").read_text())
    rc = main(["check", str(path), "--synthetic", "uniform:rows=40,nnz=200,seed=3"])
    out = capsys.readouterr().out
    assert not sentinel.exists()
    assert rc == 0 and "result: AGREE" in out
    spec_lines = [line for line in out.splitlines() if line.startswith("spec: ")]
    assert len(spec_lines) == 1 and "open(" in spec_lines[0]  # the name, shown on one line
    assert not any(line.startswith("open(") for line in out.splitlines())


def test_an_einsum_whose_text_holds_a_line_break_never_reaches_the_program() -> None:
    """The spec front end refuses it, located, before any program is written."""
    with pytest.raises(SpecError, match=r"^<string>:\d+:\d+: .*line break inside einsum"):
        load_spec_string(
            """
einsum:
  declaration: {A: [M, K], B: [K], Z: [M]}
  expressions:
    - "Z[m] = A[m, k]\\n  * B[k]"
"""
        )


@pytest.mark.parametrize(
    "field, value, what",
    [
        ("parameters", ("P\nimport os",), "parameter"),
        ("parameters", ("P = 1; import os",), "parameter"),
        ("parameters", ("Pé",), "parameter"),
        ("declaration", {"A": ("M", "K)]; import os; x = ["), "B": ("K",), "Z": ("M",)}, "rank"),
    ],
)
def test_names_that_are_not_identifiers_are_refused_in_one_line(field, value, what) -> None:
    """A Spec built in Python (not by the parser, which checks names) is checked again."""
    spec, _ = spmv_spec("thread_mapped")
    hostile = dataclasses.replace(spec, **{field: value})
    with pytest.raises(SpecError) as info:
        hifiber_source(hostile, params={"P": 3, "Q": 2})
    message = info.value.cli_line()
    assert "\n" not in message and f"{what} " in message and "is not a name" in message


FIBERTREE_API = {
    "fromFiber",
    "getRoot",
    "setRankIds",
    "splitUniform",
    "splitNonUniform",
    "splitEqual",
    "splitUnEqual",
    "swizzleRanks",
    "flattenRanks",
    "mergeRanks",
    "getPayload",
    "getPayloadRef",
    "append",  # lists inside the merge-path helper
}


@pytest.mark.parametrize("mapping", list(MAPPINGS))
@pytest.mark.parametrize("names", [{}, *HOSTILE_RANKS, *HOSTILE_TENSORS_AND_PARAMS], ids=str)
def test_every_identifier_in_the_program_is_handed_out_or_known(mapping, names) -> None:
    """Outside the merge-path helper's own scope, the program names only what its allocator
    handed out, the names its runner binds, and builtins; it calls only fibertree's API."""
    import ast
    import builtins

    from teaal_loops.reference.hifiber import render
    from teaal_loops.reference.names import PROGRAM_NAMES
    from teaal_loops.reference.plan import bind_params, plan_spec

    spec, n = spmv_spec(mapping, **names)
    params = {p: 3 for p in spec.parameters}
    program = render(spec, plan_spec(spec), bind_params(spec, params))
    handed_out = [name for _, name in program.names.items()]
    assert len(set(handed_out)) == len(handed_out)
    tree = ast.parse(program.source)
    module_level = [node for node in tree.body if not isinstance(node, ast.FunctionDef)]
    allowed = set(handed_out) | set(PROGRAM_NAMES) | set(dir(builtins))
    for statement in module_level:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and node.id != "_":
                assert node.id in allowed, node.id
                assert node.id not in dir(builtins) or node.id in ("enumerate", "max"), node.id
            if isinstance(node, ast.Attribute):
                assert node.attr in FIBERTREE_API, node.attr
