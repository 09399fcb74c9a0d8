"""Identifiers and comments of the generated HiFiber program.

The program is Python text that is compiled and executed, so nothing taken from a spec may reach
it unchecked. Everything in it that came from the spec is one of:

* an identifier handed out by :class:`ProgramNames` from names checked by
  :func:`check_identifier` (ASCII letters, digits and ``_``, not starting with a digit);
* a number (a positive ``int`` size or parameter value, checked where it is bound);
* a string literal written with :func:`repr` of a checked name (``rank_ids=['M', 'K']``);
* a comment made by :func:`comment`, which keeps printable ASCII only, so no line break can end
  it early.

:class:`ProgramNames` gives every distinct thing the program names (the fiber of tensor ``A``
below rank ``K``, the coordinate of rank ``M0``, the parameter ``NUM_TILES``, ...) a readable
identifier derived from the user's names (``a_k``, ``m0``, ``NUM_TILES``), or a numbered
variant (``a_k_2``) when that identifier is a Python keyword or builtin, a dunder name, one of
the program's own names (``Tensor``, ``record``, ...) or already given to something else. User
names therefore cannot break the syntax, shadow a builtin or a helper, or alias each other.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Hashable, Iterable

from teaal_loops.errors import SpecError

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Names the program binds or calls that do not come from the spec: the fibertree classes, the
# stamp recorder and the merge-path helper (all bound by the runner or defined in the text).
PROGRAM_NAMES = ("Tensor", "Fiber", "Payload", "record", "merge_path_shares")


def is_identifier(name: object) -> bool:
    """True for an ASCII Python identifier (keywords included: they are renamed, not refused)."""
    return isinstance(name, str) and _IDENTIFIER.fullmatch(name) is not None


def check_identifier(name: object, what: str) -> str:
    """``name`` if it is an ASCII identifier, else a :class:`SpecError` naming ``what``."""
    if not is_identifier(name):
        raise SpecError(
            f"HiFiber reference: {what} {comment(repr(name))} is not a name "
            "(expected ASCII letters, digits and _, not starting with a digit)"
        )
    assert isinstance(name, str)
    return name


def check_size(value: object, what: str) -> int:
    """``value`` if it is a positive ``int`` (a bool is not), else a :class:`SpecError`."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise SpecError(f"HiFiber reference: {what} {comment(repr(value))} is not a positive size")
    return value


def comment(text: object) -> str:
    """``text`` on one line of printable ASCII (anything else becomes ``?``), safe after ``#``."""
    return "".join(c if " " <= c <= "~" else "?" for c in str(text))


def _reserved() -> frozenset[str]:
    soft = getattr(keyword, "softkwlist", [])
    return frozenset([*keyword.kwlist, *soft, *dir(builtins), *PROGRAM_NAMES, "_"])


RESERVED = _reserved()


class ProgramNames:
    """The identifiers of one program: one per key, unique, never reserved (see the module
    docstring). ``get(key, base)`` returns the identifier of ``key``, choosing it from ``base``
    the first time; the same key always gets the same identifier."""

    def __init__(self, reserved: Iterable[str] = RESERVED) -> None:
        self._reserved = frozenset(reserved)
        self._by_key: dict[Hashable, str] = {}
        self._taken: set[str] = set()

    def get(self, key: Hashable, base: str) -> str:
        found = self._by_key.get(key)
        if found is not None:
            return found
        if not is_identifier(base):  # every base is built from checked names: a bug if not
            raise AssertionError(f"HiFiber name {base!r} for {key!r} is not an identifier")
        name, n = base, 1
        while self._unavailable(name):
            n += 1
            name = f"{base}_{n}"
        self._by_key[key] = name
        self._taken.add(name)
        return name

    def _unavailable(self, name: str) -> bool:
        dunder = name.startswith("__") and name.endswith("__")
        return name in self._taken or name in self._reserved or dunder

    def items(self) -> list[tuple[Hashable, str]]:
        return list(self._by_key.items())


class HiFiberNames(ProgramNames):
    """The identifiers of a HiFiber program, by what they hold. The emitter and the runner
    (which binds the inputs, shapes and scalars) ask the same object, so they agree."""

    def tensor(self, tensor: str, ranks: tuple[str, ...] | list[str], suffix: str = "") -> str:
        """A whole tensor with ``ranks`` in that order (``A_MK``)."""
        ranks = tuple(ranks)
        return self.get(("tensor", tensor, ranks, suffix), f"{tensor}_{''.join(ranks)}{suffix}")

    def input(self, tensor: str, ranks: tuple[str, ...] | list[str]) -> str:
        """The variable the runner binds input ``tensor`` to, in its stored rank order; no
        tensor derived in the program gets it, so a later einsum still reads the input."""
        return self.get(("input", tensor), f"{tensor}_{''.join(ranks)}")

    def from_fiber(self, tensor: str, ranks: tuple[str, ...] | list[str]) -> str:
        """A tensor made from the current fiber of ``tensor`` to split it (``A_K_fiber``)."""
        ranks = tuple(ranks)
        return self.get(("from_fiber", tensor, ranks), f"{tensor}_{''.join(ranks)}_fiber")

    def fiber(self, tensor: str, rank: str) -> str:
        """The current fiber of ``tensor`` whose rank is ``rank`` (``a_k``)."""
        return self.get(("fiber", tensor, rank), f"{tensor.lower()}_{rank.lower()}")

    def leaf(self, tensor: str, is_output: bool) -> str:
        """The value of an input (``a_val``) or the payload reference of the output (``z_ref``)."""
        suffix = "ref" if is_output else "val"
        return self.get(("leaf", tensor, is_output), f"{tensor.lower()}_{suffix}")

    def coord(self, rank: str) -> str:
        """The loop variable holding ``rank``'s coordinate (``m0``)."""
        return self.get(("coord", rank), rank.lower())

    def pos(self, rank: str) -> str:
        """The variable holding ``rank``'s position (``m0_pos``)."""
        return self.get(("pos", rank), f"{rank.lower()}_pos")

    def index(self, rank: str) -> str:
        """The enumeration index of a merge-path share rank (``mk1_index``)."""
        return self.get(("index", rank), f"{rank.lower()}_index")

    def shape(self, rank: str) -> str:
        return self.get(("shape", rank), f"SHAPE_{rank}")

    def step(self, rank: str) -> str:
        """The tile width of an ``nway_shape`` split's upper rank."""
        return self.get(("step", rank), f"STEP_{rank}")

    def param(self, name: str) -> str:
        return self.get(("param", name), name)

    def scalar(self, name: str) -> str:
        return self.get(("scalar", name), name)

    def merge_path(self, source: str) -> tuple[str, str]:
        """The share sizes and share ids of the merge-path split of rank ``source``."""
        return (
            self.get(("mp_sizes", source), "mp_sizes"),
            self.get(("mp_share_ids", source), "mp_share_ids"),
        )
