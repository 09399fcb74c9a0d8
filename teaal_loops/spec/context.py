"""The parser's context: typed access to YAML nodes, located errors, warnings.

Every section parser reads the YAML through :class:`Context`, which fails with a
:class:`~teaal_loops.errors.SpecError` naming the key path and the position of the value (or of
the key where no value was written) and collects warnings for what TeAAL would silently ignore.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NoReturn

from teaal_loops.errors import Location, SpecError
from teaal_loops.spec.expressions import describe_char
from teaal_loops.spec.key_paths import item, join
from teaal_loops.spec.model import Warning_
from teaal_loops.spec.yaml_positions import YEntry, YMap, YNode, YScalar, YSeq, describe, quote

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# An identifier: ASCII letters, digits and underscores, not starting with a digit. Every
# tensor, rank and parameter name must be one (use ``fullmatch``: ``$`` would let a trailing
# newline through).
NAME_RE = re.compile(_NAME)
# Characters no spec string may contain: a line break in a name or an expression would start a
# new line in generated code. Tabs count as spaces.
CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


# The largest size, parameter or bit count a spec may give: sizes are multiplied and added in
# 64-bit arithmetic downstream, so keep well inside int64.
MAX_INT_VALUE = 2**62 - 1


def is_name(text: str) -> bool:
    return NAME_RE.fullmatch(text) is not None


def suggest(name: str, choices: Iterable[str], cutoff: float = 0.6) -> list[str]:
    """The close match of ``name`` among ``choices`` (at most one); nothing for very long
    names, which difflib would take quadratic time over."""
    if len(name) > 64:
        return []
    return difflib.get_close_matches(name, list(choices), n=1, cutoff=cutoff)


def is_null(node: YNode | None) -> bool:
    return isinstance(node, YScalar) and node.value is None


@dataclass
class Context:
    source: str | None
    strict: bool
    warnings: list[Warning_] = field(default_factory=list)

    def fail(
        self,
        message: str,
        where: YNode | YEntry | Location | None,
        key_path: str | None,
        expected: str | None = None,
    ) -> NoReturn:
        raise SpecError(
            message, location=self.loc(where), key_path=key_path or None, expected=expected
        )

    def loc(self, where: YNode | YEntry | Location | None) -> Location:
        if where is None:
            return Location(self.source, 1, 1)
        if isinstance(where, Location):
            return where
        if isinstance(where, YEntry):
            return where.key_location
        return where.location

    def warn(
        self, message: str, where: YNode | YEntry | Location | None, key_path: str | None
    ) -> None:
        self.warnings.append(Warning_(message, self.loc(where), key_path))

    def extension(self, what: str, where: YNode | YEntry, key_path: str) -> None:
        """Our non-TeAAL features: fine normally, an error in strict-TeAAL mode."""
        if self.strict:
            self.fail(
                f"{what} is a teaal-loops extension, not TeAAL (rejected in strict mode)",
                where,
                key_path,
            )

    # ---- typed access ---------------------------------------------------------------------
    def want_map(
        self, node: YNode | None, path: str, what: str, where: YEntry | None = None
    ) -> YMap:
        if isinstance(node, YMap):
            return node
        self.fail(f"found {describe(node)}", node if node is not None else where, path, what)

    def opt_map(
        self, node: YNode | None, path: str, what: str, where: YEntry | None = None
    ) -> YMap | None:
        """A mapping, or ``None`` for an empty value (TeAAL treats ``key:`` as absent)."""
        if node is None or is_null(node):
            return None
        return self.want_map(node, path, what, where)

    def want_list(
        self, node: YNode | None, path: str, what: str, where: YEntry | None = None
    ) -> YSeq:
        if isinstance(node, YSeq):
            return node
        hint = ""
        if isinstance(node, YScalar) and isinstance(node.value, str) and "," in node.value:
            hint = f" (write it as a YAML list: [{node.value}])"
        self.fail(f"found {describe(node)}{hint}", node if node is not None else where, path, what)

    def want_str(
        self, node: YNode | None, path: str, what: str, where: YEntry | None = None
    ) -> YScalar:
        if isinstance(node, YScalar) and isinstance(node.value, str):
            return node
        self.fail(f"found {describe(node)}", node if node is not None else where, path, what)

    def want_text(
        self, node: YNode | None, path: str, what: str, where: YEntry | None = None
    ) -> tuple[YScalar, str]:
        """A string without control characters or line breaks; returns it stripped."""
        s = self.want_str(node, path, what, where)
        text = str(s.value)
        self.no_control(s, text, path)
        return s, text.strip()

    def no_control(self, s: YScalar, text: str, path: str) -> None:
        """Refuse a control character or line break inside ``text`` (the value of ``s``),
        pointing at it; leading and trailing white space is ignored."""
        start = len(text) - len(text.lstrip())
        m = CONTROL_RE.search(text, start, len(text.rstrip()))
        if m:
            self.fail(
                f"{describe_char(m.group())} inside {text.strip()!r}: a spec string is one line",
                s.location_of(m.start()),
                path,
            )

    def want_name(
        self, node: YNode | None, path: str, what: str, where: YEntry | None = None
    ) -> str:
        s, text = self.want_text(node, path, what, where)
        if not is_name(text):
            self.fail(f"{quote(text)} is not a name", s, path, what)
        return text

    def key_name(self, entry: YEntry, path: str, what: str) -> str:
        """A mapping key that names a tensor, rank or parameter: it must be an identifier."""
        if not is_name(entry.key):
            self.fail(
                f"{quote(entry.key)} is not a name "
                "(letters, digits and _, not starting with a digit)",
                entry,
                path,
                expected=what,
            )
        return entry.key

    def want_int(
        self,
        node: YNode | None,
        path: str,
        what: str,
        *,
        minimum: int = 0,
        maximum: int = MAX_INT_VALUE,
        where: YEntry | None = None,
    ) -> int:
        if (
            isinstance(node, YScalar)
            and isinstance(node.value, int)
            and not isinstance(node.value, bool)
        ):
            if node.value < minimum:
                self.fail(f"{node.value} is too small", node, path, what)
            if node.value > maximum:
                self.fail(f"{node.value} is too large", node, path, what)
            return node.value
        self.fail(f"found {describe(node)}", node if node is not None else where, path, what)

    def rank_list(self, entry: YEntry, path: str, what: str) -> tuple[str, ...]:
        """A YAML list of rank names (``[M, K]``); names are checked to be identifiers."""
        seq = self.want_list(entry.value, path, what, entry)
        names: list[str] = []
        for i, node in enumerate(seq.items):
            name = self.want_name(node, item(path, i), "a rank name such as M")
            if name in names:
                self.fail(f"rank {name} is listed twice", node, item(path, i), "each rank once")
            names.append(name)
        return tuple(names)

    def check_keys(self, node: YMap, known: tuple[str, ...], path: str) -> None:
        """Warn about keys TeAAL would silently ignore, suggesting the close match."""
        for entry in node.entries:
            if entry.key in known:
                continue
            close = suggest(entry.key, known)
            hint = (
                f"; did you mean {close[0]!r}?" if close else f" (known keys: {', '.join(known)})"
            )
            message = f"unknown key {quote(entry.key)} is ignored{hint}"
            self.warn(message, entry, join(path, entry.key))
