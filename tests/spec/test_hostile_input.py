"""Hostile specs and spec files: one located line and exit status 2, never a traceback.

Each case is one that used to crash (a traceback, exit 1), hang, take gigabytes, or pass a
newline through to generated CUDA.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from teaal_loops.cli import main
from teaal_loops.cli.common import parse_params
from teaal_loops.errors import ParameterError, SpecError
from teaal_loops.spec import Spec, load_spec_string
from teaal_loops.spec.parse import MAX_SPEC_BYTES

SPMV = """\
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
      M: [uniform_shape(NUM_TILES), uniform_shape(NUM_THREADS)]
  spacetime:
    Z:
      space: [M0]
      time: [M2, M1, K]
"""


def load(text: str) -> Spec:
    return load_spec_string(textwrap.dedent(text), source="h.yaml")


def error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        load(text)
    err = info.value
    assert err.location is not None and err.location.line is not None, err.cli_line()
    assert "\n" not in err.cli_line()
    return err


def at(err: SpecError) -> tuple[int | None, int | None]:
    assert err.location is not None
    return err.location.line, err.location.column


# ---- line breaks and control characters ---------------------------------------------------


def test_a_newline_inside_an_einsum_is_refused_at_the_newline() -> None:
    err = error(SPMV.replace("- Z[m] = A[m, k] * B[k]", '- "Z[m] = A[m, k]\\n* B[k]"'))
    assert "line break" in err.message and err.key_path == "einsum.expressions[0]"
    assert at(err)[0] == 7


def test_a_literal_block_einsum_spanning_two_lines_is_refused() -> None:
    text = SPMV.replace("- Z[m] = A[m, k] * B[k]", "- |\n      Z[m] = A[m, k]\n      * B[k]")
    err = error(text)
    assert "line break" in err.message
    assert at(err) == (8, 21)


def test_a_folded_einsum_with_a_trailing_newline_is_fine() -> None:
    text = SPMV.replace("- Z[m] = A[m, k] * B[k]", "- >\n      Z[m] = A[m, k]\n      * B[k]\n")
    assert load(text).einsums[0].text == "Z[m] = A[m, k] * B[k]"


@pytest.mark.parametrize(
    ("old", "new", "key_path"),
    [
        (
            "uniform_shape(NUM_THREADS)",
            '"uniform_shape(\\nNUM_THREADS)"',
            "mapping.partitioning.Z.M[1]",
        ),
        ("space: [M0]", 'space: ["M0\\r"]', None),
        ("space: [M0]", 'space: ["M\\x1b0"]', "mapping.spacetime.Z.space[0]"),
        ("A: [M, K]", 'A: [M, "K\\nint main"]', "einsum.declaration.A[1]"),
    ],
)
def test_control_characters_in_spec_strings_are_refused(
    old: str, new: str, key_path: str | None
) -> None:
    text = SPMV.replace(old, new)
    if key_path is None:  # a trailing control character is white space around the name
        assert load(text).mapping.spacetime["Z"].space[0].rank == "M0"
        return
    err = error(text)
    assert err.key_path == key_path
    assert "\n" not in err.cli_line() and "\x1b" not in err.cli_line()


def test_a_key_with_a_line_break_is_refused_at_the_key() -> None:
    err = error(SPMV.replace("    B: [K]\n", '    "B\\nx": [K]\n'))
    assert "control character or line break" in err.message
    assert at(err) == (4, 5)


def test_a_file_name_with_a_newline_cannot_start_a_line_of_generated_code() -> None:
    spec = load_spec_string(SPMV, source="dir/a\nimport os; os.system('x')\r.yaml")
    assert spec.name == "a\\nimport os; os.system('x')\\r"
    assert "\n" not in spec.name and "\r" not in spec.name


# ---- names --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "key_path"),
    [
        ("    B: [K]\n", "    B-1: [K]\n", "einsum.declaration.B-1"),
        ("A: [M, K]", "A: [M, 1K]", "einsum.declaration.A[1]"),
        ("A: [M, K]", "A: [M, K\u00e9]", "einsum.declaration.A[1]"),
        ("spacetime:", "rank-order: {'A B': [M, K]}\n  spacetime:", "mapping.rank-order.A B"),
        ("NUM_TILES", "NUM-TILES", "mapping.partitioning.Z.M[0]"),
    ],
)
def test_names_must_be_identifiers(old: str, new: str, key_path: str) -> None:
    err = error(SPMV.replace(old, new))
    assert err.key_path == key_path


def test_keywords_and_generated_looking_names_are_legal_teaal() -> None:
    text = (
        SPMV.replace("A:", "class:")
        .replace("A[m, k]", "class[m, k]")
        .replace("B", "Z_REF")
        .replace("NUM_TILES", "lambda")
        .replace("NUM_THREADS", "__init__")
    )
    spec = load(text)
    assert set(spec.declaration) == {"class", "Z_REF", "Z"}
    assert spec.parameters == ("lambda", "__init__")


# ---- integers -----------------------------------------------------------------------------

HUGE = "9" * 5000


@pytest.mark.parametrize(
    ("old", "new", "key_path"),
    [
        ("uniform_shape(NUM_TILES)", f"uniform_shape({HUGE})", "mapping.partitioning.Z.M[0]"),
        ("uniform_shape(NUM_TILES)", f"uniform_shape({2**63})", "mapping.partitioning.Z.M[0]"),
        ("uniform_shape(NUM_TILES)", f"uniform_shape({2**62})", "mapping.partitioning.Z.M[0]"),
        ("uniform_shape(NUM_TILES)", "uniform_shape(0)", "mapping.partitioning.Z.M[0]"),
        ("A[m, k]", f"A[{HUGE}*m, k]", "einsum.expressions[0]"),
        ("spacetime:", f"loop-order: {{Z: {HUGE}}}\n  spacetime:", None),
        ("spacetime:", f"loop-order: {{Z: 0x{'f' * 5000}}}\n  spacetime:", None),
        ("spacetime:", f"loop-order: {{Z: !!int '{HUGE}'}}\n  spacetime:", None),
    ],
)
def test_huge_integers_are_refused_where_they_are_written(
    old: str, new: str, key_path: str | None
) -> None:
    err = error(SPMV.replace(old, new))
    assert "too large" in err.message or "must be positive" in err.message, err.message
    if key_path is not None:
        assert err.key_path == key_path


def test_huge_integers_in_passed_through_sections_are_refused_too() -> None:
    text = SPMV + f"architecture:\n  C:\n  - name: PE\n    attributes: {{size: {HUGE}}}\n"
    err = error(text)
    assert at(err)[0] == 19


def test_format_bits_are_bounded() -> None:
    text = (
        SPMV
        + "format:\n  A:\n    csr:\n      rank-order: [M, K]\n      K: {format: C, cbits: 4096}\n"
    )
    assert error(text).key_path == "format.A.csr.K.cbits"


# ---- mappings no GPU schedule can honour --------------------------------------------------


def test_fixed_tile_sizes_that_cannot_nest_are_refused_at_the_inner_size() -> None:
    text = SPMV.replace(
        "uniform_shape(NUM_TILES), uniform_shape(NUM_THREADS)", "uniform_shape(3), uniform_shape(2)"
    )
    err = error(text)
    assert err.key_path == "mapping.partitioning.Z.M[1]"
    assert "do not nest" in err.message
    assert at(err) == (11, 29)


@pytest.mark.parametrize(
    "sizes",
    [
        "uniform_shape(6), uniform_shape(3)",
        "uniform_shape(5), uniform_shape(T)",
        "nway_shape(3), uniform_shape(2)",
    ],
)
def test_tile_sizes_that_nest_or_are_not_both_fixed_are_accepted(sizes: str) -> None:
    load(SPMV.replace("uniform_shape(NUM_TILES), uniform_shape(NUM_THREADS)", sizes))


def test_a_wrong_spacetime_rank_points_at_the_rank() -> None:
    err = error(SPMV.replace("time: [M2, M1, K]", "time: [M2, M7, K]"))
    assert err.key_path == "mapping.spacetime.Z.time[1]"
    assert at(err) == (15, 18)


# ---- files --------------------------------------------------------------------------------


def run_parse(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["parse", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") <= 2 and "Traceback" not in err, err
    return err


def test_unreadable_spec_paths_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPMV, encoding="utf-8")
    assert "not a directory" in run_parse(capsys, f"{spec}/")
    assert "is a directory" in run_parse(capsys, str(tmp_path))
    assert "no such file" in run_parse(capsys, str(tmp_path / "nope.yaml"))
    assert "too long" in run_parse(capsys, str(tmp_path / ("n" * 5000)))
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    assert "symbolic links" in run_parse(capsys, str(loop))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_without_waiting_for_a_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert "not a regular file" in run_parse(capsys, str(fifo))


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="no /proc/self/mem here")
def test_proc_self_mem_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert "/proc/self/mem: error:" in run_parse(capsys, "/proc/self/mem")


def test_a_huge_spec_file_is_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(MAX_SPEC_BYTES + 1)  # sparse: costs no disk
    assert "MiB" in run_parse(capsys, str(big))


def test_a_file_name_with_control_characters_prints_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if sys.platform == "win32":
        pytest.skip("Windows file names cannot hold newlines")
    err = run_parse(capsys, str(tmp_path / "a\nb\x1b.yaml"))
    assert "a\\nb\\x1b.yaml" in err and err.count("\n") == 1


def test_indent_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPMV, encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["parse", "--indent", "100000000", str(spec)])
    assert info.value.code == 2
    assert "0 to 16" in capsys.readouterr().err
    assert main(["parse", "--indent", "16", str(spec)]) == 0
    assert "\n" + " " * 16 + '"source"' in capsys.readouterr().out


# ---- --param ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "fragment"),
    [
        ("N=" + "9" * 5000, "too large"),
        (f"N={2**63}", "too large"),
        (f"N={2**62}", "too large"),
        ("N=0", "positive"),
        ("N=-3", "positive"),
        ("N=1.5", "not an integer"),
        ("\u00e9=3", "NAME=VALUE"),
    ],
)
def test_param_values_are_bounded(item: str, fragment: str) -> None:
    with pytest.raises(ParameterError, match=fragment):
        parse_params([item])


def test_param_values_in_range_parse() -> None:
    assert parse_params([f"N={2**62 - 1}", "M=0x10", "K=1_000"]) == {
        "N": 2**62 - 1,
        "M": 16,
        "K": 1000,
    }
