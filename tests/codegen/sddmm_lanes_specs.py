"""SDDMM specs with the summed rank's K0 in space (teaal_loops/ir/dense.py), shared by the CPU
tests of the lanes kernels: thread-mapped (S threads a worker) and group-mapped (S threads
between the worker and its G lanes), each with its sizes as parameters; and the same with K
split twice (``*_runs``: K1 in space, each thread summing runs of R neighbouring k)."""

from __future__ import annotations

from pathlib import Path

from teaal_loops.ir.model import Schedule
from teaal_loops.lowering import lower
from teaal_loops.spec import load_spec_string

REPO = Path(__file__).resolve().parents[2]
LANES_SPEC = REPO / "specs" / "sddmm" / "lanes_over_k.yaml"
RUNS_SPEC = REPO / "specs" / "sddmm" / "lanes_over_k_runs.yaml"

_HEAD = """\
einsum:
  declaration:
    A: [M, K]
    B: [K, N]
    C: [M, N]
    Z: [M, N]
  expressions:
    - Z[m, n] = C[m, n] * A[m, k] * B[k, n]
mapping:
  partitioning:
    Z:
"""

# kind -> (partitioning lines, loop order, space, time)
MAPPINGS = {
    # T rows a tile (M1 in time: a worker loops over rows), S threads sum each atom's K
    "thread_mapped": (
        ["M: [uniform_shape(T)]", "K: [uniform_shape(S)]"],
        "M1, M0, N, K1, K0", "M0, K0", "M1, N, K1",
    ),
    # one row a group of G lanes; the loop order puts N0 before K0 (the space order is not the
    # loop order's)
    "group_mapped": (
        ["N: [uniform_occupancy(C.G)]", "K: [uniform_shape(S)]"],
        "M, N1, N0, K1, K0", "M, K0, N0", "N1, K1",
    ),
    # chunks of W nonzeros (work-oriented), S threads a chunk summing each atom's K
    "work_oriented": (
        ["(M, N): [flatten()]", "MN: [uniform_occupancy(C.W)]", "K: [uniform_shape(S)]"],
        "MN1, MN0, K1, K0", "MN1, K0", "MN0, K1",
    ),
    "work_oriented_runs": (
        ["(M, N): [flatten()]", "MN: [uniform_occupancy(C.W)]",
         "K: [uniform_shape(P), uniform_shape(R)]"],
        "MN1, MN0, K2, K1, K0", "MN1, K1", "MN0, K2, K0",
    ),
    # K split twice: P / R threads (K1) sum each atom's runs of R neighbouring k
    "thread_mapped_runs": (
        ["M: [uniform_shape(T)]", "K: [uniform_shape(P), uniform_shape(R)]"],
        "M1, M0, N, K2, K1, K0", "M0, K1", "M1, N, K2, K0",
    ),
    "group_mapped_runs": (
        ["N: [uniform_occupancy(C.G)]", "K: [uniform_shape(P), uniform_shape(R)]"],
        "M, N1, N0, K2, K1, K0", "M, K1, N0", "N1, K2, K0",
    ),
}


def lanes_spec_text(kind: str, *, split: str = "uniform_shape(S)", space: str | None = None
                    ) -> str:
    """The spec of ``kind`` (``split``: K's partitioning; ``space``: another space list)."""
    parts, order, default_space, time = MAPPINGS[kind]
    parts = [p.replace("uniform_shape(S)", split) for p in parts]
    return _HEAD + "".join(f"      {p}\n" for p in parts) + (
        f"  loop-order:\n    Z: [{order}]\n"
        f"  spacetime:\n    Z:\n      space: [{space or default_space}]\n      time: [{time}]\n"
    )


def lanes_schedule(kind: str, params: dict[str, int] | None = None) -> Schedule:
    """``kind``'s lanes spec lowered with ``params`` (S is compiled in: bind it here)."""
    return lower(load_spec_string(lanes_spec_text(kind), source=f"lanes_{kind}.yaml"),
                 params=params or {})
