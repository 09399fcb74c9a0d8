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
  coordinate of the first partition of a position-based split.

Unlike fibertree, operations never deep-copy: split and merged fibers share the payloads of
their source (the generated programs only ever mutate the output tensor they create), and
intersections of two stored fibers search the longer one instead of walking it, so a sparse
row against a dense vector costs the row's length, not the vector's.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from teaal_loops.fibers import payload as _payload_module
from teaal_loops.fibers.payload import Payload

Coord = Any  # an int, or a tuple of ints for a flattened rank
Elem = tuple[Coord, Any]
Part = tuple[Coord, list[Coord], list[Any], tuple[Any, Any]]  # coord, coords, payloads, active


def _is_empty(payload: Any, default: Any) -> bool:
    if isinstance(payload, Fiber):
        return payload.isEmpty()
    return bool(Payload.get(payload) == default)


def _inf_like(coord: Coord) -> Any:
    """fibertree's ``_transCoord(coord, lambda c: inf)``: +inf of the coordinate's shape."""
    if isinstance(coord, tuple):
        return tuple(_inf_like(c) for c in coord)
    return float("inf")


def _zero_like(coord: Coord) -> Any:
    if isinstance(coord, tuple):
        return tuple(_zero_like(c) for c in coord)
    return 0


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
        self._clean = not any(_is_empty(p, self._default) for p in self.payloads)

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
        return all(_is_empty(p, default) for p in self.payloads)

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
        return (_zero_like(shape), shape)

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
        _check_int("step", step)
        return _split_generic(self, lambda f: _uniform_parts(f, step), depth)

    def splitNonUniform(self, splits: Any, depth: int = 0) -> Fiber:  # noqa: N802
        """Split in coordinate space at the given starting coordinates (or a fiber's)."""
        if isinstance(splits, (Fiber, LazyFiber)):
            splits = splits.getCoords()
        splits = list(splits)
        for s in splits:
            # fibertree asserts integer split points: tuple coordinates cannot be split here
            if not isinstance(s, int):
                raise AssertionError(f"splitNonUniform needs integer split points, got {s!r}")
        return _split_generic(self, lambda f: _nonuniform_parts(f, splits), depth)

    def splitEqual(self, step: int, depth: int = 0) -> Fiber:  # noqa: N802
        """Split in position space: ``step`` non-empty elements per partition."""
        _check_int("step", step)
        return _split_generic(self, lambda f: _equal_parts(f, step), depth)

    def splitUnEqual(self, sizes: Sequence[int], depth: int = 0) -> Fiber:  # noqa: N802
        """Split in position space into partitions of the given sizes (rest in the last)."""
        sizes = list(sizes)
        return _split_generic(self, lambda f: _unequal_parts(f, sizes), depth)

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
        return _at_depth(self, depth, lambda f: _merge_helper(f, levels, style, fn))

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
            if not _is_empty(q, default):
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


# ---- splitting -----------------------------------------------------------------------------------


def _check_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _uniform_parts(f: Fiber, step: int) -> list[Part]:
    if not f.coords:
        return []
    start, end = f.getActive()
    parts: list[Part] = []
    for c, p in f:
        if c < start:
            continue
        if c >= end:
            break
        part = c // step * step
        if not parts or parts[-1][0] != part:
            parts.append((part, [], [], (max(part, start), min(part + step, end))))
        parts[-1][1].append(c)
        parts[-1][2].append(p)
    return parts


def _nonuniform_parts(f: Fiber, splits: list[Coord]) -> list[Part]:
    """fibertree's ``_splitNonUniform_iter`` without halos: element ``c`` goes to the last
    split ``s <= c``; elements before the first split or outside the active range are dropped;
    only non-empty elements and partitions are kept. (Found by binary search and slicing, so a
    follower as long as a dense vector costs its partitions, not an element-by-element walk.)"""
    if not f.coords or not splits:
        return []
    start, end = f.getActive()
    coords, payloads = f.coords, f.payloads
    bounds = list(splits) + [_inf_like(coords[0])]
    first = bisect.bisect_left(coords, start)
    last = bisect.bisect_left(coords, end, first)
    parts: list[Part] = []
    lo = first
    for i in range(len(splits)):
        b0, b1 = bounds[i], bounds[i + 1]
        if b1 <= start:
            continue
        if b0 >= end:
            break
        lo = bisect.bisect_left(coords, b0, lo, last)
        hi = bisect.bisect_left(coords, b1, lo, last)
        if lo == hi:
            continue
        cs, ps = coords[lo:hi], payloads[lo:hi]
        if not f._clean:
            keep = [j for j, p in enumerate(ps) if not _is_empty(p, f._default)]
            cs, ps = [cs[j] for j in keep], [ps[j] for j in keep]
        if cs:
            parts.append((b0, cs, ps, (max(b0, start), min(b1, end))))
        lo = hi
    return parts


def _equal_parts(f: Fiber, step: int) -> list[Part]:
    splits: list[Coord] = []
    for i, (c, _) in enumerate(f.iterActive()):
        if i == 0:
            splits.append(f.getActive()[0])
        elif i % step == 0:
            splits.append(c)
    return _nonuniform_parts(f, splits)


def _unequal_parts(f: Fiber, sizes: list[int]) -> list[Part]:
    splits: list[Coord] = []
    j = 0
    base = 0
    for i, (c, _) in enumerate(f.iterActive()):
        if j == len(sizes):
            break
        if i == 0:
            splits.append(f.getActive()[0])
        elif i - base == sizes[j]:
            base = i
            j += 1
            splits.append(c)
    return _nonuniform_parts(f, splits)


def _split_fiber(f: Fiber, parts: Iterable[Part]) -> Fiber:
    upper = Fiber._make([], [], active=f.getActive(), default=f._default, clean=True)
    if f._shapes is not None:
        upper._shapes = (f._shapes[0],) + f._shapes
    for part, cs, ps, active in parts:
        lower = Fiber._make(
            cs, ps, active=active, default=f._default, shapes=f._shapes, clean=f._clean
        )
        upper.coords.append(part)
        upper.payloads.append(lower)
    return upper


def _split_generic(f: Fiber, parts_of: Callable[[Fiber], list[Part]], depth: int) -> Fiber:
    return _at_depth(f, depth, lambda g: _split_fiber(g, parts_of(g)))


def _at_depth(f: Fiber, depth: int, fn: Callable[[Fiber], Fiber]) -> Fiber:
    """Apply ``fn`` to every fiber ``depth`` levels below ``f``; copy the levels above."""
    if depth == 0:
        return fn(f)
    payloads = [_at_depth(p, depth - 1, fn) if isinstance(p, Fiber) else p for p in f.payloads]
    return Fiber._make(list(f.coords), payloads, active=f._active, default=f._default)


# ---- flattening and merging ----------------------------------------------------------------------


def _flatten_coord(c1: Coord, c0: Coord, style: str, low_shape: Any) -> Coord:
    if style == "tuple":
        t1 = c1 if isinstance(c1, tuple) else (c1,)
        t0 = c0 if isinstance(c0, tuple) else (c0,)
        return t1 + t0
    if style == "pair":
        return (c1, c0)
    if style == "absolute":
        return c0
    if style == "relative":
        return c1 + c0
    if style == "linear":
        assert low_shape is not None, "linear flattening needs the lower rank's shape"
        return c1 * low_shape + c0
    raise ValueError(
        "Supported coordinate styles are: tuple, pair, absolute, relative, and linear. "
        f"Got: {style}"
    )


def _merge_helper(f: Fiber, levels: int, style: str, merge_fn: Callable[[list[Any]], Any]) -> Fiber:
    """fibertree's ``_mergeRanksHelper``: the top ``levels + 1`` ranks of ``f`` become one."""
    if levels == 1 or not f.coords:
        cur = f.payloads
    else:
        cur = [_merge_helper(p, levels - 1, style, merge_fn) for p in f.payloads]
    coords: list[Coord] = []
    groups: list[list[Any]] = []
    range_start: Any = None
    range_end: Any = None
    default: Any = 0
    low_shapes: tuple[Any, ...] | None = None
    for i, (c1, p1) in enumerate(zip(f.coords, cur, strict=True)):
        if not isinstance(p1, Fiber):
            raise ValueError("mergeRanks: not enough ranks below to merge")
        p_start, p_end = p1.getActive()
        if i == 0:
            range_start, range_end = p_start, p_end
        else:
            range_start, range_end = min(range_start, p_start), max(range_end, p_end)
        default = p1._default
        low_shapes = p1._shapes
        low_shape = p1._shapes[0] if p1._shapes else None
        for c0, p0 in p1:
            new = _flatten_coord(c1, c0, style, low_shape)
            j = bisect.bisect_left(coords, new)
            if j < len(coords) and coords[j] == new:
                groups[j].append(p0)
            else:
                coords.insert(j, new)
                groups.insert(j, [p0])
    payloads = [_merge_payloads(g, merge_fn) for g in groups]
    if range_start is None:
        range_start, range_end = 0, float("inf")
    own = f.getActive()
    if style in ("tuple", "pair"):
        active: tuple[Any, Any] = ((own[0], range_start), (own[1], range_end))
    elif style in ("relative", "absolute"):
        active = own
    else:
        active = (0, float("inf"))
    return Fiber._make(coords, payloads, active=active, default=default, shapes=low_shapes)


def _merge_payloads(group: list[Any], merge_fn: Callable[[list[Any]], Any]) -> Any:
    if len(group) == 1:
        return group[0]
    if not isinstance(group[0], Fiber):
        return Payload.maybe_box(merge_fn(group))
    merged: dict[Coord, list[Any]] = {}
    for fiber in group:
        for c, p in fiber:
            merged.setdefault(c, []).append(p)
    coords = sorted(merged)
    first = group[0]
    return Fiber._make(
        coords,
        [_merge_payloads(merged[c], merge_fn) for c in coords],
        active=first.getActive(),
        default=first._default,
        shapes=first._shapes,
    )
