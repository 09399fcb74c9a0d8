"""The built-in fibertree subset: each operation against a direct model of its semantics."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teaal_loops.fibers import Fiber, Payload, Tensor

# A sparse vector: sorted distinct coordinates in [0, 20) with small values, zeros included
# (fibertree treats a stored zero as absent).
sparse_items = st.dictionaries(st.integers(0, 19), st.integers(0, 5), max_size=12).map(
    lambda d: sorted(d.items())
)


def fiber_of(items: list[tuple[int, int]], shape: int = 20) -> Fiber:
    return Fiber([c for c, _ in items], [v for _, v in items], active_range=(0, shape))


def nonzero(items: list[tuple[int, int]]) -> dict[int, int]:
    return {c: v for c, v in items if v != 0}


def values(pairs) -> list:
    return [(c, Payload.get(p)) for c, p in pairs]


# ---- payloads ------------------------------------------------------------------------------


def test_payload_in_place_updates_are_seen_through_the_fiber() -> None:
    f = Fiber([1, 4], [2, 3])
    ref = f.getPayloadRef(4)
    ref += 10
    ref2 = f.getPayloadRef(1)
    ref2 <<= 7
    assert values(f) == [(1, 7), (4, 13)]
    assert Payload(3) * Payload(2) == 6 and 2 - Payload(5) == -3


def test_payload_of_a_fiber_is_the_fiber() -> None:
    f = Fiber([0], [1])
    assert Payload(f) is f


# ---- iteration and point access ----------------------------------------------------------


@given(sparse_items)
def test_iteration_skips_zeros_and_empty_fibers(items) -> None:
    f = fiber_of(items)
    assert values(f) == sorted(nonzero(items).items())
    assert len(f) == len(items)  # stored elements, zeros included
    upper = Fiber([0, 1, 2], [fiber_of(items), Fiber([], []), Fiber([3], [0])])
    assert [c for c, _ in upper] == ([0] if nonzero(items) else [])


def test_get_payload_default_is_not_inserted_and_ref_is() -> None:
    f = Fiber([2], [5], active_range=(0, 10))
    assert Payload.get(f.getPayload(3)) == 0
    assert f.getCoords() == [2]
    up = Fiber([1], [Fiber([0], [1])])
    child = up.getPayload(7)
    assert isinstance(child, Fiber) and len(child) == 0 and up.getCoords() == [1]
    assert Payload.get(up.getPayload(7, 3)) == 0
    ref = up.getPayloadRef(7, 3)
    ref += 4
    assert up.getCoords() == [1, 7] and values(up.getPayload(7)) == [(3, 4)]


# ---- merge operators ---------------------------------------------------------------------


@given(sparse_items, sparse_items, sparse_items)
def test_intersection_matches_the_set_definition(a, b, c) -> None:
    fa, fb, fc = fiber_of(a), fiber_of(b), fiber_of(c)
    na, nb, nc = nonzero(a), nonzero(b), nonzero(c)
    both = sorted(set(na) & set(nb))
    got = [(k, (Payload.get(x), Payload.get(y))) for k, (x, y) in fa & fb]
    assert got == [(k, (na[k], nb[k])) for k in both]
    # a lazy operand takes the two-finger path: same result
    three = [
        (k, Payload.get(x), Payload.get(y), Payload.get(z)) for k, (x, (y, z)) in fa & (fb & fc)
    ]
    assert three == [(k, na[k], nb[k], nc[k]) for k in sorted(set(na) & set(nb) & set(nc))]


@given(sparse_items, sparse_items)
def test_union_marks_sides_and_fills_defaults(a, b) -> None:
    na, nb = nonzero(a), nonzero(b)
    got = [(k, m, Payload.get(x), Payload.get(y)) for k, (m, x, y) in fiber_of(a) | fiber_of(b)]
    expect = []
    for k in sorted(set(na) | set(nb)):
        mask = "AB" if k in na and k in nb else ("A" if k in na else "B")
        expect.append((k, mask, na.get(k, 0), nb.get(k, 0)))
    assert got == expect


def test_union_default_of_a_fiber_rank_is_an_empty_fiber() -> None:
    a = Fiber([0], [Fiber([1], [2])])
    b = Fiber([3], [Fiber([1], [4])])
    masks = {k: (m, x, y) for k, (m, x, y) in a | b}
    assert isinstance(masks[0][2], Fiber) and len(masks[0][2]) == 0
    assert isinstance(masks[3][1], Fiber) and len(masks[3][1]) == 0


@given(sparse_items, sparse_items)
def test_populate_accumulates_and_drops_what_stays_empty(z_items, b_items) -> None:
    z = fiber_of(z_items)
    b = fiber_of(b_items)
    nz, nb = nonzero(z_items), nonzero(b_items)
    for k, (ref, val) in z << b:
        if k % 3:
            ref += val  # coordinates divisible by 3 are left as they are
    expect = dict(nz)
    for k, v in nb.items():
        if k % 3:
            expect[k] = expect.get(k, 0) + v
    # zeros are removed where the body visited them, kept (but not iterated) elsewhere
    assert values(z) == sorted((k, v) for k, v in expect.items() if v != 0)
    visited_zero = [k for k in nb if k % 3 == 0 and k not in nz]
    assert not set(visited_zero) & set(z.getCoords())


def test_populate_of_a_fiber_rank_keeps_only_filled_children() -> None:
    z = Tensor(rank_ids=["M", "K"], shape=[4, 4]).getRoot()
    a = Fiber([0, 2], [Fiber([1], [3]), Fiber([0], [5])])
    for m, (z_k, a_k) in z << a:
        if m == 0:
            for _, (ref, v) in z_k << a_k:
                ref += v
    assert z.getCoords() == [0]


# ---- splits ------------------------------------------------------------------------------


@given(sparse_items, st.integers(1, 7))
def test_split_uniform_tiles_coordinate_space(items, step) -> None:
    f = fiber_of(items)
    split = f.splitUniform(step)
    na = nonzero(items)
    expect: dict[int, list[int]] = {}
    for c in sorted(na):
        expect.setdefault(c // step * step, []).append(c)
    assert [(p, [c for c, _ in lower]) for p, lower in split] == sorted(expect.items())
    for p, lower in zip(split.coords, split.payloads, strict=True):
        assert lower.getActive() == (p, min(p + step, 20))


@given(sparse_items, st.integers(1, 5))
def test_split_equal_cuts_every_step_elements_first_at_the_active_start(items, step) -> None:
    f = Fiber([c for c, _ in items], [v for _, v in items], active_range=(0, 20))
    split = f.splitEqual(step)
    cs = sorted(nonzero(items))
    chunks = [cs[i : i + step] for i in range(0, len(cs), step)]
    assert [[c for c, _ in lower] for _, lower in split] == chunks
    starts = [0] + [ch[0] for ch in chunks[1:]] if chunks else []
    assert split.getCoords() == starts


@given(sparse_items, st.lists(st.integers(0, 20), min_size=1, max_size=4, unique=True))
def test_split_non_uniform_follows_the_split_points(items, points) -> None:
    points.sort()
    f = fiber_of(items)
    split = f.splitNonUniform(points)
    expect: dict[int, list[int]] = {}
    for c in sorted(nonzero(items)):
        owners = [p for p in points if p <= c]
        if owners:  # elements before the first split point are dropped (fibertree)
            expect.setdefault(owners[-1], []).append(c)
    assert [(p, [c for c, _ in lower]) for p, lower in split] == sorted(expect.items())


def test_split_non_uniform_refuses_tuple_split_points_like_fibertree() -> None:
    f = Fiber([(0, 1), (2, 0)], [1, 2])
    with pytest.raises(AssertionError):
        f.splitNonUniform([(0, 0), (1, 0)])


def test_split_unequal_and_leader_follower() -> None:
    a = Fiber([1, 3, 4, 8, 9], [1, 1, 1, 1, 1], active_range=(0, 10))
    split = a.splitUnEqual([2, 3])
    assert [[c for c, _ in lower] for _, lower in split] == [[1, 3], [4, 8, 9]]
    b = Fiber(list(range(10)), [2] * 10, active_range=(0, 10))
    follower = b.splitNonUniform(split)  # a fiber's coordinates are the split points
    assert follower.getCoords() == [0, 4]
    assert [c for c, _ in follower.payloads[1]] == [4, 5, 6, 7, 8, 9]


def test_splits_at_depth_split_every_lower_fiber() -> None:
    t = Tensor.fromFiber(
        rank_ids=["M", "K"],
        fiber=Fiber([0, 1], [Fiber([0, 5], [1, 2]), Fiber([7], [3])]),
        shape=[2, 8],
    )
    s = t.splitUniform(4, depth=1)
    assert s.getRankIds() == ["M", "K.1", "K.0"]
    root = s.getRoot()
    assert [(m, k1.getCoords()) for m, k1 in root] == [(0, [0, 4]), (1, [4])]


# ---- flatten, merge, swizzle -------------------------------------------------------------


def matrix_tensor(rows: dict[int, list[tuple[int, int]]], shape=(6, 5)) -> Tensor:
    ms = sorted(rows)
    fibers = [
        Fiber([k for k, _ in rows[m]], [v for _, v in rows[m]], active_range=(0, shape[1]))
        for m in ms
    ]
    return Tensor.fromFiber(
        rank_ids=["M", "K"], fiber=Fiber(ms, fibers, active_range=(0, shape[0])), shape=list(shape)
    )


def test_flatten_makes_tuple_coordinates_with_a_tuple_active_range() -> None:
    t = matrix_tensor({0: [(1, 2)], 3: [(0, 4), (4, 1)]})
    flat = t.flattenRanks(depth=0, levels=1, coord_style="tuple")
    assert flat.getRankIds() == [["M", "K"]]
    root = flat.getRoot()
    assert values(root) == [((0, 1), 2), ((3, 0), 4), ((3, 4), 1)]
    assert root.getActive() == ((0, 0), (6, 5))
    flat.setRankIds(["MK"])
    chunks = flat.splitEqual(2).getRoot()
    assert chunks.getCoords() == [(0, 0), (3, 4)]


@given(st.integers(1, 5), st.integers(1, 5))
def test_merge_ranks_absolute_undoes_uniform_splits(s1, s2) -> None:
    rows = {m: [(k, m + k + 1) for k in range(5) if (m * k) % 3 != 1] for m in range(6) if m != 2}
    t = matrix_tensor(rows)
    split = t.splitUniform(s1, depth=0).splitUniform(s2, depth=1)
    merged = split.mergeRanks(depth=0, levels=2, coord_style="absolute")
    merged.setRankIds(["M", "K"])
    assert merged == t


def test_merge_ranks_sums_coinciding_values() -> None:
    f = Fiber([0, 1], [Fiber([2, 3], [1, 2]), Fiber([3], [10])])
    m = f.mergeRanks(style="absolute")
    assert values(m) == [(2, 1), (3, 12)]


dense3 = st.lists(
    st.lists(st.lists(st.integers(0, 3), min_size=3, max_size=3), min_size=2, max_size=2),
    min_size=3,
    max_size=3,
)


def tensor3(d) -> Tensor:
    def rec(x, level):
        if level == 2:
            cs = [i for i, v in enumerate(x) if v]
            return Fiber(cs, [x[i] for i in cs], active_range=(0, 3))
        kids = [(i, rec(s, level + 1)) for i, s in enumerate(x)]
        kids = [(i, f) for i, f in kids if len(f)]
        return Fiber([i for i, _ in kids], [f for _, f in kids], active_range=(0, [3, 2, 3][level]))

    return Tensor.fromFiber(rank_ids=["A", "B", "C"], fiber=rec(d, 0), shape=[3, 2, 3])


@settings(max_examples=40)
@given(dense3, st.permutations(["A", "B", "C"]))
def test_swizzle_is_a_transposition(d, order) -> None:
    t = tensor3(d)
    s = t.swizzleRanks(order)
    assert s.getRankIds() == order
    axis = {"A": 0, "B": 1, "C": 2}
    got = {}
    for c0, f1 in s.getRoot():
        for c1, f2 in f1:
            for c2, v in f2:
                got[(c0, c1, c2)] = Payload.get(v)
    expect = {}
    for i, j, k in itertools.product(range(3), range(2), range(3)):
        if d[i][j][k]:
            idx = (i, j, k)
            expect[tuple(idx[axis[r]] for r in order)] = d[i][j][k]
    assert got == expect
    assert s.swizzleRanks(["A", "B", "C"]) == t


def test_tensor_equality_ignores_explicit_zeros() -> None:
    a = Tensor.fromFiber(rank_ids=["K"], fiber=Fiber([0, 2], [1, 0]))
    b = Tensor.fromFiber(rank_ids=["K"], fiber=Fiber([0], [1]))
    c = Tensor.fromFiber(rank_ids=["K"], fiber=Fiber([0], [2]))
    assert a == b and a != c


def test_rank_zero_tensor_root_is_a_payload() -> None:
    t = Tensor(rank_ids=[])
    ref = t.getRoot()
    ref += 3
    assert Payload.get(t.getRoot()) == 3
