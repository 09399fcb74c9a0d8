"""Positioned YAML: every key and value keeps its line and column; YAML 1.2 scalar types."""

from __future__ import annotations

import pytest

from teaal_loops.errors import Location, SpecError
from teaal_loops.spec.yaml_positions import YMap, YScalar, YSeq, describe, load_yaml, to_plain


def load(text: str):
    return load_yaml(text, "f.yaml")


def test_keys_and_values_keep_positions() -> None:
    root = load("einsum:\n  declaration:\n    A: [M, K]\n")
    assert isinstance(root, YMap)
    einsum = root.get("einsum")
    assert einsum is not None and einsum.key_location == Location("f.yaml", 1, 1)
    assert isinstance(einsum.value, YMap)
    decl = einsum.value.get("declaration")
    assert decl is not None and decl.key_location == Location("f.yaml", 2, 3)
    assert isinstance(decl.value, YMap)
    a = decl.value.get("A")
    assert a is not None and a.key_location == Location("f.yaml", 3, 5)
    assert isinstance(a.value, YSeq)
    k = a.value.items[1]
    assert isinstance(k, YScalar) and k.value == "K" and k.location == Location("f.yaml", 3, 12)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("x: 12", 12),
        ("x: -3", -3),
        ("x: 0x1f", 31),
        ("x: 0o17", 15),
        ("x: 1.5", 1.5),
        ("x: true", True),
        ("x: False", False),
        ("x: ~", None),
        ("x:", None),
        ("x: null", None),
        # YAML 1.1 booleans and dates stay strings (TeAAL's loader is YAML 1.2)
        ("x: NO", "NO"),
        ("x: on", "on"),
        ("x: y", "y"),
        ("x: 2001-01-01", "2001-01-01"),
        ("x: '12'", "12"),
        ('x: "true"', "true"),
        ("x: !!str 12", "12"),
        ("x: !!int '7'", 7),
        ("x: inf", "inf"),
    ],
)
def test_core_schema_scalars(text: str, value: object) -> None:
    root = load(text)
    assert isinstance(root, YMap)
    assert to_plain(root) == {"x": value}


def test_empty_document_is_none() -> None:
    assert load("") is None
    assert load("# only a comment\n") is None


def test_syntax_error_carries_the_yaml_mark() -> None:
    with pytest.raises(SpecError) as info:
        load("a:\n  b: [1, 2\n  c: 3\n")
    err = info.value
    assert err.location is not None and err.location.file == "f.yaml"
    assert err.location.line == 3
    assert "YAML syntax error" in err.message


def test_tab_indentation_error_position() -> None:
    with pytest.raises(SpecError) as info:
        load("a:\n\tb: 1\n")
    assert info.value.location == Location("f.yaml", 2, 1)


def test_duplicate_keys_are_errors() -> None:
    with pytest.raises(SpecError) as info:
        load("a: 1\nb: 2\na: 3\n")
    assert info.value.location == Location("f.yaml", 3, 1)
    assert "duplicate key 'a'" in info.value.message
    assert "line 1" in info.value.message


def test_non_scalar_keys_are_errors() -> None:
    with pytest.raises(SpecError) as info:
        load("? [a, b]\n: 1\n")
    assert "mapping keys" in info.value.message


def test_unsupported_tags_are_errors() -> None:
    with pytest.raises(SpecError) as info:
        load("a: !python/object 1\n")
    assert "unsupported YAML tag" in info.value.message
    with pytest.raises(SpecError):
        load("a: !!int twelve\n")


def test_aliases_are_shared_and_recursion_refused() -> None:
    root = load("a: &x [1, 2]\nb: *x\n")
    assert to_plain(root) == {"a": [1, 2], "b": [1, 2]}
    with pytest.raises(SpecError) as info:
        load("a: &x [1, *x]\n")
    assert "recursive" in info.value.message


def test_multiple_documents_are_an_error() -> None:
    with pytest.raises(SpecError) as info:
        load("a: 1\n---\nb: 2\n")
    assert info.value.location is not None and info.value.location.line == 2


def test_control_characters_are_located() -> None:
    with pytest.raises(SpecError) as info:
        load("a: 1\nb: x\x07y\n")
    assert info.value.location == Location("f.yaml", 2, 5)


def test_location_of_characters_in_plain_quoted_and_block_scalars() -> None:
    text = 'a: Z[m] = A[m]\nb: "Z[m] = B[m]"\nc: |\n  Z[m] = C[m]\n'
    root = load(text)
    assert isinstance(root, YMap)
    a, b, c = (root.get(k) for k in "abc")
    assert a is not None and b is not None and c is not None
    assert isinstance(a.value, YScalar) and a.value.location_of(7) == Location("f.yaml", 1, 11)
    assert isinstance(b.value, YScalar) and b.value.location_of(7) == Location("f.yaml", 2, 12)
    assert isinstance(c.value, YScalar) and c.value.location_of(7) == Location("f.yaml", 4, 10)


def test_describe_names_node_kinds() -> None:
    root = load("a: [1]\nb: {c: 1}\nd: 3\ne: x\nf: true\ng:\n")
    assert isinstance(root, YMap)
    kinds = {e.key: describe(e.value) for e in root.entries}
    assert kinds == {
        "a": "a list",
        "b": "a mapping",
        "d": "the integer 3",
        "e": "the string 'x'",
        "f": "the boolean 'true'",
        "g": "an empty value",
    }


def test_location_of_skips_anchors_and_tags() -> None:
    root = load("a: &Z !!str Z[m] = A[m]\n")
    assert isinstance(root, YMap)
    a = root.get("a")
    assert a is not None and isinstance(a.value, YScalar)
    assert a.value.value == "Z[m] = A[m]"
    assert a.value.location_of(0) == Location("f.yaml", 1, 13)
    assert a.value.location_of(7) == Location("f.yaml", 1, 20)


def test_alias_bombs_are_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    with pytest.raises(SpecError) as info:
        load("\n".join(lines) + "\n")
    assert "expand" in info.value.message


def test_many_plain_values_are_refused_while_composing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each composed node costs hundreds of bytes: the count stops a large file of tiny
    values before it takes gigabytes (the limit is lowered here to keep the test quick)."""
    import teaal_loops.spec.yaml_positions as yp

    monkeypatch.setattr(yp, "_MAX_EXPANDED_NODES", 1000)
    with pytest.raises(SpecError) as info:
        load("a:\n" + "".join(f"- {i}\n" for i in range(2000)))
    assert "more than 1000 values" in info.value.message
    assert info.value.location is not None and info.value.location.line == 999  # the 1001st node


def test_location_at_the_end_of_a_scalar() -> None:
    root = load("a: Z[m] = \n")
    assert isinstance(root, YMap)
    a = root.get("a")
    assert a is not None and isinstance(a.value, YScalar)
    assert a.value.text == "Z[m] ="
    assert a.value.location_of(6) == Location("f.yaml", 1, 10)
