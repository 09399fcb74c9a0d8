"""Text from input never escapes a comment of the generated CUDA: spec file names with line
breaks, backslashes (which splice the next line into a // comment) and control characters."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from teaal_loops.codegen import comment_text
from teaal_loops.pipeline import kernel_source, load_schedule
from teaal_loops.types import KernelParam
from tests.conftest import REPO

HOSTILE_STEMS = [
    "k\n#error injected by the file name\n;",
    "k\\",  # a trailing backslash continues a // comment onto the next line
    "k\r#error carriage return",
    "k\u2028#error unicode line separator",
    "k\x00\x1b[31m",
]


@pytest.mark.parametrize("stem", HOSTILE_STEMS)
def test_a_hostile_spec_file_name_stays_inside_its_comment(tmp_path: Path, stem: str) -> None:
    path = tmp_path / f"{stem.replace(chr(0), '0')}.yaml"
    shutil.copy(REPO / "specs" / "thread_mapped.yaml", path)
    source = kernel_source(load_schedule(path), dtype="f32")
    header = source.split("#ifndef TEAAL_TRACE")[0]
    for line in header.splitlines():
        assert line.startswith("//") or not line.strip(), repr(line)
        assert not line.endswith("\\"), repr(line)
    assert "#error" not in "".join(
        line for line in source.splitlines() if not line.startswith("//")
    )
    assert len(header.splitlines()) == len(
        kernel_source(load_schedule(REPO / "specs" / "thread_mapped.yaml")).split(
            "#ifndef TEAAL_TRACE"
        )[0].splitlines()
    )


@pytest.mark.parametrize(
    "text", ["a\nb", "a\rb", "a\\", "a\u2028b", "a\u2029b", "a\x85b", "a\x7fb"]
)
def test_comment_text_is_one_line_without_backslashes(text: str) -> None:
    safe = comment_text(text)
    assert len(safe.splitlines()) == 1 and "\\" not in safe
    assert safe.startswith("a")


def test_a_layout_argument_doc_cannot_end_its_comment(monkeypatch: pytest.MonkeyPatch) -> None:
    from teaal_loops import layouts
    from teaal_loops.codegen import clear_caches, make_config, render
    from teaal_loops.layouts import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    csr = layouts.get_layout("csr")
    hostile = tuple(
        KernelParam(p.name, p.ctype, f"{p.doc}\n#error injected by a doc \\")
        for p in csr.params
    )
    layouts.register(
        "csr_hostile_docs", macro_file=csr.macro_file, params=hostile, build=csr.build,
        pack=csr.pack, entries=csr.entries, schedules=csr.schedules,
    )
    try:
        schedule = load_schedule(REPO / "specs" / "work_oriented.yaml")
        source = render(make_config(schedule, layout="csr_hostile_docs"))
    finally:
        clear_caches()
    assert "#error" not in "".join(
        line for line in source.splitlines() if "//" not in line
    )
    assert all(not line.rstrip().endswith("\\") for line in source.splitlines())
