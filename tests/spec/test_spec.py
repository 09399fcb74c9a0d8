"""load_spec_string end to end: sections, TeAAL rank naming, defaults, and semantic errors.

Expected rank names in the naming tests were checked against the TeAAL compiler's own
default loop order (FPSG-UIUC/teaal-compiler, Program/LoopOrder) for the same specs.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from teaal_loops.errors import SpecError
from teaal_loops.spec import Spec, load_spec, load_spec_string
from teaal_loops.spec.model import Intersect, SpaceTimeRank, TensorAccess

# ---- small example specs (inline test data) --------------------------------------------------

SPMV_THREAD_MAPPED = """\
einsum:
  declaration:
    A: [M, K]
    B: [K]
    Z: [M]
  expressions:
    - Z[m] = A[m, k] * B[k]
mapping:
  rank-order:
    A: [M, K]
  partitioning:
    Z:
      M: [uniform_shape(NUM_TILES), uniform_shape(NUM_THREADS)]
  loop-order:
    Z: [M2, M1, M0, K]
  spacetime:
    Z:
      space: [M0]
      time: [M2.coord, M1, K.pos]
      opt: slip
format:
  A:
    csr:
      rank-order: [M, K]
      M:
        format: U
      K:
        format: C
        cbits: 32
        pbits: 64
"""

SPMV_WORK_ORIENTED = """\
einsum:
  declaration:
    A: [M, K]
    B: [K]
    Z: [M]
  expressions:
    - Z[m] = A[m, k] * B[k]
mapping:
  partitioning:
    Z:
      (M, K): [flatten()]
      MK: [uniform_occupancy(A.WORK_PER_THREAD)]
  spacetime:
    Z:
      space: [MK1]
      time: [MK0]
"""

SPGEMM_TWO_EINSUMS = """\
einsum:
  declaration:
    A: [M, K]
    B: [K, N]
    T: [K, M, N]
    Z: [M, N]
  expressions:
    - T[k, m, n] = take(A[m, k], B[k, n], 1)
    - Z[m, n] = T[k, m, n] * A[m, k]
mapping:
  partitioning:
    Z:
      M: [uniform_shape(TILE), uniform_shape(TILE)]
      K: [uniform_occupancy(A.BLOCK)]
"""


def spec(text: str, **kw: object) -> Spec:
    return load_spec_string(textwrap.dedent(text), source="s.yaml", **kw)  # type: ignore[arg-type]


def spec_error(text: str, **kw: object) -> SpecError:
    with pytest.raises(SpecError) as info:
        spec(text, **kw)
    return info.value


def with_partitioning(lines: str, expr: str = "Z[m, n] = A[m, k] * B[k, n]") -> str:
    return (
        "einsum:\n"
        "  declaration: {A: [M, K], B: [K, N], Z: [M, N]}\n"
        f"  expressions: ['{expr}']\n"
        "mapping:\n"
        "  partitioning:\n"
        "    Z:\n" + textwrap.indent(textwrap.dedent(lines), "      ")
    )


# ---- the whole dialect ------------------------------------------------------------------------


def test_thread_mapped_spmv_parses_into_typed_objects() -> None:
    s = spec(SPMV_THREAD_MAPPED)
    assert s.source == "s.yaml"
    assert dict(s.declaration) == {"A": ("M", "K"), "B": ("K",), "Z": ("M",)}
    (e,) = s.einsums
    assert e.text == "Z[m] = A[m, k] * B[k]"
    assert isinstance(e.expr, Intersect)
    assert [f.tensor for f in e.expr.factors if isinstance(f, TensorAccess)] == ["A", "B"]
    (part,) = s.partitioning_of("Z")
    assert part.ranks == ("M",)
    assert [(f.kind, f.size) for f in part.functions] == [
        ("uniform_shape", "NUM_TILES"),
        ("uniform_shape", "NUM_THREADS"),
    ]
    assert part.produces == ("M2", "M1", "M0")
    assert s.final_ranks["Z"] == ("M2", "M1", "M0", "K")
    assert s.parameters == ("NUM_TILES", "NUM_THREADS")
    st = s.spacetime_of("Z")
    assert st is not None
    assert st.space == (SpaceTimeRank("M0", "pos"),)
    assert st.time == (SpaceTimeRank("M2", "coord"), SpaceTimeRank("M1"), SpaceTimeRank("K"))
    assert st.slip is True
    (csr,) = s.formats["A"]
    assert csr.name == "csr" and csr.rank_order == ("M", "K")
    assert [(r.rank, r.format, r.cbits, r.pbits) for r in csr.ranks] == [
        ("M", "U", None, None),
        ("K", "C", 32, 64),
    ]
    assert s.warnings == ()


def test_rank_order_defaults_to_the_declaration() -> None:
    s = spec(SPMV_THREAD_MAPPED)
    assert s.mapping.rank_order["A"] == ("M", "K")
    assert s.mapping.rank_order["B"] == ("K",)
    s2 = spec(SPMV_THREAD_MAPPED.replace("A: [M, K]\n  partitioning", "A: [K, M]\n  partitioning"))
    assert s2.mapping.rank_order["A"] == ("K", "M")
    assert s2.declaration["A"] == ("M", "K")


def test_work_oriented_flattens_then_splits_by_occupancy() -> None:
    s = spec(SPMV_WORK_ORIENTED)
    flat, split = s.partitioning_of("Z")
    assert flat.ranks == ("M", "K") and flat.name == "MK" and flat.produces == ("MK",)
    assert split.functions[0].kind == "uniform_occupancy"
    assert split.functions[0].leader == "A" and split.functions[0].size == "WORK_PER_THREAD"
    assert split.produces == ("MK1", "MK0")
    assert s.final_ranks["Z"] == ("MK1", "MK0")
    # No loop-order given: TeAAL's default is the final ranks.
    assert s.loop_order_of("Z") == ("MK1", "MK0")
    assert s.parameters == ("WORK_PER_THREAD",)


def test_two_einsums_each_get_final_ranks_and_only_their_own_partitioning() -> None:
    s = spec(SPGEMM_TWO_EINSUMS)
    assert [e.name for e in s.einsums] == ["T", "Z"]
    assert s.final_ranks["T"] == ("K", "M", "N")
    assert s.final_ranks["Z"] == ("M2", "M1", "M0", "N", "K1", "K0")
    assert s.partitioning_of("T") == ()
    assert s.parameters == ("TILE", "BLOCK")  # no duplicates, order of first appearance


def test_spec_is_immutable() -> None:
    s = spec(SPMV_THREAD_MAPPED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.parameters = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.final_ranks["Z"] = ()  # type: ignore[index]
    with pytest.raises(TypeError):
        s.declaration["Q"] = ()  # type: ignore[index]


def test_load_spec_reads_files_and_path_objects(tmp_path: Path) -> None:
    f = tmp_path / "spmv.yaml"
    f.write_text(SPMV_WORK_ORIENTED, encoding="utf-8")
    s = load_spec(f)
    assert s.source == str(f) and s.name == "spmv"
    assert load_spec(str(f)).final_ranks == s.final_ranks


def test_non_utf8_file_is_a_located_error(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_bytes(b"einsum:\n  x: \xff\n")
    with pytest.raises(SpecError) as info:
        load_spec(f)
    assert info.value.location is not None
    assert (info.value.location.line, info.value.location.column) == (2, 6)
    assert "UTF-8" in info.value.message


def test_architecture_and_bindings_are_kept_as_read_only_data() -> None:
    s = spec(
        SPMV_WORK_ORIENTED
        + textwrap.dedent(
            """\
            architecture:
              Config0:
              - name: System
                attributes: {clock_frequency: 1000}
                local:
                - name: Memory
                  class: DRAM
                subtree:
                - name: PE[0..7]
            bindings:
              Z:
              - config: Config0
                prefix: tmp/Z
              - component: Memory
                bindings:
                - tensor: A
                  rank: M
            """
        )
    )
    cfg = s.architecture["Config0"]
    assert isinstance(cfg, tuple) and cfg[0]["name"] == "System"  # type: ignore[index]
    assert cfg[0]["subtree"][0]["name"] == "PE[0..7]"  # type: ignore[index]
    z = s.bindings["Z"]
    assert isinstance(z, tuple) and z[0]["config"] == "Config0"  # type: ignore[index]
    with pytest.raises(TypeError):
        cfg[0]["name"] = "x"  # type: ignore[index]


# ---- rank naming (checked against the TeAAL compiler) ------------------------------------------


@pytest.mark.parametrize(
    ("lines", "final", "produced"),
    [
        ("(M, K): [flatten()]\n", ("N", "MK"), {"MK": ("MK",)}),
        ("(K, M): [flatten()]\n", ("N", "KM"), {"KM": ("KM",)}),
        (
            "(M, N): [flatten()]\nMN: [uniform_occupancy(A.4), uniform_occupancy(A.2)]\n",
            ("MN2", "MN1", "MN0", "K"),
            {"MN": ("MN2", "MN1", "MN0")},
        ),
        (
            "M: [uniform_shape(4), uniform_shape(2)]\nK: [follow(M)]\n",
            ("M2", "M1", "M0", "N", "K2", "K1", "K0"),
            {"M": ("M2", "M1", "M0"), "K": ("K2", "K1", "K0")},
        ),
        (
            "N: [uniform_occupancy(B.4), uniform_shape(2)]\n",
            ("M", "N2", "N1", "N0", "K"),
            {"N": ("N2", "N1", "N0")},
        ),
        (
            "K: [nway_shape(8), uniform_occupancy(A.4), uniform_shape(2)]\n",
            ("M", "N", "K3", "K2", "K1", "K0"),
            {"K": ("K3", "K2", "K1", "K0")},
        ),
        (
            "M: [uniform_shape(8)]\n(M0, N): [flatten()]\nM0N: [uniform_occupancy(A.3)]\n",
            ("M1", "M0N1", "M0N0", "K"),
            {"M": ("M1", "M0")},
        ),
    ],
)
def test_partitioned_rank_names_match_teaal(
    lines: str, final: tuple[str, ...], produced: dict[str, tuple[str, ...]]
) -> None:
    s = spec(with_partitioning(lines))
    assert s.final_ranks["Z"] == final
    assert s.loop_order_of("Z") == final
    splits = {p.name: p.produces for p in s.partitioning_of("Z") if len(p.ranks) == 1}
    for name, names in produced.items():
        if name in splits:
            assert splits[name] == names
        else:  # a flatten entry
            flat = [p for p in s.partitioning_of("Z") if p.name == name and len(p.ranks) > 1]
            assert flat and flat[0].produces == names


def test_multi_level_occupancy_has_intermediates() -> None:
    s = spec(with_partitioning("K: [uniform_occupancy(A.4), uniform_occupancy(A.2)]\n"))
    (k,) = s.partitioning_of("Z")
    assert k.produces == ("K2", "K1", "K0")
    assert k.intermediates == ("K1I",)
    # TeAAL's demo.yaml: a shape split, then two occupancy levels.
    s = spec(
        with_partitioning(
            "M: [uniform_shape(M2), uniform_occupancy(A.M1), uniform_occupancy(A.M0)]\n"
        )
    )
    (m,) = s.partitioning_of("Z")
    assert m.produces == ("M3", "M2", "M1", "M0")
    assert m.intermediates == ("M2I", "M1I")
    assert s.parameters == ("M2", "M1", "M0")


def test_sigma_flattens_the_bottom_of_a_split() -> None:
    s = spec(
        """\
        einsum:
          declaration: {A: [K, M], B: [K, N], Z: [M, N]}
          expressions: ['Z[m, n] = A[k, m] * B[k, n]']
        mapping:
          partitioning:
            Z:
              K: [uniform_shape(128)]
              (M, K0): [flatten()]
              MK0: [uniform_occupancy(A.16384)]
          loop-order:
            Z: [K1, MK01, N, MK00]
        """
    )
    assert s.final_ranks["Z"] == ("N", "K1", "MK01", "MK00")
    assert s.loop_order_of("Z") == ("K1", "MK01", "N", "MK00")


def test_index_math_ranks_follow_teaal_order() -> None:
    s = spec(
        """\
        einsum:
          declaration: {I: [M, N], F: [R, S], O: [X, Y]}
          expressions: ['O[x, y] = I[x + r, y + s] * F[r, s]']
        """
    )
    assert s.final_ranks["O"] == ("X", "Y", "R", "S")


def test_x_merge_path_is_an_extension_on_flattened_ranks() -> None:
    text = SPMV_WORK_ORIENTED.replace(
        "uniform_occupancy(A.WORK_PER_THREAD)", "x_merge_path(A.ITEMS)"
    )
    s = spec(text)
    split = s.partitioning_of("Z")[1]
    assert split.functions[0].kind == "x_merge_path"
    assert split.produces == ("MK1", "MK0")
    assert s.parameters == ("ITEMS",)
    err = spec_error(text, strict=True)
    assert "teaal-loops extension" in err.message and "x_merge_path" in err.message
    assert err.key_path == "mapping.partitioning.Z.MK[0]"
    assert err.location is not None and err.location.line == 12
    err = spec_error(with_partitioning("M: [x_merge_path(A.4)]\n"))
    assert "flattened rank" in err.message


# ---- extension section ------------------------------------------------------------------------


EXT = """\
x-teaal-loops:
  schedule: work_oriented
  layout: csr
  block_threads: 256
  params:
    WORK_PER_THREAD: 8
"""


def test_extension_section_parses() -> None:
    s = spec(SPMV_WORK_ORIENTED + EXT)
    ext = s.extensions
    assert ext is not None
    assert (ext.schedule, ext.layout, ext.block_threads) == ("work_oriented", "csr", 256)
    assert dict(ext.params) == {"WORK_PER_THREAD": 8}
    assert spec(SPMV_WORK_ORIENTED).extensions is None


def test_extension_section_rejected_in_strict_mode() -> None:
    err = spec_error(SPMV_WORK_ORIENTED + EXT, strict=True)
    assert "teaal-loops extension" in err.message
    assert err.key_path == "x-teaal-loops"
    assert err.location is not None and err.location.line == 17
    spec(SPMV_WORK_ORIENTED, strict=True)  # plain TeAAL is fine in strict mode


@pytest.mark.parametrize(
    ("body", "key_path", "fragment"),
    [
        ("  schedule: 3\n", "x-teaal-loops.schedule", "a schedule's name"),
        ("  block_threads: 0\n", "x-teaal-loops.block_threads", "too small"),
        ("  block_threads: 2048\n", "x-teaal-loops.block_threads", "from 32 to 1024"),
        ("  block_threads: 33\n", "x-teaal-loops.block_threads", "whole number of warps"),
        ("  block_threads: 16\n", "x-teaal-loops.block_threads", "too small"),
        ('  layout: "csr\\nint x;"\n', "x-teaal-loops.layout", "a spec string is one line"),
        ("  layout: csr;x\n", "x-teaal-loops.layout", "is not a layout name"),
        ("  params: {N: 4611686018427387904}\n", "x-teaal-loops.params.N", "too large"),
        ("  params: {'N M': 3}\n", "x-teaal-loops.params.N M", "is not a name"),
        ("  block_threads: many\n", "x-teaal-loops.block_threads", "the string 'many'"),
        ("  params: {WORK_PER_THREAD: -1}\n", "x-teaal-loops.params.WORK_PER_THREAD", "too small"),
        ("  params: [1, 2]\n", "x-teaal-loops.params", "a list"),
        ("  layout: 3\n", "x-teaal-loops.layout", "the integer 3"),
    ],
)
def test_extension_section_errors(body: str, key_path: str, fragment: str) -> None:
    err = spec_error(SPMV_WORK_ORIENTED + "x-teaal-loops:\n" + body)
    assert err.key_path == key_path
    assert fragment in err.cli_line()


def test_extension_unknown_key_and_unused_param_warn() -> None:
    s = spec(SPMV_WORK_ORIENTED + "x-teaal-loops:\n  shedule: auto\n  params: {NOPE: 3}\n")
    messages = [str(w) for w in s.warnings]
    assert any("'shedule'" in m and "'schedule'" in m for m in messages)
    assert any("NOPE" in m and "WORK_PER_THREAD" in m for m in messages)


# ---- structural errors ------------------------------------------------------------------------


def test_str_of_an_error_is_file_line_col() -> None:
    err = spec_error("einsum: [1, 2]\n")
    assert err.cli_line().startswith("s.yaml:1:9: error: einsum: ")
    assert err.key_path == "einsum"
    assert err.expected is not None and "declaration" in err.expected


@pytest.mark.parametrize(
    ("text", "fragment", "key_path", "line"),
    [
        ("", "the spec is empty", None, 1),
        ("- a\n- b\n", "found a list", None, 1),
        ("just text\n", "found the string 'just text'", None, 1),
        ("mapping: {}\n", "no einsum section", "einsum", 1),
        ("einsum:\n  expressions: ['Z[] = a']\n", "no declaration", "einsum.declaration", 1),
        ("einsum:\n  declaration: {Z: []}\n", "no expressions", "einsum.expressions", 1),
        (
            "einsum:\n  declaration: {Z: []}\n  expressions: 'Z[] = a'\n",
            "a list of einsums",
            "einsum.expressions",
            3,
        ),
        (
            "einsum:\n  declaration: {Z: []}\n  expressions: []\n",
            "is empty",
            "einsum.expressions",
            3,
        ),
        (
            "einsum:\n  declaration: {Z: []}\n  expressions: [{Z: 1}]\n",
            "found a mapping",
            "einsum.expressions[0]",
            3,
        ),
        (
            "einsum:\n  declaration: [A, B]\n  expressions: ['Z[] = a']\n",
            "found a list",
            "einsum.declaration",
            2,
        ),
        (
            "einsum:\n  declaration: {A: M, Z: []}\n  expressions: ['Z[] = a']\n",
            "found the string 'M'",
            "einsum.declaration.A",
            2,
        ),
        (
            "einsum:\n  declaration: {A: 'M, K', Z: []}\n  expressions: ['Z[] = a']\n",
            "[M, K]",
            "einsum.declaration.A",
            2,
        ),
        (
            "einsum:\n  declaration: {A:, Z: []}\n  expressions: ['Z[] = a']\n",
            "empty value",
            "einsum.declaration.A",
            2,
        ),
        (
            "einsum:\n  declaration: {A: [M, M], Z: []}\n  expressions: ['Z[] = a']\n",
            "listed twice",
            "einsum.declaration.A[1]",
            2,
        ),
        (
            "einsum:\n  declaration: {A: [m], Z: []}\n  expressions: ['Z[] = a']\n",
            "not upper-case",
            "einsum.declaration.A",
            2,
        ),
        (
            "einsum:\n  declaration: {A: [1], Z: []}\n  expressions: ['Z[] = a']\n",
            "the integer 1",
            "einsum.declaration.A[0]",
            2,
        ),
    ],
)
def test_structural_errors(text: str, fragment: str, key_path: str | None, line: int) -> None:
    err = spec_error(text)
    assert fragment in err.cli_line(), err.cli_line()
    assert err.key_path == key_path
    assert err.location is not None and err.location.line == line and err.location.file == "s.yaml"


def test_expression_typo_suggests_expressions() -> None:
    err = spec_error("einsum:\n  declaration: {Z: []}\n  expression:\n    - Z[] = a\n")
    assert "did you mean 'expressions:'" in err.message
    assert err.key_path == "einsum.expression"
    assert err.location is not None and (err.location.line, err.location.column) == (3, 3)


def test_no_einsum_names_what_was_found() -> None:
    err = spec_error("architecture: {}\nbindings: {}\n")
    assert "the spec has no einsum section" in err.message
    assert "architecture, bindings" in err.message


def test_expression_errors_point_into_the_file() -> None:
    text = (
        "einsum:\n  declaration: {A: [M, K], B: [K], Z: [M]}\n  expressions:\n"
        "    - Z[m] = A[m, k] \u2217 B[k]\n"
    )
    err = spec_error(text)
    assert err.location is not None
    assert (err.location.line, err.location.column) == (4, 22)
    assert text.splitlines()[3][(err.location.column or 0) - 1] == "\u2217"
    assert "U+2217" in err.message and err.key_path == "einsum.expressions[0]"


def test_expression_errors_in_quoted_scalars_point_into_the_file() -> None:
    text = 'einsum:\n  declaration: {A: [M], Z: [M]}\n  expressions: ["Z[m] = A[m] - A[m]"]\n'
    err = spec_error(text)
    assert err.location is not None
    assert err.location.column is not None
    assert text.splitlines()[2][err.location.column - 1] == "-"


# ---- semantic errors ---------------------------------------------------------------------------

DECL = "einsum:\n  declaration: {A: [M, K], B: [K], Z: [M]}\n  expressions:\n    - "


@pytest.mark.parametrize(
    ("expr", "fragment", "column"),
    [
        ("Z[m] = A[m, k] * C[k]", "tensor C is not declared", 24),
        ("Z[m] = A[m] * B[k]", "declared with 2 ranks [M, K] but indexed with 1", 14),
        ("Z[m] = A[k, m] * B[k]", "index k of A belongs to rank K, but A's rank there is M", 14),
        ("Z[m] = A[m, k] * A[m, k]", "appears twice", 24),
        ("Z[m] = A[m, k] + B[k]", "every term must iterate over the same ranks", 24),
        ("Q[m] = A[m, k] * B[k]", "tensor Q is not declared", 7),
    ],
)
def test_einsum_semantic_errors(expr: str, fragment: str, column: int) -> None:
    err = spec_error(DECL + expr + "\n")
    assert fragment in err.message, err.message
    assert err.key_path == "einsum.expressions[0]"
    assert err.location is not None and (err.location.line, err.location.column) == (4, column)


MAPPED = DECL + "Z[m] = A[m, k] * B[k]\nmapping:\n"


@pytest.mark.parametrize(
    ("mapping", "fragment", "key_path", "line"),
    [
        (
            "  rank-order: {A: [M]}\n",
            "not an order of A's declared ranks",
            "mapping.rank-order.A",
            6,
        ),
        ("  rank-order: {Q: [M]}\n", "Q is not a declared tensor", "mapping.rank-order.Q", 6),
        (
            "  loop-order: {Z: [M, K, N]}\n",
            "N is not a final rank of Z",
            "mapping.loop-order.Z[2]",
            6,
        ),
        ("  loop-order: {Z: [M]}\n", "leaves out K", "mapping.loop-order.Z", 6),
        (
            "  loop-order: {Y: [M, K]}\n",
            "Y is not the output of any einsum",
            "mapping.loop-order.Y",
            6,
        ),
        ("  loop-order: {Z: M, K}\n", "found the string 'M'", "mapping.loop-order.Z", 6),
        ("  loop-order: [Z]\n", "found a list", "mapping.loop-order", 6),
        (
            "  partitioning: {Z: {Q: [uniform_shape(4)]}}\n",
            "rank Q is not a rank of",
            "mapping.partitioning.Z.Q",
            6,
        ),
        (
            "  partitioning: {Z: {M: uniform_shape(4)}}\n",
            "found the string",
            "mapping.partitioning.Z.M",
            6,
        ),
        (
            "  partitioning: {Z: {M: [uniformShape(4)]}}\n",
            "did you mean uniform_shape(SIZE)",
            "mapping.partitioning.Z.M[0]",
            6,
        ),
        (
            "  partitioning: {Z: {M: [uniform_shape(0)]}}\n",
            "must be positive",
            "mapping.partitioning.Z.M[0]",
            6,
        ),
        (
            "  partitioning: {Z: {M: [uniform_shape()]}}\n",
            "positive integer or a parameter",
            "mapping.partitioning.Z.M[0]",
            6,
        ),
        (
            "  partitioning: {Z: {M: [uniform_occupancy(4)]}}\n",
            "leader tensor",
            "mapping.partitioning.Z.M[0]",
            6,
        ),
        (
            "  partitioning: {Z: {M: [uniform_occupancy(Q.4)]}}\n",
            "leader Q is not a tensor",
            "mapping.partitioning.Z.M",
            6,
        ),
        (
            "  partitioning: {Z: {M: [flatten(M)]}}\n",
            "takes no arguments",
            "mapping.partitioning.Z.M[0]",
            6,
        ),
        (
            "  partitioning: {Z: {M: [flatten()]}}\n",
            "at least two ranks",
            "mapping.partitioning.Z.M",
            6,
        ),
        (
            "  partitioning: {Z: {'(M, K)': [uniform_shape(4)]}}\n",
            "only be applied to one rank",
            "mapping.partitioning.Z.(M, K)",
            6,
        ),
        (
            "  partitioning: {Z: {'(M, K)': [flatten(), uniform_shape(4)]}}\n",
            "flatten() combined",
            "mapping.partitioning.Z.(M, K)",
            6,
        ),
        (
            "  partitioning: {Z: {'(M)': [flatten()]}}\n",
            "not a rank or a tuple",
            "mapping.partitioning.Z.(M)",
            6,
        ),
        (
            "  partitioning: {Z: {'(M, K)': [flatten()], MK: [uniform_shape(4)]}}\n",
            "shape-based partitioning of MK",
            "mapping.partitioning.Z.MK",
            6,
        ),
        (
            "  partitioning: {Z: {K: [uniform_occupancy(A.4), nway_shape(2)]}}\n",
            "n-way partitioning after dynamic",
            "mapping.partitioning.Z.K",
            6,
        ),
        (
            "  partitioning: {Z: {K: [follow(M)]}}\n",
            "M has no partitioning of its own",
            "mapping.partitioning.Z.K",
            6,
        ),
        (
            "  partitioning: {Z: {K: [follow(K)]}}\n",
            "cannot follow itself",
            "mapping.partitioning.Z.K",
            6,
        ),
        (
            "  partitioning: {Z: {M: [uniform_shape(2)], '(M, K)': [flatten()]}}\n",
            "partitioned by both",
            "mapping.partitioning.Z.(M, K)",
            6,
        ),
        (
            "  partitioning: {Z: {M: [uniform_shape(2), uniform_shape(2)],"
            " '(M1, K)': [flatten()]}}\n",
            "multiple partitionings",
            "mapping.partitioning.Z.(M1, K)",
            6,
        ),
        (
            "  partitioning: {Z: {'(M, K)': [flatten()], '(M,K)': []}}\n",
            "names the same ranks as '(M, K)'",
            "mapping.partitioning.Z.(M,K)",
            6,
        ),
        (
            "  partitioning: {Z: {'(M, M)': [flatten()]}}\n",
            "repeats a rank",
            "mapping.partitioning.Z.(M, M)",
            6,
        ),
        (
            "  partitioning: {Y: {M: [uniform_shape(2)]}}\n",
            "Y is not the output of any einsum",
            "mapping.partitioning.Y",
            6,
        ),
        (
            "  spacetime: {Z: {space: [M], time: [Q]}}\n",
            "Q is not a final rank of Z",
            "mapping.spacetime.Z.time[0]",
            6,
        ),
        (
            "  spacetime: {Z: {space: [M], time: [M, K]}}\n",
            "listed twice",
            "mapping.spacetime.Z.time[0]",
            6,
        ),
        ("  spacetime: {Z: {space: [M]}}\n", "no time list", "mapping.spacetime.Z.time", 6),
        (
            "  spacetime: {Z: {space: M, time: [K]}}\n",
            "found the string 'M'",
            "mapping.spacetime.Z.space",
            6,
        ),
        (
            "  spacetime: {Z: {space: [M.cord], time: [K]}}\n",
            "not a spacetime rank",
            "mapping.spacetime.Z.space[0]",
            6,
        ),
        (
            "  spacetime: {Z: {space: [M], time: [K], opt: fast}}\n",
            "unknown spacetime optimization",
            "mapping.spacetime.Z.opt",
            6,
        ),
    ],
)
def test_mapping_errors(mapping: str, fragment: str, key_path: str, line: int) -> None:
    err = spec_error(MAPPED + mapping)
    assert fragment in err.message, err.message
    assert err.key_path == key_path
    assert err.location is not None and err.location.line == line


def test_flatten_refuses_ranks_in_index_math() -> None:
    err = spec_error(
        """\
        einsum:
          declaration: {I: [W], F: [S], Z: [Q]}
          expressions: ['Z[q] = I[q+s] * F[s]']
        mapping:
          partitioning:
            Z:
              (Q, S): [flatten()]
        """
    )
    assert "cannot flatten rank Q because it is used in index math" in err.message
    assert err.location is not None and (err.location.line, err.location.column) == (7, 7)


def test_errors_name_the_column_of_the_partitioning_function() -> None:
    line = "      K: [uniform_occupancy(A.4), nway_shape(2)]"
    err = spec_error(MAPPED + "  partitioning:\n    Z:\n" + line + "\n")
    assert err.location is not None
    assert (err.location.line, err.location.column) == (8, line.index("nway") + 1)


# ---- warnings ----------------------------------------------------------------------------------


def test_unknown_keys_warn_with_a_suggestion() -> None:
    s = spec(
        MAPPED
        + "  partitions:\n    Z:\n      M: [uniformShape(6)]\n"
        + "  spacetime: {Z: {space: [M], time: [K], opts: slip}}\n"
        + "formats: {}\n"
    )
    by_path = {w.key_path: w for w in s.warnings}
    part = by_path["mapping.partitions"]
    assert "'partitions'" in part.message and "'partitioning'" in part.message
    assert part.location is not None and (part.location.line, part.location.column) == (6, 3)
    assert str(part).startswith("s.yaml:6:3: warning: mapping.partitions: unknown key")
    assert "'opt'" in by_path["mapping.spacetime.Z.opts"].message
    assert "'format'" in by_path["formats"].message
    assert s.partitioning_of("Z") == ()  # the misspelled section is not used


def test_spacetime_that_leaves_out_a_rank_is_an_error_at_the_value() -> None:
    err = spec_error(MAPPED + "  spacetime: {Z: {space: [M], time: []}}\n")
    assert "does not place K" in err.message and err.key_path == "mapping.spacetime.Z"
    assert err.location is not None and (err.location.line, err.location.column) == (6, 18)


def test_format_problems() -> None:
    base = SPMV_WORK_ORIENTED + "format:\n  A:\n    csr:\n"
    err = spec_error(base + "      M: {format: U}\n")
    assert "rank order not specified" in err.message and err.key_path == "format.A.csr.rank-order"
    err = spec_error(base + "      rank-order: [M, K]\n      M: {format: X}\n")
    assert err.key_path == "format.A.csr.M.format" and "U (uncompressed)" in err.cli_line()
    err = spec_error(base + "      rank-order: [M, K]\n      M: {pbits: 32}\n")
    assert "has no format" in err.message
    err = spec_error(base + "      rank-order: [M, K]\n      M: {format: U, cbits: wide}\n")
    assert err.key_path == "format.A.csr.M.cbits"
    err = spec_error(base + "      rank-order: [M, K]\n      M: {format: U, layout: zigzag}\n")
    assert "contiguous or interleaved" in err.cli_line()
    s = spec(
        base + "      rank-order: [M, K]\n      N: {format: U}\n      K: {format: C, cbit: 3}\n"
    )
    paths = {w.key_path for w in s.warnings}
    assert paths == {"format.A.csr.N", "format.A.csr.K.cbit"}
    s = spec(SPMV_WORK_ORIENTED + "format:\n  Q:\n    x:\n      rank-order: []\n")
    assert [w.key_path for w in s.warnings] == ["format.Q"]


def test_architecture_and_binding_structure_errors() -> None:
    err = spec_error(SPMV_WORK_ORIENTED + "architecture:\n  C0:\n  - attributes: {}\n")
    assert "unnamed level" in err.message and err.key_path == "architecture.C0[0].name"
    err = spec_error(SPMV_WORK_ORIENTED + "architecture:\n  C0:\n  - name: PE[0..x]\n")
    assert "not a level name" in err.message
    err = spec_error(
        SPMV_WORK_ORIENTED + "architecture:\n  C0:\n  - name: S\n    local:\n    - name: M\n"
    )
    assert "component without class" in err.message
    err = spec_error(SPMV_WORK_ORIENTED + "architecture: [1]\n")
    assert err.key_path == "architecture"
    err = spec_error(SPMV_WORK_ORIENTED + "bindings:\n  Z:\n  - component: MAC\n    bindings: []\n")
    assert "config and prefix missing for einsum Z" in err.message
    err = spec_error(SPMV_WORK_ORIENTED + "bindings:\n  Z:\n  - config: C0\n")
    assert "config without prefix" in err.message
    err = spec_error(SPMV_WORK_ORIENTED + "bindings:\n  Z:\n  - op: add\n")
    assert "neither a config nor a component" in err.message


def test_format_rank_order_may_use_partitioned_names_but_not_unknown_ones() -> None:
    s = spec(
        SPMV_THREAD_MAPPED
        + "  B:\n    tiled:\n      rank-order: [K]\n      K: {format: U}\n"
        + "  Z:\n    tiled:\n      rank-order: [M2, M1, M0]\n      M0: {format: U}\n"
    )
    assert s.warnings == ()
    s = spec(SPMV_THREAD_MAPPED + "  Z:\n    bad:\n      rank-order: [M7]\n")
    (w,) = s.warnings
    assert w.key_path == "format.Z.bad.rank-order" and "M7" in w.message


def test_einsum_in_a_folded_block_scalar() -> None:
    s = spec(
        "einsum:\n  declaration: {A: [M, K], B: [K], Z: [M]}\n  expressions:\n"
        "    - >\n      Z[m] =\n      A[m, k] * B[k]\n"
    )
    assert s.einsums[0].text == "Z[m] = A[m, k] * B[k]"


def test_empty_loop_order_means_the_default() -> None:
    s = spec(MAPPED + "  loop-order:\n    Z:\n")
    assert s.loop_order_of("Z") == ("M", "K")
    (w,) = s.warnings
    assert w.key_path == "mapping.loop-order.Z" and "default" in w.message
