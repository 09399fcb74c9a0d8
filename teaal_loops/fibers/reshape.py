"""Splitting, flattening and merging fibers: fibertree's partitioning and rank reshaping.

The :class:`~teaal_loops.fibers.fiber.Fiber` methods ``splitUniform``, ``splitNonUniform``,
``splitEqual``, ``splitUnEqual``, ``flattenRanks`` and ``mergeRanks`` are thin wrappers over
these functions. Splits follow fibertree's rules, including its *active ranges*, which decide
the coordinate of the first partition of a position-based split; a split fiber shares the
payloads of its source (nothing is deep-copied).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import Any

from teaal_loops.fibers.coords import Coord, Part, inf_like, is_empty_payload, is_fiber
from teaal_loops.fibers.payload import Payload

# The Fiber class imports this module for its split and merge methods; here a fiber is
# recognised by is_fiber() and new fibers are made by the class of the fiber at hand.
Fiber = Any

# ---- splitting ------------------------------------------------------------------------------


def check_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def uniform_parts(f: Fiber, step: int) -> list[Part]:
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


def nonuniform_parts(f: Fiber, splits: list[Coord]) -> list[Part]:
    """fibertree's ``_splitNonUniform_iter`` without halos: element ``c`` goes to the last
    split ``s <= c``; elements before the first split or outside the active range are dropped;
    only non-empty elements and partitions are kept. (Found by binary search and slicing, so a
    follower as long as a dense vector costs its partitions, not an element-by-element walk.)"""
    if not f.coords or not splits:
        return []
    start, end = f.getActive()
    coords, payloads = f.coords, f.payloads
    bounds = list(splits) + [inf_like(coords[0])]
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
            keep = [j for j, p in enumerate(ps) if not is_empty_payload(p, f._default)]
            cs, ps = [cs[j] for j in keep], [ps[j] for j in keep]
        if cs:
            parts.append((b0, cs, ps, (max(b0, start), min(b1, end))))
        lo = hi
    return parts


def equal_parts(f: Fiber, step: int) -> list[Part]:
    splits: list[Coord] = []
    for i, (c, _) in enumerate(f.iterActive()):
        if i == 0:
            splits.append(f.getActive()[0])
        elif i % step == 0:
            splits.append(c)
    return nonuniform_parts(f, splits)


def unequal_parts(f: Fiber, sizes: list[int]) -> list[Part]:
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
    return nonuniform_parts(f, splits)


def split_fiber(f: Fiber, parts: Iterable[Part]) -> Fiber:
    upper = type(f)._make([], [], active=f.getActive(), default=f._default, clean=True)
    if f._shapes is not None:
        upper._shapes = (f._shapes[0],) + f._shapes
    for part, cs, ps, active in parts:
        lower = type(f)._make(
            cs, ps, active=active, default=f._default, shapes=f._shapes, clean=f._clean
        )
        upper.coords.append(part)
        upper.payloads.append(lower)
    return upper


def split_generic(f: Fiber, parts_of: Callable[[Fiber], list[Part]], depth: int) -> Fiber:
    return at_depth(f, depth, lambda g: split_fiber(g, parts_of(g)))


def at_depth(f: Fiber, depth: int, fn: Callable[[Fiber], Fiber]) -> Fiber:
    """Apply ``fn`` to every fiber ``depth`` levels below ``f``; copy the levels above."""
    if depth == 0:
        return fn(f)
    payloads = [at_depth(p, depth - 1, fn) if is_fiber(p) else p for p in f.payloads]
    return type(f)._make(list(f.coords), payloads, active=f._active, default=f._default)


# ---- flattening and merging ----------------------------------------------------------------------


def flatten_coord(c1: Coord, c0: Coord, style: str, low_shape: Any) -> Coord:
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


def merge_helper(f: Fiber, levels: int, style: str, merge_fn: Callable[[list[Any]], Any]) -> Fiber:
    """fibertree's ``_mergeRanksHelper``: the top ``levels + 1`` ranks of ``f`` become one."""
    if levels == 1 or not f.coords:
        cur = f.payloads
    else:
        cur = [merge_helper(p, levels - 1, style, merge_fn) for p in f.payloads]
    coords: list[Coord] = []
    groups: list[list[Any]] = []
    range_start: Any = None
    range_end: Any = None
    default: Any = 0
    low_shapes: tuple[Any, ...] | None = None
    for i, (c1, p1) in enumerate(zip(f.coords, cur, strict=True)):
        if not is_fiber(p1):
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
            new = flatten_coord(c1, c0, style, low_shape)
            j = bisect.bisect_left(coords, new)
            if j < len(coords) and coords[j] == new:
                groups[j].append(p0)
            else:
                coords.insert(j, new)
                groups.insert(j, [p0])
    payloads = [merge_payloads(g, merge_fn) for g in groups]
    if range_start is None:
        range_start, range_end = 0, float("inf")
    own = f.getActive()
    if style in ("tuple", "pair"):
        active: tuple[Any, Any] = ((own[0], range_start), (own[1], range_end))
    elif style in ("relative", "absolute"):
        active = own
    else:
        active = (0, float("inf"))
    return type(f)._make(coords, payloads, active=active, default=default, shapes=low_shapes)


def merge_payloads(group: list[Any], merge_fn: Callable[[list[Any]], Any]) -> Any:
    if len(group) == 1:
        return group[0]
    if not is_fiber(group[0]):
        return Payload.maybe_box(merge_fn(group))
    merged: dict[Coord, list[Any]] = {}
    for fiber in group:
        for c, p in fiber:
            merged.setdefault(c, []).append(p)
    coords = sorted(merged)
    first = group[0]
    return type(first)._make(
        coords,
        [merge_payloads(merged[c], merge_fn) for c in coords],
        active=first.getActive(),
        default=first._default,
        shapes=first._shapes,
    )
