"""A tensor: named ranks over a fibertree (fibertree's ``Tensor``, the subset HiFiber uses)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from teaal_loops.fibers.fiber import Fiber
from teaal_loops.fibers.payload import Payload


class Tensor:
    """Rank ids (top-down), optional shapes, and a root fiber (a payload for rank 0)."""

    def __init__(
        self,
        rank_ids: Sequence[Any] | None = None,
        shape: Sequence[Any] | None = None,
        default: Any = 0,
        name: str = "",
    ) -> None:
        if rank_ids is None:
            raise ValueError("Tensor needs rank_ids")
        self._rank_ids: list[Any] = list(rank_ids)
        self._shape: list[Any] = list(shape) if shape is not None else [None] * len(rank_ids)
        if len(self._shape) != len(self._rank_ids):
            raise ValueError("shape and rank_ids must have the same length")
        self._default = default
        self._name = name
        self._root: Any
        if not self._rank_ids:
            self._root = Payload(default)
        else:
            self._root = Fiber(default=default)
            self._annotate()

    @classmethod
    def fromFiber(  # noqa: N802 - fibertree's names throughout
        cls,
        rank_ids: Sequence[Any] | None = None,
        fiber: Fiber | None = None,
        shape: Sequence[Any] | None = None,
        name: str = "",
        default: Any = 0,
    ) -> Tensor:
        if fiber is None:
            raise ValueError("Tensor.fromFiber needs a fiber")
        if rank_ids is None:
            depth = _depth(fiber)
            rank_ids = [f"R{depth - 1 - i}" for i in range(depth)]
        t = cls(rank_ids=rank_ids, shape=shape, default=default, name=name)
        t._root = fiber
        t._annotate()
        return t

    # ---- accessors -----------------------------------------------------------------------

    def getRoot(self) -> Any:  # noqa: N802
        return self._root

    def getRankIds(self) -> list[Any]:  # noqa: N802
        return list(self._rank_ids)

    def setRankIds(self, rank_ids: Sequence[Any]) -> Tensor:  # noqa: N802
        if len(rank_ids) != len(self._rank_ids):
            raise ValueError(f"setRankIds: {list(rank_ids)} for ranks {self._rank_ids}")
        self._rank_ids = list(rank_ids)
        return self

    def getShape(self) -> list[Any]:  # noqa: N802
        return list(self._shape)

    def getName(self) -> str:  # noqa: N802
        return self._name

    def setName(self, name: str) -> Tensor:  # noqa: N802
        self._name = name
        return self

    def getDepth(self) -> int:  # noqa: N802
        return len(self._rank_ids)

    def getPayload(self, *coords: Any, **kwargs: Any) -> Any:  # noqa: N802
        return self._root.getPayload(*coords, **kwargs)

    def getPayloadRef(self, *coords: Any) -> Any:  # noqa: N802
        return self._root.getPayloadRef(*coords)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor) or self._rank_ids != other._rank_ids:
            return False
        return bool(self._root == other._root)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"T({self._name}: {self._rank_ids})/{self._root!r}"

    # ---- transformations (each returns a new tensor) ---------------------------------------

    def splitUniform(self, step: int, depth: int = 0) -> Tensor:  # noqa: N802
        return self._split(depth, self._root.splitUniform(step, depth=depth))

    def splitNonUniform(self, splits: Any, depth: int = 0) -> Tensor:  # noqa: N802
        return self._split(depth, self._root.splitNonUniform(splits, depth=depth))

    def splitEqual(self, step: int, depth: int = 0) -> Tensor:  # noqa: N802
        return self._split(depth, self._root.splitEqual(step, depth=depth))

    def splitUnEqual(self, sizes: Sequence[int], depth: int = 0) -> Tensor:  # noqa: N802
        return self._split(depth, self._root.splitUnEqual(sizes, depth=depth))

    def _split(self, depth: int, root: Fiber) -> Tensor:
        """Rank ``R`` becomes ``R.1, R.0`` (fibertree's names; HiFiber renames them)."""
        ids = list(self._rank_ids)
        rid = ids[depth]
        ids[depth : depth + 1] = [f"{rid}.1", f"{rid}.0"]
        shape = list(self._shape)
        shape.insert(depth + 1, shape[depth])
        return self._derived(ids, shape, root)

    def flattenRanks(  # noqa: N802
        self, depth: int = 0, levels: int = 1, coord_style: str = "tuple"
    ) -> Tensor:
        root = self._root.flattenRanks(depth=depth, levels=levels, style=coord_style)
        ids, shape = self._flat_ids_shape(depth, levels, coord_style)
        return self._derived(ids, shape, root)

    def mergeRanks(  # noqa: N802
        self, depth: int = 0, levels: int = 1, coord_style: str = "tuple", merge_fn: Any = None
    ) -> Tensor:
        root = self._root.mergeRanks(
            depth=depth, levels=levels, style=coord_style, merge_fn=merge_fn
        )
        ids, shape = self._flat_ids_shape(depth, levels, coord_style)
        return self._derived(ids, shape, root)

    def _flat_ids_shape(self, depth: int, levels: int, style: str) -> tuple[list[Any], list[Any]]:
        ids = list(self._rank_ids)
        merged = ids[depth] if isinstance(ids[depth], list) else [ids[depth]]
        for _ in range(levels):
            nxt = ids.pop(depth + 1)
            merged = merged + (nxt if isinstance(nxt, list) else [nxt])
        ids[depth] = merged
        old = self._shape[depth : depth + levels + 1]
        if any(s is None for s in old):
            new: Any = None
        elif style == "tuple":
            new = tuple(old)
        elif style == "absolute":
            new = old[-1]
        elif style in ("relative",):
            new = old[0]
        else:
            new = None
        shape = self._shape[:depth] + [new] + self._shape[depth + levels + 1 :]
        return ids, shape

    def swizzleRanks(self, rank_ids: Sequence[Any]) -> Tensor:  # noqa: N802
        """Reorder the ranks (fibertree's algorithm: collect every stored path through the
        ranks that move, sort by the new coordinate order, rebuild; active ranges of rebuilt
        fibers are recomputed from the old fibers' ranges, as fibertree does)."""
        old_ids, new_ids = list(self._rank_ids), list(rank_ids)
        if sorted(map(str, old_ids)) != sorted(map(str, new_ids)):
            raise ValueError(f"swizzleRanks: {new_ids} is not a permutation of {old_ids}")
        if old_ids == new_ids:
            return self._derived(new_ids, list(self._shape), self._root)
        same_tail = 0
        for a, b in zip(reversed(old_ids), reversed(new_ids), strict=True):
            if a != b:
                break
            same_tail += 1
        swiz = len(new_ids) - same_tail
        guide = [old_ids.index(r) for r in new_ids]

        paths: list[tuple[tuple[Any, ...], Any]] = []
        ranges: dict[int, set[tuple[Any, Any]]] = {d: set() for d in range(len(old_ids))}

        def walk(fiber: Fiber, depth: int, prefix: tuple[Any, ...]) -> None:
            for c, p in zip(fiber.coords, fiber.payloads, strict=True):
                ranges[depth].add(fiber.getActive())
                if depth == swiz - 1:
                    paths.append((prefix + (c,), p))
                else:
                    walk(p, depth + 1, prefix + (c,))

        walk(self._root, 0, ())
        keyed = sorted(
            ((tuple(path[g] for g in guide[:swiz]), p) for path, p in paths), key=lambda e: e[0]
        )

        root = Fiber._make([], [], active=None, default=self._default)
        chain: list[Fiber] = [root]
        last: tuple[Any, ...] | None = None
        for coord, payload in keyed:
            # reuse the fibers of the common prefix with the previous path
            keep = 0
            if last is not None:
                while keep < swiz - 1 and coord[keep] == last[keep]:
                    keep += 1
            del chain[keep + 1 :]
            for d in range(keep, swiz - 1):
                child = Fiber._make([], [], active=None, default=self._default)
                chain[d].coords.append(coord[d])
                chain[d].payloads.append(child)
                chain.append(child)
            chain[swiz - 1].coords.append(coord[swiz - 1])
            chain[swiz - 1].payloads.append(payload)
            last = coord

        shape = [self._shape[g] for g in guide[:swiz]] + list(self._shape[swiz:])
        out = self._derived(new_ids, shape, root)
        old_depth_of = {rid: d for d, rid in enumerate(old_ids)}

        def reset(fiber: Fiber, depth: int) -> None:
            # only the moved ranks recorded ranges; fibertree stops below them
            rank_ranges = ranges[old_depth_of[new_ids[depth]]] if depth < swiz else set()
            if fiber.isEmpty() or not rank_ranges:
                return
            first, final = fiber.coords[0], fiber.coords[-1]
            start = min(r[0] for r in rank_ranges if r[0] <= first < r[1])
            end = max(r[1] for r in rank_ranges if r[0] <= final < r[1])
            fiber.setActive((start, end))
            if isinstance(fiber.payloads[0], Fiber):
                for p in fiber.payloads:
                    reset(p, depth + 1)

        reset(root, 0)
        return out

    # ---- helpers --------------------------------------------------------------------------

    def _derived(self, ids: list[Any], shape: list[Any], root: Any) -> Tensor:
        t = Tensor.__new__(Tensor)
        t._rank_ids = ids
        t._shape = shape
        t._default = self._default
        t._name = self._name
        t._root = root
        if ids:
            t._annotate()
        return t

    def _annotate(self) -> None:
        """Record on every fiber the shapes of its rank and the ranks below (what fibertree
        keeps on the owning ranks): it tells leaves from fibers and gives default ranges."""
        shapes = tuple(self._shape)

        def mark(fiber: Fiber, depth: int) -> None:
            mine = shapes[depth:]
            old = fiber._shapes
            if old is not None and len(old) == len(mine):
                mine = tuple(o if m is None else m for m, o in zip(mine, old, strict=True))
            fiber._shapes = mine
            if depth + 1 < len(shapes):
                for p in fiber.payloads:
                    if isinstance(p, Fiber):
                        mark(p, depth + 1)

        root = self._root
        if not isinstance(root, Fiber):
            return
        old = root._shapes
        if (
            old is not None
            and len(old) == len(shapes)
            and all(s is None or s == o for s, o in zip(shapes, old, strict=True))
        ):
            return  # already annotated alike (a fiber of another tensor): nothing to add
        mark(root, 0)


def _depth(fiber: Fiber) -> int:
    depth = 1
    while fiber.payloads and isinstance(fiber.payloads[0], Fiber):
        fiber = fiber.payloads[0]
        depth += 1
    return depth
