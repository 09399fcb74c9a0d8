"""Key paths -> positions: ``Spec.location_of``, ``TeaalLoopsError.located``, ``spec_errors``.

Code after the front end raises errors naming a spec value by its key path only; these tests pin
how such an error gets the value's FILE:LINE:COL.
"""

from __future__ import annotations

import argparse
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

import teaal_loops.cli as cli
from teaal_loops.errors import (
    Location,
    ParameterError,
    TeaalLoopsError,
    UnsupportedMappingError,
    spec_errors,
)
from teaal_loops.spec import Spec, load_spec, load_spec_string
from tests.conftest import REPO

TEXT = textwrap.dedent(
    """\
    # a comment first, so the document does not start at 1:1
    einsum:
      declaration: {A: [M, K], B: [K], Z: [M]}
      expressions:
        - Z[m] = A[m, k] * B[k]
    mapping:
      partitioning:
        Z:
          M: [uniform_shape(T), uniform_shape(U)]
          K: [uniform_occupancy(A.G)]
      spacetime:
        Z:
          space: [M0, K0]
          time: [M2, M1, K1]
    x-teaal-loops:
      block_threads: 64
    """
)


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_spec_string(TEXT, source="loc.yaml")


def pos(loc: Location | None) -> tuple[str | None, int | None, int | None]:
    assert loc is not None
    return loc.file, loc.line, loc.column


def test_every_value_has_its_own_position(spec: Spec) -> None:
    assert pos(spec.location_of("mapping.spacetime.Z.space")) == ("loc.yaml", 13, 14)
    assert pos(spec.location_of("mapping.spacetime.Z.space[1]")) == ("loc.yaml", 13, 19)
    assert pos(spec.location_of("mapping.partitioning.Z.M[1]")) == ("loc.yaml", 9, 29)
    assert pos(spec.location_of("x-teaal-loops.block_threads")) == ("loc.yaml", 16, 18)
    assert pos(spec.location_of("einsum.expressions[0]")) == ("loc.yaml", 5, 7)


def test_the_longest_written_prefix_answers_for_unwritten_paths(spec: Spec) -> None:
    assert spec.location_of("mapping.spacetime.Z.space[7]") == spec.location_of(
        "mapping.spacetime.Z.space"
    )
    assert spec.location_of("mapping.loop-order.Z") == spec.location_of("mapping")
    assert pos(spec.location_of("bindings.Z")) == ("loc.yaml", 2, 1)  # the document


def test_a_spec_without_positions_answers_none() -> None:
    bare = Spec(
        source=None,
        declaration={},
        einsums=(),
        mapping=load_spec_string(TEXT).mapping,
        formats={},
        architecture={},
        bindings={},
        extensions=None,
        final_ranks={},
        parameters=(),
    )
    assert bare.location_of("mapping") is None


def test_located_fills_an_error_that_names_only_the_file(spec: Spec) -> None:
    err = UnsupportedMappingError(
        "nope", location=Location("loc.yaml"), key_path="mapping.spacetime.Z.space"
    )
    assert err.located(spec) is err
    assert err.cli_line().startswith("loc.yaml:13:14: error: mapping.spacetime.Z.space: nope")


def test_located_fills_an_error_without_location(spec: Spec) -> None:
    err = ParameterError("block_threads 64 is too few", key_path="x-teaal-loops.block_threads")
    assert err.located(spec).cli_line() == "loc.yaml:16:18: error: block_threads 64 is too few"


def test_located_leaves_located_and_unrelated_errors_alone(spec: Spec) -> None:
    placed = TeaalLoopsError("x", location=Location("loc.yaml", 3, 4), key_path="mapping")
    assert pos(placed.located(spec).location) == ("loc.yaml", 3, 4)
    no_path = TeaalLoopsError("x")
    assert no_path.located(spec).location is None
    other_file = TeaalLoopsError("x", location=Location("m.mtx"), key_path="mapping")
    assert pos(other_file.located(spec).location) == ("m.mtx", None, None)


def test_located_remembers_the_spec_for_a_key_path_set_later(spec: Spec) -> None:
    err = TeaalLoopsError("x").located(spec)
    assert err.location is None
    err.key_path = "mapping.partitioning.Z.K"
    assert pos(err.located().location) == ("loc.yaml", 10, 10)


def test_spec_errors_locates_what_escapes_it(spec: Spec) -> None:
    with pytest.raises(ParameterError) as info, spec_errors(spec):
        raise ParameterError("bad", key_path="mapping.partitioning.Z.M[0]")
    assert pos(info.value.location) == ("loc.yaml", 9, 11)


def test_lowering_errors_get_the_position_of_their_key_path(tmp_path: Path) -> None:
    from teaal_loops.lowering import lower

    path = tmp_path / "lanes_first.yaml"
    path.write_text(TEXT.replace("space: [M0, K0]", "space: [K0, M0]"), encoding="utf-8")
    spec = load_spec(path)
    with pytest.raises(TeaalLoopsError) as info, spec_errors(spec):
        lower(spec)
    assert info.value.key_path is not None
    assert info.value.location is not None and info.value.location.line is not None, info.value.cli_line()


def test_messages_are_one_line_whatever_they_quote() -> None:
    err = TeaalLoopsError("bad name 'a\nb\x1b[31m'", location=Location("f\n.yaml", 1, 2))
    assert err.cli_line() == "f\\n.yaml:1:2: error: bad name 'a\\nb\\x1b[31m'"


def test_main_locates_errors_from_the_spec_a_command_attached(
    spec: Spec, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(args: argparse.Namespace) -> int:
        err = ParameterError("too many threads")
        err.located(spec)  # attached before the key path is known, as a wrapper would
        err.key_path = "x-teaal-loops.block_threads"
        raise err

    def register(sub: Any) -> None:
        sub.add_parser("fake").set_defaults(func=run)

    fake = types.SimpleNamespace(ORDER=0, register=register, __name__="cmd_fake")
    monkeypatch.setattr(cli, "_command_modules", lambda: [fake])
    assert cli.main(["fake"]) == 2
    assert capsys.readouterr().err == "loc.yaml:16:18: error: too many threads\n"


def test_main_falls_back_to_the_spec_file_the_command_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "lanes_first.yaml"
    path.write_text(TEXT.replace("space: [M0, K0]", "space: [K0, M0]"), encoding="utf-8")
    assert cli.main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:13:"), err


def test_a_bad_layout_option_in_the_spec_is_refused_at_its_value() -> None:
    """Layouts register at run time, so their options are checked when the spec is lowered;
    the error still points at the value that names the layout."""
    from teaal_loops.errors import LayoutError
    from teaal_loops.lowering import lower

    text = (REPO / "specs" / "thread_mapped.yaml").read_text() + (
        "x-teaal-loops:\n  layout: bcsr:0x0\n"
    )
    spec = load_spec_string(text, source="s.yaml")
    with pytest.raises(LayoutError) as info:
        with spec_errors(spec):
            lower(spec)
    line = len(text.splitlines())
    assert info.value.cli_line().startswith(f"s.yaml:{line}:11: error: ")
    assert "block 0x0" in info.value.cli_line()
