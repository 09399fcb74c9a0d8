"""YAML loading that remembers where every key and value was written.

``yaml.safe_load`` throws positions away, so a spec error could only say *what* is wrong. We
compose the node tree instead (``yaml.compose``) and convert it into small ``Y*`` objects that
carry a :class:`~teaal_loops.errors.Location` for every value and every mapping key.

Scalars are typed with the YAML 1.2 core schema (what TeAAL's ruamel loader uses), not
PyYAML's 1.1 rules: ``NO``, ``on`` or ``2001-01-01`` stay strings, so a tensor called ``N`` or
``NO`` is never silently turned into a boolean.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass, field

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from teaal_loops.errors import Location, SpecError

Scalar = str | int | float | bool | None

# ---- YAML 1.2 core schema for plain (unquoted, untagged) scalars -----------------------------
_NULL = re.compile(r"^(?:~|null|Null|NULL|)\Z")
_BOOL_TRUE = re.compile(r"^(?:true|True|TRUE)\Z")
_BOOL_FALSE = re.compile(r"^(?:false|False|FALSE)\Z")
_INT_DEC = re.compile(r"^[-+]?[0-9]+\Z")
_INT_OCT = re.compile(r"^0o[0-7]+\Z")
_INT_HEX = re.compile(r"^0x[0-9a-fA-F]+\Z")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
_INF = re.compile(r"^[-+]?\.(?:inf|Inf|INF)\Z")
_NAN = re.compile(r"^\.(?:nan|NaN|NAN)\Z")

_TAG = "tag:yaml.org,2002:"
_PROPERTIES = re.compile(r"^(?:[&!]\S*\s+)+")
_MAX_DEPTH = 200
# Aliases can make a small file expand exponentially ("billion laughs"); refuse beyond this.
_MAX_EXPANDED_NODES = 100_000
# No spec value needs a longer integer; Python refuses to convert decimal strings beyond 4,300
# digits, and every integer field has its own, much smaller, bound on top of this one.
MAX_INT_DIGITS = 40
_INT_LIMIT = 10**MAX_INT_DIGITS

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class SourceLines:
    """A document's text with its line starts, found once: positions in O(log n)."""

    def __init__(self, file: str | None, text: str) -> None:
        self.file = file
        self.text = text
        self._starts: list[int] | None = None

    def location_at(self, index: int) -> Location:
        if self._starts is None:
            self._starts = [0, *(m.end() for m in re.finditer("\n", self.text))]
        line = bisect.bisect_right(self._starts, index) - 1
        return Location(self.file, line + 1, index - self._starts[line] + 1)


@dataclass(frozen=True)
class YScalar:
    """A scalar with its source position. ``text`` is the scalar's string form as written."""

    value: Scalar
    text: str
    location: Location
    quoted: bool = False
    # Raw source span of the scalar (character offsets), used to locate characters inside it.
    span: tuple[int, int] = (0, 0)
    source: SourceLines | None = field(default=None, repr=False, compare=False)

    def location_of(self, offset: int) -> Location:
        """The file position of character ``offset`` of ``text`` (best effort, exact for
        single-line plain and simply quoted scalars; the scalar's start where escapes or line
        folding make the mapping ambiguous)."""
        raw_indices = self._raw_indices
        if self.source is None or not raw_indices or not 0 <= offset < len(raw_indices):
            return self.location
        return self.source.location_at(self.span[0] + raw_indices[offset])

    @functools.cached_property
    def _raw_indices(self) -> list[int]:
        """For each character of ``text`` (and one past its end), its index in the raw
        source span; empty where escapes make the two diverge. Computed once per scalar, so
        locating every token of a long einsum stays linear."""
        if self.source is None:
            return []
        start, end = self.span
        raw = self.source.text[start:end]
        # Every character of the value appears, in order, in the raw text (quotes,
        # indentation and line folding only add characters), so walk both together. An
        # anchor or tag before the value (``&e !!str Z[m] = ...``) is skipped first.
        prefix = _PROPERTIES.match(raw)
        raw_i = prefix.end() if prefix else 0
        direct = raw.find(self.text, raw_i) if self.text else -1
        if direct >= 0:  # written verbatim: plain or quoted without escapes
            return list(range(direct, direct + len(self.text) + 1))
        out: list[int] = []
        for ch in self.text:
            found = raw.find(ch, raw_i)
            if found < 0:  # an escape sequence: the value no longer lines up with the text
                return []
            out.append(found)
            raw_i = found + 1
        out.append(min(raw_i, len(raw)))
        return out


@dataclass(frozen=True)
class YSeq:
    items: tuple[YNode, ...]
    location: Location


@dataclass(frozen=True)
class YEntry:
    """One ``key: value`` pair of a mapping."""

    key: str
    key_location: Location
    value: YNode


@dataclass(frozen=True)
class YMap:
    entries: tuple[YEntry, ...]
    location: Location

    def get(self, key: str) -> YEntry | None:
        for entry in self.entries:
            if entry.key == key:
                return entry
        return None

    def keys(self) -> list[str]:
        return [e.key for e in self.entries]


YNode = YScalar | YSeq | YMap


def describe(node: YNode | None) -> str:
    """A short user-facing name for what a node is (for 'expected X, found Y')."""
    if node is None:
        return "nothing"
    if isinstance(node, YMap):
        return "a mapping"
    if isinstance(node, YSeq):
        return "a list"
    v = node.value
    if v is None:
        return "an empty value"
    if isinstance(v, bool):
        return f"the boolean {node.text!r}"
    if isinstance(v, int):
        return f"the integer {shorten(node.text)}"
    if isinstance(v, float):
        return f"the number {shorten(node.text)}"
    return f"the string {shorten(repr(v))}"


def quote(text: str) -> str:
    """``repr(text)``, shortened for messages."""
    return shorten(repr(text))


def shorten(text: str, limit: int = 80) -> str:
    """``text``, or its start and end around an ellipsis when longer than ``limit``: messages
    quote what was written without repeating a megabyte of it."""
    if len(text) <= limit:
        return text
    return f"{text[: limit // 2]}...{text[-(limit // 4) :]} ({len(text)} characters)"


def to_plain(node: YNode | None) -> object:
    """Drop positions: the Python value (dicts, lists, scalars)."""
    if node is None:
        return None
    if isinstance(node, YScalar):
        return node.value
    if isinstance(node, YSeq):
        return [to_plain(i) for i in node.items]
    return {e.key: to_plain(e.value) for e in node.entries}


def _location_at(file: str | None, text: str, index: int) -> Location:
    line = text.count("\n", 0, index) + 1
    line_start = text.rfind("\n", 0, index) + 1
    return Location(file, line, index - line_start + 1)


def _mark_location(file: str | None, mark: yaml.Mark | None) -> Location:
    if mark is None:
        return Location(file)
    return Location(file, mark.line + 1, mark.column + 1)


def _too_many_values() -> str:
    return (
        f"the YAML holds more than {_MAX_EXPANDED_NODES} values once aliases are expanded; "
        "no spec needs that many"
    )


class _TooManyNodes(Exception):
    def __init__(self, mark: yaml.Mark) -> None:
        self.mark = mark


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe composer, stopped after :data:`_MAX_EXPANDED_NODES` nodes: each node
    costs hundreds of bytes, so a large file of tiny values would otherwise take gigabytes
    before any check could refuse it."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.nodes = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        self.nodes += 1
        if self.nodes > _MAX_EXPANDED_NODES:
            raise _TooManyNodes(self.peek_event().start_mark)
        return super().compose_node(parent, index)  # type: ignore[no-any-return]


def load_yaml(text: str, source: str | None) -> YNode | None:
    """Parse one YAML document into position-carrying nodes (``None`` for an empty document)."""
    try:
        root = yaml.compose(text, Loader=_BoundedLoader)
    except _TooManyNodes as err:
        raise SpecError(_too_many_values(), location=_mark_location(source, err.mark)) from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        problem = err.problem or err.context or "malformed YAML"
        context = f" ({err.context})" if err.context and err.problem else ""
        raise SpecError(
            f"YAML syntax error: {problem}{context}", location=_mark_location(source, mark)
        ) from None
    except yaml.reader.ReaderError as err:
        raise SpecError(
            f"YAML syntax error: unacceptable character #x{err.character:04x}"
            if isinstance(err.character, int)
            else "YAML syntax error: unreadable character",
            location=_location_at(source, text, err.position),
        ) from None
    except yaml.YAMLError as err:
        raise SpecError(f"YAML syntax error: {err}", location=Location(source)) from None
    except RecursionError:
        raise SpecError("YAML nesting is too deep", location=Location(source)) from None
    if root is None:
        return None
    converter = _Converter(text, source)
    result = converter.convert(root, 0)
    if converter.expanded_size(root) > _MAX_EXPANDED_NODES:
        raise SpecError(
            _too_many_values(),
            location=_mark_location(source, root.start_mark),
        )
    return result


class _Converter:
    def __init__(self, text: str, source: str | None) -> None:
        self.text = text
        self.source = source
        self.lines = SourceLines(source, text)
        # Aliases make the node tree a DAG; cache by identity and refuse cycles.
        self.done: dict[int, YNode] = {}
        self.active: set[int] = set()

    def expanded_size(self, node: Node) -> int:
        """How many values ``node`` stands for once every alias is expanded."""
        sizes: dict[int, int] = {}

        def size(n: Node) -> int:
            if id(n) not in sizes:
                if isinstance(n, SequenceNode):
                    sizes[id(n)] = 1 + sum(size(c) for c in n.value)
                elif isinstance(n, MappingNode):
                    sizes[id(n)] = 1 + sum(size(k) + size(v) for k, v in n.value)
                else:
                    sizes[id(n)] = 1
            return sizes[id(n)]

        return size(node)

    def loc(self, node: Node) -> Location:
        return _mark_location(self.source, node.start_mark)

    def convert(self, node: Node, depth: int) -> YNode:
        key = id(node)
        if key in self.done:
            return self.done[key]
        if key in self.active:
            raise SpecError("recursive YAML alias", location=self.loc(node))
        if depth > _MAX_DEPTH:
            raise SpecError("YAML nesting is too deep", location=self.loc(node))
        self.active.add(key)
        result: YNode
        if isinstance(node, ScalarNode):
            result = self.scalar(node)
        elif isinstance(node, SequenceNode):
            self.check_tag(node, "seq")
            result = YSeq(tuple(self.convert(n, depth + 1) for n in node.value), self.loc(node))
        elif isinstance(node, MappingNode):
            self.check_tag(node, "map")
            result = self.mapping(node, depth)
        else:  # pragma: no cover - compose only produces the three kinds
            raise SpecError("unsupported YAML node", location=self.loc(node))
        self.active.discard(key)
        self.done[key] = result
        return result

    def check_tag(self, node: Node, kind: str) -> None:
        if self.explicit_tag(node) and node.tag != _TAG + kind:
            raise SpecError(f"unsupported YAML tag {node.tag!r}", location=self.loc(node))

    def mapping(self, node: MappingNode, depth: int) -> YMap:
        entries: list[YEntry] = []
        seen: dict[str, Location] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise SpecError(
                    "mapping keys must be plain names, found a "
                    + ("list" if isinstance(key_node, SequenceNode) else "mapping"),
                    location=self.loc(key_node),
                )
            name = str(key_node.value)
            key_loc = self.loc(key_node)
            if _CONTROL.search(name):
                raise SpecError(
                    f"the key {name!r} contains a control character or line break",
                    location=key_loc,
                )
            if name in seen:
                first = seen[name]
                raise SpecError(
                    f"duplicate key {name!r} (first written at line {first.line})",
                    location=key_loc,
                )
            seen[name] = key_loc
            entries.append(YEntry(name, key_loc, self.convert(value_node, depth + 1)))
        return YMap(tuple(entries), self.loc(node))

    def scalar(self, node: ScalarNode) -> YScalar:
        text = str(node.value)
        value: Scalar
        if self.explicit_tag(node):
            value = self.tagged(node, text)
        elif node.style is None:
            value = self.core_schema(text)  # plain scalar: typed by the 1.2 core schema
            if isinstance(value, int) and not isinstance(value, bool):
                value = self.bounded(value, text, node)
        else:
            value = text  # quoted and block scalars are strings
        start, end = node.start_mark.index, node.end_mark.index
        return YScalar(
            value, text, self.loc(node), node.style in ("'", '"'), (start, end), self.lines
        )

    def explicit_tag(self, node: Node) -> bool:
        """True when the node was written with an explicit ``!tag`` (the resolver's implicit
        tags are ignored: we type plain scalars ourselves)."""
        start = node.start_mark.index  # a bounded slice: this runs for every node
        raw = self.text[start : min(node.end_mark.index, start + 4096)]
        raw = re.sub(r"^&\S+\s*", "", raw)  # an anchor may precede the tag
        return raw.startswith("!")

    def tagged(self, node: ScalarNode, text: str) -> Scalar:
        kind = node.tag[len(_TAG) :] if node.tag.startswith(_TAG) else None
        if kind == "str":
            return text
        if kind == "null":
            return None
        if kind == "bool" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind == "int":
            if len(text) > 4 * MAX_INT_DIGITS:  # even in binary, too many digits
                return self.bounded(_INT_LIMIT, text, node)
            try:
                return self.bounded(int(text, 0), text, node)
            except ValueError:
                pass
        if kind == "float":
            try:
                return float(text)
            except ValueError:
                pass
        if kind in ("bool", "int", "float"):
            raise SpecError(f"{text!r} is not a valid {kind}", location=self.loc(node))
        raise SpecError(f"unsupported YAML tag {node.tag!r}", location=self.loc(node))

    def bounded(self, value: int, text: str, node: ScalarNode) -> int:
        if -_INT_LIMIT < value < _INT_LIMIT:
            return value
        shown = text if len(text) <= 24 else f"{text[:12]}...{text[-8:]}"
        raise SpecError(
            f"the integer {shown} is too large (at most {MAX_INT_DIGITS} digits)",
            location=self.loc(node),
        )

    @staticmethod
    def core_schema(text: str) -> Scalar:
        if _NULL.match(text):
            return None
        if _BOOL_TRUE.match(text):
            return True
        if _BOOL_FALSE.match(text):
            return False
        if _INT_DEC.match(text):
            digits = text.lstrip("+-").lstrip("0")
            if len(digits) > MAX_INT_DIGITS:  # int() would be slow, or refuse past 4,300
                return _INT_LIMIT
            return int(text)
        if _INT_OCT.match(text):
            return int(text[2:], 8)  # power-of-two bases convert in linear time
        if _INT_HEX.match(text):
            return int(text[2:], 16)
        if _FLOAT.match(text):
            return float(text)
        if _INF.match(text):
            return float("-inf") if text.startswith("-") else float("inf")
        if _NAN.match(text):
            return float("nan")
        return text
