"""Seeded mutations of spec texts: the ways people (and attackers) break a spec.

Two families, both driven by one ``random.Random``:

* text mutations keep the file's block style and positions realistic: delete, duplicate or swap
  lines, re-indent a line, cut the file short, replace a word or a whole value with a hostile one,
  rename a rank (and its index variable) everywhere, shuffle a flow list;
* tree mutations work on the loaded document: delete, duplicate or swap keys and list items,
  replace a value with a hostile one, then write it back as JSON (valid YAML, flow style).

Every mutation returns the new text and a short description, printed when a case fails.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable
from typing import Any

import yaml

HUGE_DIGITS = "9" * 5000
_HUGE_MARK = "\x00huge\x00"  # JSON cannot write a 5000-digit int; replaced after dumping

HOSTILE_INTS: list[int] = [0, -1, 3, 33, 1024, 4096, 2**31, 2**62, 2**63, 2**64, -(2**63), 10**40]
HOSTILE_FLOATS: list[float] = [1.5, -0.0, 1e308, float("inf"), float("nan")]
HOSTILE_STRINGS: list[str] = [
    "",
    " ",
    "a\nb",
    "Z[m] = A[m, k]\n* B[k]",
    "M0\r",
    "\x1b[31mred",
    "nul\x00byte",
    "line\u2028sep",
    "class",
    "lambda",
    "if",
    "None",
    "Z_REF",
    "__init__",
    "_",
    "\u00e9",
    "\u2217",
    "M0.coord",
    "K.pos",
    "M.cord",
    "uniform_shape(3)",
    "uniform_shape(2)",
    "uniform_shape(0)",
    "uniform_shape(" + "9" * 40 + ")",
    "nway_shape(4)",
    "uniform_occupancy(A.3)",
    "uniform_occupancy(Q.N)",
    "uniform_occupancy(A.\nN)",
    "follow(M)",
    "follow(Z)",
    "flatten()",
    "x_merge_path(A.I)",
    "(M, K)",
    "(M, M)",
    "bcsr:0x0",
    "bcsr:4x4",
    "csr",
    "hyb",
    "auto",
    "merge_path",
    "slip",
    "U",
    "C",
    "Z[m] = A[m, k] * B[k]",
    "Z[m] = A[k, m] * B[k]",
    "Z[m] = A[m, k] * B[k] + C[m]",
    "T[k] = take(A[k], B[k], 99999999999999999999999)",
    "Z[m] = A[" + "9" * 5000 + "*m, k] * B[k]",
    "x" * 10000,
]
HOSTILE_STRUCTURES: list[Any] = [None, True, [], {}, ["M", "M"], {"space": [], "time": []}, [[[]]]]
RANK_NAMES = [
    "Q",
    "class",
    "Z_REF",
    "M0",
    "MK",
    "K1I",
    "_",
    "A",
    "IF",
    "X9",
    "\u00e9",
    "1M",
    "LAMBDA",
]

# Raw YAML snippets for text mutations (anything goes: they may break the YAML itself).
RAW_VALUES = [
    HUGE_DIGITS,
    "-" + HUGE_DIGITS,
    "0x" + "f" * 5000,
    "0o" + "7" * 200,
    "!!int '" + HUGE_DIGITS + "'",
    "!!float x",
    "!!python/object/apply:os.system ['true']",
    "!!binary AAAA",
    "&a [1, *a]",
    "*undefined",
    "[" * 300,
    "{a: 1, a: 2}",
    "~",
    "NO",
    "2001-01-01",
    ".nan",
    "-.inf",
    "'unterminated",
    '"\\x1b[2J"',
    '"tab\\there"',
    "|\n  lit\n  eral",
]

Mutation = Callable[[str, random.Random], tuple[str, str]]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
_RANK = re.compile(r"\b[A-Z][A-Z0-9]*\b")
_VALUE = re.compile(r"^(\s*(?:- )?[^:#\n]+:\s)(.+)$", re.M)
_FLOW_LIST = re.compile(r"\[([^\[\]\n]*,[^\[\]\n]*)\]")


def hostile_value(rng: random.Random) -> Any:
    pool = rng.randrange(5)
    if pool == 0:
        return rng.choice(HOSTILE_INTS) if rng.random() < 0.8 else _HUGE_MARK
    if pool == 1:
        return rng.choice(HOSTILE_FLOATS)
    if pool == 2:
        return copy.deepcopy(rng.choice(HOSTILE_STRUCTURES))  # trees are mutated in place
    return rng.choice(HOSTILE_STRINGS)


def yaml_scalar(value: Any) -> str:
    """``value`` as YAML source text (strings double-quoted with escapes)."""
    if value == _HUGE_MARK:
        return HUGE_DIGITS
    text = json.dumps(value)
    return {"NaN": ".nan", "Infinity": ".inf", "-Infinity": "-.inf"}.get(text, text)


# ---- text mutations ---------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    return text.split("\n")


def delete_line(text: str, rng: random.Random) -> tuple[str, str]:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    return "\n".join(lines[:i] + lines[i + 1 :]), f"delete line {i + 1}"


def duplicate_line(text: str, rng: random.Random) -> tuple[str, str]:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    return "\n".join(lines[: i + 1] + lines[i:]), f"duplicate line {i + 1}"


def swap_lines(text: str, rng: random.Random) -> tuple[str, str]:
    lines = _lines(text)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines), f"swap lines {i + 1} and {j + 1}"


def reindent_line(text: str, rng: random.Random) -> tuple[str, str]:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    delta = rng.choice([-4, -2, -1, 1, 2, 4])
    line = lines[i]
    lines[i] = (
        line[-delta:] if delta < 0 and line[:-delta].isspace() else " " * max(delta, 0) + line
    )
    return "\n".join(lines), f"re-indent line {i + 1} by {delta}"


def truncate(text: str, rng: random.Random) -> tuple[str, str]:
    cut = rng.randrange(len(text) + 1)
    return text[:cut], f"cut at character {cut}"


def replace_word(text: str, rng: random.Random) -> tuple[str, str]:
    words = list(_WORD.finditer(text))
    if not words:
        return text, "no word to replace"
    m = rng.choice(words)
    new = rng.choice(RAW_VALUES) if rng.random() < 0.3 else str(yaml_scalar(hostile_value(rng)))
    if rng.random() < 0.5 and isinstance(v := hostile_value(rng), str):
        new = v  # raw, unquoted: control characters land in the YAML itself
    return text[: m.start()] + new + text[m.end() :], f"word {m.group()!r} -> {new[:40]!r}"


def replace_value(text: str, rng: random.Random) -> tuple[str, str]:
    values = list(_VALUE.finditer(text))
    if not values:
        return text, "no value to replace"
    m = rng.choice(values)
    new = rng.choice(RAW_VALUES) if rng.random() < 0.3 else yaml_scalar(hostile_value(rng))
    return text[: m.start(2)] + new + text[m.end(2) :], f"value {m.group(2)[:30]!r} -> {new[:40]!r}"


def rename_rank(text: str, rng: random.Random) -> tuple[str, str]:
    """Rename a rank everywhere, and its index variable with it: often still a valid spec, so
    the deeper checks and lowering run on names they have not seen."""
    ranks = sorted({m.group() for m in _RANK.finditer(text)})
    if not ranks:
        return text, "no rank to rename"
    old, new = rng.choice(ranks), rng.choice(RANK_NAMES)
    text = re.sub(rf"\b{re.escape(old)}\b", new, text)
    text = re.sub(rf"\b{re.escape(old.lower())}\b", new.lower(), text)
    return text, f"rename rank {old} -> {new!r}"


def shuffle_flow_list(text: str, rng: random.Random) -> tuple[str, str]:
    lists = list(_FLOW_LIST.finditer(text))
    if not lists:
        return text, "no flow list"
    m = rng.choice(lists)
    items = m.group(1).split(",")
    rng.shuffle(items)
    if rng.random() < 0.3:
        items.append(rng.choice(items))  # a repeated rank
    return text[: m.start(1)] + ",".join(items) + text[m.end(1) :], f"shuffle {m.group()[:40]!r}"


def insert_line(text: str, rng: random.Random) -> tuple[str, str]:
    lines = _lines(text)
    i = rng.randrange(len(lines) + 1)
    indent = " " * rng.choice([0, 2, 4, 6])
    key = rng.choice(["einsum", "mapping", "Z", "M", "space", "x-teaal-loops", "params", "N"])
    line = f"{indent}{key}: {yaml_scalar(hostile_value(rng))}"
    return "\n".join(lines[:i] + [line] + lines[i:]), f"insert line {i + 1}: {line[:40]!r}"


# Plausible edits that keep the YAML and mostly keep the spec valid, so that lowering sees
# mappings it has to refuse: (pattern, replacements), one occurrence changed.
_TWEAKS: list[tuple[str, list[str]]] = [
    (r"(?<=\()[A-Z_][A-Z_0-9]*(?=\))", ["1", "2", "3", "8", "32", "33", "1024", "N", "M"]),
    (r"(?<=[A-Z]\.)[A-Z_][A-Z_0-9]*(?=\))", ["1", "3", "32", "64", "N"]),
    (
        r"uniform_shape|nway_shape|uniform_occupancy|x_merge_path",
        ["uniform_shape", "nway_shape", "uniform_occupancy", "x_merge_path"],
    ),
    (
        r"(?<=schedule: )\w+",
        ["auto", "thread_mapped", "group_mapped", "work_oriented", "merge_path"],
    ),
    (r"(?<=layout: )\S+", ["csr", "csc", "coo", "ell", "dia", "bcsr:2x2", "bcsr:3x5", "bcsr:0x0"]),
    (r"(?<=block_threads: )\d+", ["32", "33", "64", "1024", "2048", "0"]),
    (r"A\[m, k\]", ["A[k, m]", "A[m, n]", "A[m]"]),
    (r"(?<=space: \[)[^\]]*", ["", "M0", "K0", "M0, K0", "K0, M0", "MK1", "MK0", "M1, M0"]),
    (r"(?<=time: \[)[^\]]*", ["", "K", "M2, M1, K", "K1", "MK0", "MK1", "M1, K1"]),
    (r"(?<=\.)(pos|coord)\b", ["pos", "coord"]),
    (
        r"\b(?:csr|CSR|ELL|DIA|BCSR_\dx\d|coo|csc)\b(?=:)",
        ["csr", "csc", "ELL", "BCSR_4x4", "dense"],
    ),
    (r"(?<=format: )[UC]", ["U", "C"]),
]


def tweak(text: str, rng: random.Random) -> tuple[str, str]:
    pattern, choices = rng.choice(_TWEAKS)
    found = list(re.finditer(pattern, text))
    if not found:
        return text, f"no {pattern[:20]!r} to tweak"
    m, new = rng.choice(found), rng.choice(choices)
    return text[: m.start()] + new + text[m.end() :], f"tweak {m.group()[:30]!r} -> {new!r}"


TEXT_MUTATIONS: list[Mutation] = [
    tweak,
    tweak,
    tweak,
    delete_line,
    duplicate_line,
    swap_lines,
    reindent_line,
    truncate,
    replace_word,
    replace_value,
    rename_rank,
    rename_rank,
    shuffle_flow_list,
    insert_line,
]


# ---- tree mutations ---------------------------------------------------------------------------


def _containers(node: Any, out: list[Any]) -> list[Any]:
    if isinstance(node, (dict, list)):
        out.append(node)
        for child in node.values() if isinstance(node, dict) else node:
            _containers(child, out)
    return out


def mutate_tree(node: Any, rng: random.Random) -> str:
    """Change one container of ``node`` in place; say how."""
    target = rng.choice(_containers(node, []))
    keys = list(target) if isinstance(target, dict) else list(range(len(target)))
    op = rng.randrange(5)
    if not keys or op == 0:
        value = hostile_value(rng)
        if isinstance(target, dict):
            target[
                rng.choice(["einsum", "mapping", "Z", "M", "K", "space", "params", "(M, K)"])
            ] = value
        else:
            target.insert(rng.randrange(len(target) + 1), value)
        return f"add {value!r:.40}"
    k = rng.choice(keys)
    if op == 1:
        del target[k]
        return f"delete {k!r}"
    if op == 2:
        target[k] = hostile_value(rng)
        return f"replace {k!r} by {target[k]!r:.40}"
    if op == 3 and len(keys) > 1:
        j = rng.choice(keys)
        target[k], target[j] = target[j], target[k]
        return f"swap {k!r} and {j!r}"
    if isinstance(target, list):
        target.insert(k, target[k])
        return f"duplicate item {k}"
    target[f"{k} "] = target[k]  # the same key again, but not quite
    return f"near-duplicate key {k!r}"


def tree_mutation(text: str, rng: random.Random, count: int) -> tuple[str, str]:
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except Exception:  # noqa: BLE001 - PyYAML's own constructors raise more than YAMLError
        return text, "not YAML to begin with"
    if not isinstance(doc, (dict, list)):
        return text, "not a document tree"
    done = [mutate_tree(doc, rng) for _ in range(count)]
    try:
        out = json.dumps(doc, indent=rng.choice([None, 1, 2]), default=str, allow_nan=True)
    except (TypeError, ValueError):  # keys JSON cannot write (dates, ...)
        return text, "tree not writable as JSON"
    out = out.replace(json.dumps(_HUGE_MARK), HUGE_DIGITS)
    out = out.replace("NaN", ".nan").replace("-Infinity", "-.inf").replace("Infinity", ".inf")
    return out, "tree: " + "; ".join(done)


def mutate(text: str, rng: random.Random) -> tuple[str, str]:
    """One to three mutations of ``text``: a quarter plausible tweaks only (they reach
    lowering), a quarter tree-level, the rest any text mutation."""
    count = rng.choice([1, 1, 2, 3])
    family = rng.random()
    if family < 0.25:
        return tree_mutation(text, rng, count)
    pool = [tweak] if family < 0.5 else TEXT_MUTATIONS
    notes = []
    for _ in range(count):
        text, note = rng.choice(pool)(text, rng)
        notes.append(note)
    return text, "; ".join(notes)
