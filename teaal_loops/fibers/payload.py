"""A boxed leaf value, as in fibertree: ``z_ref += a_val * b_val`` updates the tensor in place.

fibertree boxes every leaf value of a fiber in a ``Payload`` so that a program can hold a
reference to an element's value (``z_ref``) and update it with ``+=`` or assign it with
``<<=``. Arithmetic on payloads returns new payloads; the in-place operators mutate the box.
Fibers are never boxed (``Payload(fiber)`` is the fiber itself).
"""

from __future__ import annotations

from typing import Any

# The Fiber class, registered by teaal_loops.fibers.fiber (which imports this module): fibers
# are never boxed, and looking the class up here once keeps boxing cheap.
_FIBER: tuple[type, ...] = ()


class Payload:
    """A mutable box around an immutable value (a number, or a tuple of payloads)."""

    __slots__ = ("value",)
    value: Any

    def __new__(cls, value: Any = None) -> Any:
        if isinstance(value, _FIBER):  # fibers are their own payload, as in fibertree
            return value
        return super().__new__(cls)

    def __init__(self, value: Any = None) -> None:
        self.value = value.value if isinstance(value, Payload) else value

    # ---- static helpers (fibertree's names) -------------------------------------------------

    @staticmethod
    def get(payload: Any) -> Any:
        """The boxed value, or ``payload`` itself when it is not boxed."""
        return payload.value if isinstance(payload, Payload) else payload

    @staticmethod
    def maybe_box(payload: Any) -> Any:
        if isinstance(payload, Payload) or isinstance(payload, _FIBER):
            return payload
        return Payload(payload)

    @staticmethod
    def isEmpty(payload: Any, default: Any = 0) -> bool:  # noqa: N802 - fibertree's name
        """A payload is empty when it is an empty fiber or equals the default value."""
        if isinstance(payload, _FIBER):
            fiber: Any = payload
            return bool(fiber.isEmpty())
        return bool(Payload.get(payload) == Payload.get(default))

    def v(self) -> Any:
        return self.value

    # ---- arithmetic: new payloads -----------------------------------------------------------

    def __add__(self, other: Any) -> Payload:
        return Payload(self.value + Payload.get(other))

    def __radd__(self, other: Any) -> Payload:
        return Payload(other + self.value)

    def __sub__(self, other: Any) -> Payload:
        return Payload(self.value - Payload.get(other))

    def __rsub__(self, other: Any) -> Payload:
        return Payload(other - self.value)

    def __mul__(self, other: Any) -> Payload:
        return Payload(self.value * Payload.get(other))

    def __rmul__(self, other: Any) -> Payload:
        return Payload(other * self.value)

    def __truediv__(self, other: Any) -> Payload:
        return Payload(self.value / Payload.get(other))

    # ---- in place: update the box ---------------------------------------------------------

    def __iadd__(self, other: Any) -> Payload:
        self.value = self.value + Payload.get(other)
        return self

    def __isub__(self, other: Any) -> Payload:
        self.value = self.value - Payload.get(other)
        return self

    def __imul__(self, other: Any) -> Payload:
        self.value = self.value * Payload.get(other)
        return self

    def __ilshift__(self, other: Any) -> Payload:
        """``ref <<= value``: overwrite the boxed value (plain ``=`` would rebind the name)."""
        self.value = Payload.get(other)
        return self

    # ---- comparisons and conversions -------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        return bool(self.value == Payload.get(other))

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __lt__(self, other: Any) -> bool:
        return bool(self.value < Payload.get(other))

    def __le__(self, other: Any) -> bool:
        return bool(self.value <= Payload.get(other))

    def __gt__(self, other: Any) -> bool:
        return bool(self.value > Payload.get(other))

    def __ge__(self, other: Any) -> bool:
        return bool(self.value >= Payload.get(other))

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __bool__(self) -> bool:
        return bool(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def __float__(self) -> float:
        return float(self.value)

    def __iter__(self) -> Any:
        return iter(self.value)

    def __repr__(self) -> str:
        return f"<{self.value!r}>"
