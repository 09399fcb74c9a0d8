"""Kernels and matrices the GPU tests run: every spec of the library plus parameter variants."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from tests.conftest import REPO, corpus_dir

SPECS = REPO / "specs"

# (id, spec file, parameters): the five library specs and variants that split rows differently
KERNEL_CASES: list[tuple[str, str, dict[str, int]]] = [
    ("thread_mapped", "thread_mapped.yaml", {}),
    ("thread_mapped_stride", "thread_mapped.yaml", {"NUM_TILES": 8192, "NUM_THREADS": 1024}),
    ("group_mapped", "group_mapped.yaml", {}),
    ("group_mapped_g8", "group_mapped.yaml", {"BLOCK_SIZE": 8, "NUM_TILES": 4096, "GRID_SIZE": 256}),
    ("group_mapped_block", "group_mapped_block.yaml", {}),
    ("group_mapped_g64", "group_mapped_block.yaml", {"GROUP": 64}),
    ("work_oriented", "work_oriented.yaml", {}),
    ("work_oriented_w3", "work_oriented.yaml", {"WORK_PER_THREAD": 3}),
    ("merge_path", "merge_path.yaml", {}),
    ("merge_path_i5", "merge_path.yaml", {"ITEMS_PER_THREAD": 5}),
]

SYNTHETIC = [
    "uniform:rows=20000,nnz=200000,seed=1",
    "banded:rows=30000,nnz=300000,seed=2",
    "rmat:rows=16384,nnz=250000,seed=3",
    "longrows:rows=5000,nnz=400000,seed=4",
    "emptyrows:rows=40000,nnz=100000,seed=5",
]


def corpus_matrices() -> list[Path]:
    folder = corpus_dir() / "matrices"
    return sorted(folder.glob("*.mtx*")) if folder.is_dir() else []


def matrix_ids() -> list[str]:
    return [f"corpus:{p.name}" for p in corpus_matrices()] + [f"synthetic:{s}" for s in SYNTHETIC]


@functools.lru_cache(maxsize=64)
def load(matrix_id: str) -> sp.csr_matrix:
    from teaal_loops import matrix

    kind, _, rest = matrix_id.partition(":")
    if kind == "corpus":
        return matrix.read_matrix_market(corpus_dir() / "matrices" / rest)
    return matrix.synthetic_from_string(rest)


@functools.lru_cache(maxsize=64)
def kernel(case: str, dtype: str) -> Any:
    import teaal_loops.pipeline as pipeline

    _, spec, params = next(c for c in KERNEL_CASES if c[0] == case)
    return pipeline.compile(SPECS / spec, dtype=dtype, params=params)


def random_x(cols: int, dtype: str, seed: int = 0) -> np.ndarray[Any, Any]:
    from teaal_loops.runtime.validation import random_vector

    return random_vector(cols, dtype, seed)
