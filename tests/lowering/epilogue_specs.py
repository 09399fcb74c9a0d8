"""Small specs with TeAAL's scalar epilogue ``Z = a * T1 + b * C`` for the CPU tests (lowering,
rendering, nvcc, emulation, simulation, check), so that they run without the shared corpus:
SpMV on each schedule, SpMM with the dense rank in space and in time, alpha or beta absent, no
addend, and a column-major addend. The product's mapping is T1's (TeAAL keys a mapping by its
einsum's output); Z has none but its rank order."""

from __future__ import annotations

from pathlib import Path

_SPMV = """
einsum:
  declaration:
    A: [M, K]
    B: [K]
    T1: [M]
    C: [M]
    Z: [M]
  expressions:
    - T1[m] = A[m, k] * B[k]
    - Z[m] = {epilogue}
mapping:
  partitioning:
    T1:
{partitioning}
  loop-order:
    T1: [{order}]
  spacetime:
    T1:
      space: [{space}]
      time: [{time}]
"""

_SPMM = """
einsum:
  declaration:
    A: [M, K]
    B: [K, N]
    T1: [M, N]
    C: [M, N]
    Z: [M, N]
  expressions:
    - T1[m, n] = A[m, k] * B[k, n]
    - Z[m, n] = {epilogue}
mapping:
  rank-order:
    C: [{c_order}]
  partitioning:
    T1:
{partitioning}
  loop-order:
    T1: [{order}]
  spacetime:
    T1:
      space: [{space}]
      time: [{time}]
"""


# name -> the same product and mapping without the epilogue (one einsum, output Z)
PLAIN: dict[str, str] = {}


def _without_epilogue(text: str) -> str:
    """The product alone: T1 renamed Z, the epilogue einsum and C dropped."""
    lines = [line for line in text.splitlines()
             if not line.startswith(("    - Z[", "    C:", "    Z:", "  rank-order:"))]
    return "\n".join(lines).replace("T1", "Z") + "\n"


def _spmv(epilogue: str, partitioning: list[str], order: str, space: str, time: str) -> str:
    return _SPMV.format(
        epilogue=epilogue, partitioning="".join(f"      {p}\n" for p in partitioning).rstrip(),
        order=order, space=space, time=time,
    )


def _spmm(epilogue: str, partitioning: list[str], order: str, space: str, time: str,
          c_order: str = "M, N") -> str:
    return _SPMM.format(
        epilogue=epilogue, partitioning="".join(f"      {p}\n" for p in partitioning).rstrip(),
        order=order, space=space, time=time, c_order=c_order,
    )


SPECS = {
    # SpMV, one thread per tile of NUM_THREADS rows
    "spmv_thread": _spmv(
        "a * T1[m] + b * C[m]", ["M: [uniform_shape(NUM_THREADS)]"], "M1, M0, K", "M0", "M1, K"
    ),
    # SpMV, groups of G lanes per row (group-mapped), alpha absent
    "spmv_group": _spmv(
        "T1[m] + b * C[m]", ["M: [uniform_shape(TILES)]", "K: [uniform_occupancy(A.G)]"],
        "M1, M0, K1, K0", "M0, K0", "M1, K1",
    ),
    # SpMV, W nonzeros per thread (work-oriented), beta absent
    "spmv_work": _spmv(
        "a * T1[m] + C[m]", ["(M, K): [flatten()]", "MK: [uniform_occupancy(A.W)]"],
        "MK1, MK0", "MK1", "MK0",
    ),
    # SpMV, merge-path shares of I items
    "spmv_merge": _spmv(
        "a * T1[m] + b * C[m]", ["(M, K): [flatten()]", "MK: [x_merge_path(A.I)]"],
        "MK1, MK0", "MK1", "MK0",
    ),
    # SpMV scaled only: no addend
    "spmv_scale": _spmv(
        "a * T1[m]", ["M: [uniform_shape(NUM_THREADS)]"], "M1, M0, K", "M0", "M1, K"
    ),
    # SpMM, N0 in space after the worker, N1 in time
    "spmm_thread": _spmm(
        "a * T1[m, n] + b * C[m, n]",
        ["M: [uniform_shape(NUM_THREADS)]", "N: [uniform_shape(2)]"],
        "M1, M0, N1, N0, K", "M0, N0", "M1, N1, K",
    ),
    # SpMM, group-mapped with N in space between group and lanes, C stored column-major
    "spmm_group": _spmm(
        "a * T1[m, n] + b * C[m, n]",
        ["M: [uniform_shape(TILES)]", "K: [uniform_occupancy(A.G)]"],
        "M1, M0, N, K1, K0", "M0, N, K0", "M1, K1", c_order="N, M",
    ),
    # SpMM, work-oriented, N in time, alpha absent
    "spmm_work": _spmm(
        "T1[m, n] + b * C[m, n]", ["(M, K): [flatten()]", "MK: [uniform_occupancy(A.W)]"],
        "MK1, MK0, N", "MK1", "MK0, N",
    ),
    # SpMM, merge-path, N in time, beta absent
    "spmm_merge": _spmm(
        "a * T1[m, n] + C[m, n]", ["(M, K): [flatten()]", "MK: [x_merge_path(A.I)]"],
        "MK1, MK0, N", "MK1", "MK0, N",
    ),
}

PLAIN.update({name: _without_epilogue(text) for name, text in SPECS.items()})

# Small bindings of every parameter above (tile sizes nest; group sizes are powers of two).
PARAMS: dict[str, dict[str, int]] = {
    "spmv_thread": {"NUM_THREADS": 3},
    "spmv_group": {"TILES": 2, "G": 4},
    "spmv_work": {"W": 3},
    "spmv_merge": {"I": 4},
    "spmv_scale": {"NUM_THREADS": 5},
    "spmm_thread": {"NUM_THREADS": 3},
    "spmm_group": {"TILES": 2, "G": 2},
    "spmm_work": {"W": 3},
    "spmm_merge": {"I": 5},
}

KINDS = {
    "spmv_thread": "thread_mapped", "spmv_group": "group_mapped", "spmv_work": "work_oriented",
    "spmv_merge": "merge_path", "spmv_scale": "thread_mapped", "spmm_thread": "thread_mapped",
    "spmm_group": "group_mapped", "spmm_work": "work_oriented", "spmm_merge": "merge_path",
}


def write_spec(folder: Path, name: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(SPECS[name])
    return path
