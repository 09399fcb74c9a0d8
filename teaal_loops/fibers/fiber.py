"""A fiber: sorted coordinates with one payload each (a boxed value or a fiber below it).

This is the subset of fibertree's ``Fiber`` that the generated HiFiber uses, with the same
names, signatures and semantics, so one program text runs on both:

* iteration yields ``(coord, payload)`` for every *non-empty* element (an empty fiber or a
  value equal to the default, 0, is skipped: fibertree treats zeros as absent);
* ``a & b`` (intersection), ``a | b`` (union, payloads ``("AB"|"A"|"B", pa, pb)``) and
  ``z << a`` (populate ``z`` at ``a``'s coordinates, removing elements the body left empty);
* ``getPayload`` / ``getPayloadRef`` (read / create-on-demand);
* the splits (``splitUniform``, ``splitNonUniform``, ``splitEqual``, ``splitUnEqual``) and
  ``flattenRanks`` / ``mergeRanks``, including fibertree's *active ranges*, which decide the
  coordinate of the first partition of a position-based split (their algorithms are in
  :mod:`teaal_loops.fibers.reshape`).

Unlike fibertree, operations never deep-copy: split and merged fibers share the payloads of
their source (the generated programs only ever mutate the output tensor they create), and
intersections of two stored fibers search the longer one instead of walking it, so a sparse
row against a dense vector costs the row's length, not the vector's.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from teaal_loops.fibers import payload as _payload_module
from teaal_loops.fibers import reshape as _reshape
from teaal_loops.fibers.coords import Coord, Elem, is_empty_payload, zero_like
from teaal_loops.fibers.payload import Payload


class Fiber:
    """One fiber of a fibertree (see the module docstring)."""

    __slots__ = ("coords", "payloads", "_active", "_default", "_shapes", "_clean")

    def __init__(
        self,
        coords: Sequence[Coord] | None = None,
        payloads: Sequence[Any] | None = None,
        default: Any = 0,
        shape: Any = None,
        active_range: tuple[Any, Any] | None = None,
    ) -> None:
        if coords is None:
            payloads = [] if payloads is None else payloads
            coords = list(range(len(payloads)))
        elif payloads is None:
            payloads = [None] * len(coords)
        if len(coords) != len(payloads):
            raise ValueError("Coordinates and payloads must be same length")
        self.coords: list[Coord] = list(coords)
        self.payloads: list[Any] = [Payload.maybe_box(p) for p in payloads]
        for left, right in zip(self.coords, self.coords[1:], strict=False):
            if not left < right:
                raise ValueError(f"fiber coordinates must be strictly increasing: {self.coords}")
        self.setActive(active_range)
        self._default = Payload.get(default)
        # Shapes of this rank and of every rank below it (fibertree keeps these on the owning
        # ranks of a tensor); None where unknown. Its length tells leaf from non-leaf fibers.
        self._shapes: tuple[Any, ...] | None = None if shape is None else (shape,)
        # True while no stored payload is empty (known at construction; dropped by anything
        # that hands out references for writing). Lets splits slice and iteration skip checks.
        self._clean = not any(is_empty_payload(p, self._default) for p in self.payloads)

    @classmethod
    def _make(
        cls,
        coords: list[Coord],
        payloads: list[Any],
        *,
        active: tuple[Any, Any] | None,
        default: Any = 0,
        shapes: tuple[Any, ...] | None = None,
        clean: bool = False,
    ) -> Fiber:
        """Internal constructor: trusts its (already boxed, sorted) lists."""
        f = cls.__new__(cls)
        f.coords = coords
        f.payloads = payloads
        f._active = active
        f._default = default
        f._shapes = shapes
        f._clean = clean
        return f

    # ---- attributes ------------------------------------------------------------------------

    def getCoords(self) -> list[Coord]:  # noqa: N802 - fibertree's names throughout
        return list(self.coords)

    def getPayloads(self) -> list[Any]:  # noqa: N802
        return list(self.payloads)

    def __len__(self) -> int:
        """Number of stored elements (empty ones included, as in fibertree)."""
        return len(self.coords)

    def isLazy(self) -> bool:  # noqa: N802
        return False

    def isEmpty(self) -> bool:  # noqa: N802
        if self._clean:
            return not self.coords
        default = self._default
        return all(is_empty_payload(p, default) for p in self.payloads)

    def setActive(self, active_range: tuple[Any, Any] | None) -> None:  # noqa: N802
        if active_range is not None:
            assert isinstance(active_range, tuple) and len(active_range) == 2
        self._active = active_range

    def getActive(self) -> tuple[Any, Any]:  # noqa: N802
        """The active coordinate range; without one, ``[0, shape)`` (estimated if unknown)."""
        if self._active is not None:
            return self._active
        shape = self._shapes[0] if self._shapes else None
        if not shape:
            shape = self._estimate_shape()
        return (zero_like(shape), shape)

    def _estimate_shape(self) -> Any:
        if not self.coords:
            return 0
        last = self.coords[-1]
        if isinstance(last, tuple):
            return tuple(c + 1 for c in last)
        return last + 1

    def _is_leaf(self) -> bool:
        if self._shapes is not None:
            return len(self._shapes) == 1
        return not (self.payloads and isinstance(self.payloads[0], Fiber))

    def getDefault(self) -> Any:  # noqa: N802
        """The default payload: the class ``Fiber`` above the leaves, else the value (0)."""
        return self._default if self._is_leaf() else Fiber

    def _createDefault(self) -> Any:  # noqa: N802 - fibertree's (internal) name
        """A fresh default payload for an element of this fiber (not inserted)."""
        if self._is_leaf():
            return Payload(self._default)
        child = Fiber._make([], [], active=None, default=self._default)
        if self._shapes is not None:
            child._shapes = self._shapes[1:]
        elif self.payloads:
            first = self.payloads[0]
            child._default = first._default
            child._shapes = first._shapes
        return child

    # ---- iteration ---------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Elem]:
        if self._clean:
            yield from zip(self.coords, self.payloads, strict=True)
            return
        default = self._default
        for c, p in zip(self.coords, self.payloads, strict=True):
            if isinstance(p, Fiber):
                if p.isEmpty():
                    continue
            elif Payload.get(p) == default:
                continue
            yield c, p

    def iterActive(self) -> Iterator[Elem]:  # noqa: N802
        """Non-empty elements inside the active range."""
        start, end = self.getActive()
        for c, p in self:
            if c >= end:
                break
            if c >= start:
                yield c, p

    # ---- point access ------------------------------------------------------------------------

    def _find(self, coord: Coord) -> tuple[int, bool]:
        i = bisect.bisect_left(self.coords, coord)
        return i, i < len(self.coords) and self.coords[i] == coord

    def getPayload(  # noqa: N802
        self, *coords: Coord, default: Any = None, allocate: bool = True
    ) -> Any:
        """The payload at a point; a fresh default (not inserted) where there is none."""
        assert default is None or not allocate
        i, found = self._find(coords[0])
        const_used = False
        if found:
            payload = self.payloads[i]
        elif allocate:
            payload = self._createDefault()
            const_used = not isinstance(payload, Fiber)
        else:
            payload = Payload.maybe_box(default)
            const_used = True
        if not const_used and len(coords) > 1:
            assert isinstance(payload, Fiber), "getPayload too many coordinates"
            return payload.getPayload(*coords[1:], default=default, allocate=allocate)
        return payload

    def getPayloadRef(self, *coords: Coord) -> Any:  # noqa: N802
        """A mutable reference to the payload at a point, inserting a default if absent."""
        self._clean = False  # the caller may empty the payload it gets
        i, found = self._find(coords[0])
        if found:
            payload = self.payloads[i]
        else:
            payload = self._createDefault()
            self.coords.insert(i, coords[0])
            self.payloads.insert(i, payload)
        if len(coords) > 1:
            assert isinstance(payload, Fiber), "Too many coordinates"
            return payload.getPayloadRef(*coords[1:])
        return payload

    # ---- merge operators ---------------------------------------------------------------------

    def __and__(self, other: Any) -> LazyFiber:
        """Intersection: ``(coord, (self_payload, other_payload))`` where both are non-empty."""
        return LazyFiber(lambda: _intersect(self, other), self.getActive())

    def __or__(self, other: Any) -> LazyFiber:
        """Union: ``(coord, (mask, self_payload, other_payload))``; a missing side is a default."""
        return LazyFiber(lambda: _union(self, other), self.getActive())

    def __lshift__(self, other: Any) -> LazyFiber:
        """Populate: for each element of ``other``, ``(coord, (self_ref, other_payload))``."""
        self.setActive(other.getActive())
        return LazyFiber(lambda: _populate(self, other), other.getActive())

    # ---- splits ------------------------------------------------------------------------------

    def splitUniform(self, step: int, depth: int = 0) -> Fiber:  # noqa: N802
        """Split in coordinate space: partitions start at multiples of ``step``."""
        _reshape.check_int("step", step)
        return _reshape.split_generic(self, lambda f: _reshape.uniform_parts(f, step), depth)

    def splitNonUniform(self, splits: Any, depth: int = 0) -> Fiber:  # noqa: N802
        """Split in coordinate space at the given starting coordinates (or a fiber's)."""
        if isinstance(splits, (Fiber, LazyFiber)):
            splits = splits.getCoords()
        splits = list(splits)
        for s in splits:
            # fibertree asserts integer split points: tuple coordinates cannot be split here
            if not isinstance(s, int):
                raise AssertionError(f"splitNonUniform needs integer split points, got {s!r}")
        return _reshape.split_generic(self, lambda f: _reshape.nonuniform_parts(f, splits), depth)

    def splitEqual(self, step: int, depth: int = 0) -> Fiber:  # noqa: N802
        """Split in position space: ``step`` non-empty elements per partition."""
        _reshape.check_int("step", step)
        return _reshape.split_generic(self, lambda f: _reshape.equal_parts(f, step), depth)

    def splitUnEqual(self, sizes: Sequence[int], depth: int = 0) -> Fiber:  # noqa: N802
        """Split in position space into partitions of the given sizes (rest in the last)."""
        sizes = list(sizes)
        return _reshape.split_generic(self, lambda f: _reshape.unequal_parts(f, sizes), depth)

    # ---- flatten and merge -------------------------------------------------------------------

    def flattenRanks(self, depth: int = 0, levels: int = 1, style: str = "tuple") -> Fiber:  # noqa: N802
        def never(_: list[Any]) -> Any:
            raise ValueError("flattening found two payloads at one coordinate")

        return self.mergeRanks(depth=depth, levels=levels, style=style, merge_fn=never)

    def mergeRanks(  # noqa: N802
        self,
        depth: int = 0,
        levels: int = 1,
        style: str = "tuple",
        merge_fn: Callable[[list[Any]], Any] | None = None,
    ) -> Fiber:
        """Merge ``levels`` ranks below ``depth`` into one; coinciding payloads are combined
        with ``merge_fn`` (default: their sum), coinciding fibers by union."""
        if merge_fn is None:

            def merge_fn(ps: list[Any]) -> Any:
                return sum(ps)

        fn = merge_fn
        return _reshape.at_depth(self, depth, lambda f: _reshape.merge_helper(f, levels, style, fn))

    # ---- comparison and display ------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        """Equal non-empty contents (explicit zeros do not make fibers differ)."""
        if not isinstance(other, Fiber):
            return False
        for _, (mask, ps, po) in self | other:
            if mask != "AB" or ps != po:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        pairs = zip(self.coords, self.payloads, strict=True)
        body = ", ".join(f"({c!r} -> {p!r})" for c, p in pairs)
        return f"F/[{body}]"


_payload_module._FIBER = (Fiber,)


class LazyFiber:
    """The result of ``&``, ``|`` and ``<<``: iterable once per ``for``, composable again."""

    __slots__ = ("_make_iter", "_active")

    def __init__(self, make_iter: Callable[[], Iterator[Elem]], active: tuple[Any, Any]) -> None:
        self._make_iter = make_iter
        self._active = active

    def __iter__(self) -> Iterator[Elem]:
        return self._make_iter()

    def isLazy(self) -> bool:  # noqa: N802
        return True

    def getActive(self) -> tuple[Any, Any]:  # noqa: N802
        return self._active

    def getCoords(self) -> list[Coord]:  # noqa: N802
        return [c for c, _ in self]

    def __and__(self, other: Any) -> LazyFiber:
        return LazyFiber(lambda: _intersect(self, other), self.getActive())

    def __or__(self, other: Any) -> LazyFiber:
        return LazyFiber(lambda: _union(self, other), self.getActive())

    def _createDefault(self) -> Any:  # noqa: N802
        raise NotImplementedError("a default payload of a combined (lazy) fiber")


# ---- merge algorithms --------------------------------------------------------------------------


def _intersect(a: Any, b: Any) -> Iterator[Elem]:
    if isinstance(a, Fiber) and isinstance(b, Fiber):
        yield from _intersect_search(a, b)
        return
    ia, ib = iter(a), iter(b)
    ea, eb = next(ia, None), next(ib, None)
    while ea is not None and eb is not None:
        if ea[0] == eb[0]:
            yield ea[0], (ea[1], eb[1])
            ea, eb = next(ia, None), next(ib, None)
        elif ea[0] < eb[0]:
            ea = next(ia, None)
        else:
            eb = next(ib, None)


def _intersect_search(a: Fiber, b: Fiber) -> Iterator[Elem]:
    """Walk the shorter fiber and binary-search the longer (same result as a two-finger merge)."""
    a_drives = len(a.coords) <= len(b.coords)
    driver, other = (a, b) if a_drives else (b, a)
    coords, payloads, default = other.coords, other.payloads, other._default
    lo, n = 0, len(coords)
    for c, p in driver:
        lo = bisect.bisect_left(coords, c, lo)
        if lo == n:
            return
        if coords[lo] == c:
            q = payloads[lo]
            if not is_empty_payload(q, default):
                yield c, ((p, q) if a_drives else (q, p))


def _union(a: Any, b: Any) -> Iterator[Elem]:
    ia, ib = iter(a), iter(b)
    ea, eb = next(ia, None), next(ib, None)
    while ea is not None and eb is not None:
        if ea[0] == eb[0]:
            yield ea[0], ("AB", ea[1], eb[1])
            ea, eb = next(ia, None), next(ib, None)
        elif ea[0] < eb[0]:
            yield ea[0], ("A", ea[1], b._createDefault())
            ea = next(ia, None)
        else:
            yield eb[0], ("B", a._createDefault(), eb[1])
            eb = next(ib, None)
    while ea is not None:
        yield ea[0], ("A", ea[1], b._createDefault())
        ea = next(ia, None)
    while eb is not None:
        yield eb[0], ("B", a._createDefault(), eb[1])
        eb = next(ib, None)


def _populate(z: Fiber, other: Any) -> Iterator[Elem]:
    """fibertree's ``<<``: find or create ``z``'s element at each of ``other``'s coordinates;
    after the loop body, drop it again if it is a new fiber left empty or a value equal to the
    default (fibertree's exact rule)."""
    pos = 0
    default = z._default
    z._clean = False  # the loop body writes through the references it gets
    for c, p in other:
        pos = bisect.bisect_left(z.coords, c, pos)
        if pos < len(z.coords) and z.coords[pos] == c:
            ref, created = z.payloads[pos], False
        else:
            ref, created = z._createDefault(), True
            z.coords.insert(pos, c)
            z.payloads.insert(pos, ref)
        yield c, (ref, p)
        is_fiber = isinstance(ref, Fiber)
        if (created and is_fiber and len(ref) == 0) or (
            not is_fiber and Payload.get(ref) == default
        ):
            i = bisect.bisect_left(z.coords, c)
            del z.coords[i]
            del z.payloads[i]
        else:
            pos += 1
