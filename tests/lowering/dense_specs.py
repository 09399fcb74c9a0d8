"""Small specs of the dense forms for the CPU tests (simulation, ownership, check, explain),
so that they run without the shared corpus: one per placement of the dense rank."""

from __future__ import annotations

from pathlib import Path

_SPMM_HEAD = """
einsum:
  declaration:
    A: [M, K]
    B: [K, N]
    Z: [M, N]
  expressions:
    - Z[m, n] = A[m, k] * B[k, n]
"""

SPECS = {
    # N split: N0 (4 lanes of the dense rank) in space after the worker, N1 in time
    "spmm_n0_space": _SPMM_HEAD + """
mapping:
  partitioning:
    Z:
      M: [uniform_shape(NUM_THREADS)]
      N: [uniform_shape(4)]
  loop-order:
    Z: [M1, M0, N1, N0, K]
  spacetime:
    Z:
      space: [M0, N0]
      time: [M1, N1, K]
""",
    # N split by a parameter, both parts in time
    "spmm_n_split_time": _SPMM_HEAD + """
mapping:
  partitioning:
    Z:
      M: [uniform_shape(NUM_THREADS)]
      N: [uniform_shape(N_TILE)]
  loop-order:
    Z: [M1, M0, N1, N0, K]
  spacetime:
    Z:
      space: [M0]
      time: [M1, N1, N0, K]
""",
    # N unsplit in space, between the group and its lanes (group-mapped)
    "spmm_n_space_group": _SPMM_HEAD + """
mapping:
  partitioning:
    Z:
      M: [uniform_shape(TILES)]
      K: [uniform_occupancy(A.G)]
  loop-order:
    Z: [M1, M0, N, K1, K0]
  spacetime:
    Z:
      space: [M0, N, K0]
      time: [M1, K1]
""",
    # work-oriented SpMM, N in time
    "spmm_work": _SPMM_HEAD + """
mapping:
  partitioning:
    Z:
      (M, K): [flatten()]
      MK: [uniform_occupancy(A.W)]
  loop-order:
    Z: [MK1, MK0, N]
  spacetime:
    Z:
      space: [MK1]
      time: [MK0, N]
""",
    # work-oriented SpMM with N0 in space (nonzero splitting, specs/spmm/nonzero_split.yaml)
    "spmm_work_n0_space": _SPMM_HEAD + """
mapping:
  partitioning:
    Z:
      (M, K): [flatten()]
      MK: [uniform_occupancy(A.W)]
      N: [uniform_shape(S)]
  loop-order:
    Z: [MK1, N1, N0, MK0]
  spacetime:
    Z:
      space: [MK1, N0]
      time: [N1, MK0]
""",
    # B declared [N, K]
    "spmm_b_nk": """
einsum:
  declaration:
    A: [M, K]
    B: [N, K]
    Z: [M, N]
  expressions:
    - Z[m, n] = A[m, k] * B[n, k]
mapping:
  partitioning:
    Z:
      M: [uniform_shape(NUM_THREADS)]
  loop-order:
    Z: [M1, M0, N, K]
  spacetime:
    Z:
      space: [M0]
      time: [M1, N, K]
""",
    # transposed: A declared [K, M] and stored so (CSC of A^T), columns tiled
    "spmm_transposed": """
einsum:
  declaration:
    A: [K, M]
    B: [K, N]
    Z: [M, N]
  expressions:
    - Z[m, n] = A[k, m] * B[k, n]
mapping:
  rank-order:
    A: [K, M]
  partitioning:
    Z:
      K: [uniform_shape(COLS)]
  loop-order:
    Z: [K1, K0, N, M]
  spacetime:
    Z:
      space: [K1]
      time: [K0, N, M]
""",
    # one-einsum SDDMM: C sparse, K summed per atom in time
    "sddmm_one": """
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
      M: [uniform_shape(NUM_THREADS)]
  loop-order:
    Z: [M1, M0, N, K]
  spacetime:
    Z:
      space: [M0]
      time: [M1, N, K]
""",
    # TeAAL's two-einsum SDDMM (its spec library's sddmm.yaml, with a mapping)
    "sddmm_two": """
einsum:
  declaration:
    A: [M, K]
    B: [K, N]
    T1: [M, N]
    C: [M, N]
    Z: [M, N]
  expressions:
    - T1[m, n] = A[m, k] * B[k, n]
    - Z[m, n] = C[m, n] * T1[m, n]
mapping:
  partitioning:
    Z:
      M: [uniform_shape(NUM_THREADS)]
  loop-order:
    Z: [M1, M0, N]
  spacetime:
    Z:
      space: [M0]
      time: [M1, N]
""",
}

# Transposed SpMV (not a dense form: no dense rank), A declared [K, M]: CSC of A^T
SPMV_TRANSPOSED = """
einsum:
  declaration:
    A: [K, M]
    B: [K]
    Z: [M]
  expressions:
    - Z[m] = A[k, m] * B[k]
mapping:
  partitioning:
    Z:
      K: [uniform_shape(COLS)]
  loop-order:
    Z: [K1, K0, M]
  spacetime:
    Z:
      space: [K1]
      time: [K0, M]
"""

# Small bindings of every parameter above (tile sizes nest; group sizes are powers of two).
PARAMS = {
    "spmm_n0_space": {"NUM_THREADS": 3},
    "spmm_n_split_time": {"NUM_THREADS": 2, "N_TILE": 2},
    "spmm_n_space_group": {"TILES": 2, "G": 2},
    "spmm_work": {"W": 3},
    "spmm_work_n0_space": {"W": 3, "S": 3},
    "spmm_b_nk": {"NUM_THREADS": 4},
    "spmm_transposed": {"COLS": 3},
    "sddmm_one": {"NUM_THREADS": 3},
    "sddmm_two": {"NUM_THREADS": 2},
}


def write_spec(folder: Path, name: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(SPECS[name])
    return path
