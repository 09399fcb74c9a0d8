"""Property tests: whatever the input, load_spec_string returns a Spec or raises SpecError.

Random YAML documents (shaped like specs, so the deep checks run too), random text, and
specs mutated the ways people break them (keys deleted or renamed, types swapped, garbage
typed into expressions and partitioning functions).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teaal_loops.errors import SpecError
from teaal_loops.spec import Spec, load_spec_string, spec_to_json

CORPUS = (
    Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "teaal-specs"
).resolve()

INLINE_SPECS = [
    """\
einsum:
  declaration: {A: [M, K], B: [K], Z: [M]}
  expressions: ['Z[m] = A[m, k] * B[k]']
mapping:
  rank-order: {A: [M, K]}
  partitioning:
    Z:
      M: [uniform_shape(NUM_TILES), uniform_shape(NUM_THREADS)]
      K: [uniform_occupancy(A.BLOCK)]
  loop-order: {Z: [M2, M1, M0, K1, K0]}
  spacetime:
    Z: {space: [M0, K0], time: [M2, M1.coord, K1], opt: slip}
format:
  A:
    csr:
      rank-order: [M, K]
      M: {format: U}
      K: {format: C, cbits: 32, pbits: 64}
x-teaal-loops: {schedule: auto, block_threads: 128, params: {BLOCK: 32}}
""",
    """\
einsum:
  declaration: {A: [M, K], B: [K, N], T: [K, M, N], Z: [M, N]}
  expressions:
    - T[k, m, n] = take(A[m, k], B[k, n], 1)
    - Z[m, n] = T[k, m, n] * A[m, k]
mapping:
  partitioning:
    Z:
      (M, K): [flatten()]
      MK: [x_merge_path(A.ITEMS)]
  spacetime:
    Z: {space: [MK1], time: [MK0, N]}
""",
    """\
einsum:
  declaration: {I: [M, N], F: [R, S], O: [X, Y]}
  expressions: ['O[x, y] = I[x + r, 2*y + s] * F[r, s]']
mapping:
  partitioning:
    O:
      X: [nway_shape(4)]
      R: [follow(X)]
architecture:
  C0:
  - name: System
    local: [{name: Mem, class: DRAM}]
    subtree: [{name: 'PE[0..3]'}]
bindings:
  O:
  - {config: C0, prefix: tmp/O}
  - {component: Mem, bindings: [{tensor: I, rank: M}]}
""",
]


def _seed_texts() -> list[str]:
    texts = list(INLINE_SPECS)
    if CORPUS.is_dir():
        texts += [p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("**/*.yaml"))]
    return texts


SEEDS = _seed_texts()

KEYS = [
    "einsum",
    "declaration",
    "expressions",
    "expression",
    "mapping",
    "rank-order",
    "partitioning",
    "loop-order",
    "spacetime",
    "space",
    "time",
    "opt",
    "format",
    "architecture",
    "bindings",
    "x-teaal-loops",
    "schedule",
    "params",
    "block_threads",
    "A",
    "B",
    "Z",
    "M",
    "K",
    "(M, K)",
    "MK",
    "name",
    "local",
    "subtree",
    "config",
    "prefix",
    "component",
    "rank-order",
]
FRAGMENTS = [
    "Z[m] = A[m, k] * B[k]",
    "uniform_shape(4)",
    "uniform_occupancy(A.S)",
    "flatten()",
    "follow(M)",
    "nway_shape(N)",
    "x_merge_path(A.I)",
    "M0",
    "K1.coord",
    "slip",
    "U",
    "C",
    "take(A[k], B[k], 0)",
    "M",
    "K",
    "",
    "\u2217",
    "(",
    "[",
    "=",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=2**40),
    st.floats(allow_nan=True),
    st.sampled_from(FRAGMENTS),
    st.text(max_size=12),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(min_size=1, max_size=8))
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=5),
    ),
    max_leaves=30,
)


def _check(text: str) -> None:
    try:
        spec = load_spec_string(text, source="p.yaml")
    except SpecError as err:
        assert err.cli_line()  # the one-line message renders
        assert err.location is not None and err.location.file == "p.yaml"
        return
    assert isinstance(spec, Spec)
    json.dumps(spec_to_json(spec))
    for w in spec.warnings:
        assert str(w)


FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(documents)
def test_random_yaml_documents(doc: Any) -> None:
    _check(yaml.safe_dump(doc, allow_unicode=True))


@FAST
@given(
    st.dictionaries(
        st.sampled_from(["einsum", "mapping", "format", "x-teaal-loops"]), documents, min_size=1
    )
)
def test_random_spec_shaped_documents(doc: Any) -> None:
    _check(yaml.safe_dump(doc, allow_unicode=True))


@FAST
@given(st.text(max_size=200))
def test_random_text(text: str) -> None:
    _check(text)


# ---- mutations of real specs -----------------------------------------------------------------


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        node = node[p]
    return node


@st.composite
def mutated_specs(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    doc = yaml.safe_load(text)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _get(doc, path[:-1])
        key = path[-1]
        op = draw(st.sampled_from(["delete", "rename", "swap", "garble", "dup", "null"]))
        if op == "delete":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(keys)] = parent.pop(key)
        elif op == "swap":
            parent[key] = draw(documents)
        elif op == "garble" and isinstance(parent[key], str):
            s = parent[key]
            i = draw(st.integers(min_value=0, max_value=len(s)))
            parent[key] = s[:i] + draw(st.text(min_size=1, max_size=3)) + s[i:]
        elif op == "dup" and isinstance(parent, list):
            parent.append(parent[key])
        else:
            parent[key] = None
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


@FAST
@given(mutated_specs())
def test_mutated_specs(text: str) -> None:
    _check(text)


@FAST
@given(st.sampled_from(SEEDS), st.data())
def test_text_level_corruption(seed: str, data: st.DataObject) -> None:
    i = data.draw(st.integers(min_value=0, max_value=len(seed)))
    j = data.draw(st.integers(min_value=i, max_value=min(len(seed), i + 10)))
    insert = data.draw(st.text(max_size=4))
    _check(seed[:i] + insert + seed[j:])


def test_seeds_are_valid() -> None:
    for text in INLINE_SPECS:
        load_spec_string(text)
