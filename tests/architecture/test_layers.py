"""The package's structure, as the pipeline reads: no import cycles (imports inside functions
counted), the import-linter contracts of pyproject.toml kept, no schedule or layout named
outside its own definition, and no docstring pointing outside the repository."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "teaal_loops"


def _import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its text (functions too)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".")
                    anchor = anchor if is_package else anchor[:-1]
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                # `from pkg import sub` imports the submodule; `from pkg import name`, the package
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and target.startswith("teaal_loops"):
                    graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles_counting_imports_inside_functions() -> None:
    """A package importing its own submodules is a cycle only if a submodule imports the
    package back; parent packages are not counted as imported by their children."""
    graph = _import_graph()
    assert len(graph) > 50
    assert _cycles(graph) == []


def test_import_linter_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed (pip install '.[test]')")
    done = subprocess.run([str(lint)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


SCHEDULE_NAMES = ("thread_mapped", "group_mapped", "work_oriented", "merge_path")
LAYOUT_NAMES = ("csr", "csc", "coo", "ell", "dia", "bcsr", "panels", "heavy", "pieces")


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants that are not docstrings, with their lines."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


@pytest.mark.parametrize(
    "folder",
    ["ir", "lowering", "codegen", "runtime", "pipeline", "reference", "cli", "spec", "matrix"],
)
def test_no_schedule_is_branched_on_outside_its_definition(folder: str) -> None:
    """`if kind == "merge_path"` belongs in schedules/merge_path.py, nowhere else."""
    offenders = []
    for path in (PACKAGE / folder).rglob("*.py"):
        text = path.read_text()
        for name in SCHEDULE_NAMES:
            for match in re.finditer(rf"(==|!=|\bin\b|\bis\b)\s*\(?[^\n]*['\"]{name}['\"]", text):
                offenders.append(f"{path.relative_to(REPO)}: {match.group(0)[:60]}")
    assert offenders == []


@pytest.mark.parametrize("folder", ["ir", "schedules", "lowering", "codegen", "runtime"])
def test_no_layout_is_named_outside_its_definition(folder: str) -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {text!r}"
        for path in (PACKAGE / folder).rglob("*.py")
        for line, text in _code_strings(path)
        if (text.strip().lower() in LAYOUT_NAMES or text.lower().startswith(("bcsr:", "panels:", "heavy:")))
        and ".format ==" not in path.read_text().splitlines()[line - 1]  # SciPy's formats
    ]
    assert offenders == []


def test_no_docstring_points_outside_the_repository() -> None:
    pattern = re.compile(r"DESIGN\.md|IR_SEMANTICS\.md|DESIGN §|Schedule\.bind\b")
    offenders = [
        f"{path.relative_to(REPO)}:{n}"
        for path in PACKAGE.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []
