"""The built-in fibers against real fibertree, operation by operation (skipped without it).

Each scenario runs the same code on both engines and compares the complete structure: rank
ids, every stored coordinate and payload, and every fiber's active range (which decides the
coordinates of position-based splits), plus any exception.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

import teaal_loops.fibers as builtin

fibertree = pytest.importorskip("fibertree", reason="fibertree is not installed (optional)")
ENGINES = {
    "fibertree": SimpleNamespace(
        Tensor=fibertree.Tensor, Fiber=fibertree.Fiber, Payload=fibertree.Payload
    ),
    "builtin": SimpleNamespace(Tensor=builtin.Tensor, Fiber=builtin.Fiber, Payload=builtin.Payload),
}


def dump(p: Any, eng: Any) -> Any:
    if isinstance(p, eng.Fiber):
        return (
            "F",
            p.getActive(),
            [(c, dump(q, eng)) for c, q in zip(p.coords, p.payloads, strict=True)],
        )
    return eng.Payload.get(p)


def build(eng: Any, dense: Any, shape: list[int]) -> Any:
    def rec(x: Any, d: int) -> Any:
        if d == len(shape) - 1:
            cs = [i for i, v in enumerate(x) if v != 0]
            return eng.Fiber(cs, [x[i] for i in cs], active_range=(0, shape[d]))
        kids = [(i, rec(sub, d + 1)) for i, sub in enumerate(x)]
        kids = [(i, f) for i, f in kids if f.coords]
        return eng.Fiber([i for i, _ in kids], [f for _, f in kids], active_range=(0, shape[d]))

    return rec(dense, 0)


def scenario(eng: Any, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    shape = [rng.randint(1, 9), rng.randint(1, 9)]
    density = rng.choice([0.2, 0.5, 0.9])
    dense = [
        [rng.randint(1, 9) if rng.random() < density else 0 for _ in range(shape[1])]
        if rng.random() < 0.8
        else [0] * shape[1]
        for _ in range(shape[0])
    ]
    a = eng.Tensor.fromFiber(rank_ids=["M", "K"], fiber=build(eng, dense, shape), shape=shape)
    s1, s2 = rng.randint(1, 5), rng.randint(1, 5)
    x = [rng.randint(0, 3) for _ in range(shape[1])]
    b = eng.Tensor.fromFiber(rank_ids=["K"], fiber=build(eng, x, [shape[1]]), shape=[shape[1]])
    out: dict[str, Any] = {}

    def tdump(t: Any) -> Any:
        return (t.getRankIds(), dump(t.getRoot(), eng))

    def flat() -> Any:
        f = a.flattenRanks(depth=0, levels=1, coord_style="tuple")
        f.setRankIds(rank_ids=["MK"])
        return f

    def spmv() -> Any:
        z = eng.Tensor(rank_ids=["M"], shape=[shape[0]])
        log = []
        for m, (z_ref, a_k) in z.getRoot() << a.getRoot():
            for k_pos, (k, (a_val, b_val)) in enumerate(a_k & b.getRoot()):
                z_ref += a_val * b_val
                log.append((m, k_pos, k))
        return tdump(z), log

    def group() -> Any:
        z = eng.Tensor(rank_ids=["M"], shape=[shape[0]])
        log = []
        b_k = b.getRoot()
        for m, (z_ref, a_k) in z.getRoot() << a.getRoot():
            lead = eng.Tensor.fromFiber(rank_ids=["K"], fiber=a_k).splitEqual(s2)
            lead.setRankIds(rank_ids=["K1", "K0"])
            follow = eng.Tensor.fromFiber(rank_ids=["K"], fiber=b_k).splitNonUniform(lead.getRoot())
            follow.setRankIds(rank_ids=["K1", "K0"])
            for k1_pos, (k1, (a_k0, b_k0)) in enumerate(lead.getRoot() & follow.getRoot()):
                for k0_pos, (k0, (a_val, b_val)) in enumerate(a_k0 & b_k0):
                    z_ref += a_val * b_val
                    log.append((m, k1_pos, k1, k0_pos, k0))
        return tdump(z), log

    def union() -> Any:
        c = eng.Tensor.fromFiber(
            rank_ids=["M"],
            fiber=build(eng, [rng.randint(0, 2) for _ in range(shape[0])], [shape[0]]),
        )
        z = eng.Tensor(rank_ids=["M"], shape=[shape[0]])
        log = []
        for m, (ref, (mask, av, cv)) in z.getRoot() << (b.getRoot() | c.getRoot()):
            ref <<= av - cv
            log.append((m, mask, eng.Payload.get(av), eng.Payload.get(cv)))
        return tdump(z), log

    cases = {
        "uniform": lambda: tdump(a.splitUniform(s1, depth=0).splitUniform(s2, depth=1)),
        "uniform_merge": lambda: tdump(
            a.splitUniform(s1, depth=0)
            .splitUniform(s2, depth=1)
            .mergeRanks(depth=0, levels=2, coord_style="absolute")
        ),
        "uniform1": lambda: tdump(a.splitUniform(s1, depth=1)),
        "equal0": lambda: tdump(a.splitEqual(s2, depth=0)),
        "equal1": lambda: tdump(a.splitEqual(s2, depth=1)),
        "flat": lambda: tdump(flat()),
        "flat_equal": lambda: tdump(flat().splitEqual(s1)),
        "flat_unequal": lambda: tdump(flat().splitUnEqual([rng.randint(1, 4) for _ in range(3)])),
        "nonuniform": lambda: tdump(
            a.splitNonUniform(sorted({rng.randint(0, shape[1]) for _ in range(3)}), depth=1)
        ),
        "swizzle": lambda: tdump(a.swizzleRanks(["K", "M"])),
        "swizzle_split": lambda: tdump(
            a.splitUniform(s1).setRankIds(["M1", "M0", "K"]).swizzleRanks(["M1", "K", "M0"])
        ),
        "spmv": spmv,
        "group": group,
        "union": union,
    }
    for name, fn in cases.items():
        try:
            out[name] = fn()
        except Exception as err:  # both engines must fail alike
            out[name] = ("raised", type(err).__name__)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_builtin_matches_fibertree(seed: int) -> None:
    ft = scenario(ENGINES["fibertree"], seed)
    bi = scenario(ENGINES["builtin"], seed)
    for key in ft:
        assert bi[key] == ft[key], key
