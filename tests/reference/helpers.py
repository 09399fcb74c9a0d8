"""Shared helpers for the reference tests: random matrices and the corpus spec lists."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from tests.conftest import REPO, corpus_dir

SPECS = sorted((REPO / "specs").glob("*.yaml"))


def loops_corpus() -> list[Path]:
    return sorted((corpus_dir() / "teaal-specs" / "loops").glob("*.yaml"))


def compiler_corpus() -> list[Path]:
    return sorted((corpus_dir() / "teaal-specs" / "teaal-compiler").glob("*.yaml"))


def random_csr(
    rows: int, cols: int, density: float, seed: int, *, empty_rows: int = 1, integral: bool = False
) -> sp.csr_matrix:
    """A random CSR matrix with nonzero values and some empty rows."""
    rng = np.random.default_rng(seed)
    mask = rng.random((rows, cols)) < density
    for r in rng.choice(rows, size=min(empty_rows, rows), replace=False):
        mask[r, :] = False
    if integral:
        vals = rng.integers(1, 9, size=(rows, cols))
    else:
        vals = rng.random((rows, cols)) + 0.25
    a = sp.csr_matrix(np.where(mask, vals, 0))
    a.sort_indices()
    return a


def dense_vector(n: int, seed: int, *, integral: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed + 1000)
    return rng.integers(1, 9, size=n) if integral else rng.random(n) + 0.5


def atoms(a: sp.csr_matrix) -> list[tuple[int, int, int, int]]:
    """(atom index, row, column, position in row) of every stored nonzero, CSR order."""
    out = []
    for r in range(a.shape[0]):
        for j, idx in enumerate(range(a.indptr[r], a.indptr[r + 1])):
            out.append((idx, r, int(a.indices[idx]), j))
    return out
