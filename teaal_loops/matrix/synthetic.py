"""Seeded synthetic sparse matrices, built directly as CSR.

Kinds (``SYNTHETIC_KINDS``) and their extra keys:

``uniform``
    Row lengths ~ Poisson(nnz / rows), columns uniformly random.
``banded``
    A dense band of ``bandwidth`` columns (default ``round(nnz / rows)``) centred on the
    diagonal (on ``row * cols / rows`` for rectangular matrices), clipped at the edges.
``rmat``
    Graph500 R-MAT edges (``a=0.57, b=0.19, c=0.19, d=0.05``), square, exactly ``rows`` rows
    (at most 2**31; or ``scale=S`` for ``2**S`` rows). A power of two is pure R-MAT; any other
    size draws the edges on the next power of two ``2**S`` and maps vertex ``v`` to
    ``v * rows // 2**S`` (pairs of neighbouring vertices merge, the skew stays). ``permute=1``
    relabels the vertices randomly. Duplicate edges are merged and topped up so the result
    lands near ``nnz``.
``longrows``
    ``long_rows`` randomly chosen rows (default 4) hold ``fraction`` (default 0.9) of the
    nonzeros; the other rows share the rest like ``uniform``.
``emptyrows``
    A fraction ``empty_fraction`` (default 0.5) of the rows, chosen at random, are empty; every
    other row holds at least one nonzero.

Every kind accepts ``rows``, ``cols`` (default ``rows``), ``nnz`` (approximate total: duplicate
columns within a row are merged), ``seed`` (default 0, at most 2**62) and ``dtype``
(``float64``/``f64`` default, ``float32``/``f32``; anything else is refused). Sizes are at most
2**62 and must fit in the available memory: both are checked before anything is drawn.
Values are uniform in ``[-1, 1)`` and never zero. The same arguments give the same matrix on every
run (one ``numpy.random.Generator`` consumed in a fixed order).

Memory: rows are generated in chunks of about ``CHUNK_ENTRIES`` nonzeros and written straight into
the final ``indices`` / ``data`` arrays, so peak memory is the matrix plus a few chunk-sized
temporaries (R-MAT keeps one int64 key per edge while it sorts, about twice the matrix).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from teaal_loops.errors import MatrixError
from teaal_loops.matrix.synthetic_args import (
    COMMON_KEYS,
    KIND_KEYS,
    SYNTHETIC_KINDS,
    check_fraction,
    check_int,
    check_shape,
    parse_spec,
    value_dtype,
)

__all__ = ["CHUNK_ENTRIES", "GRAPH500", "SYNTHETIC_KINDS", "synthetic", "synthetic_from_string"]

GRAPH500 = (0.57, 0.19, 0.19, 0.05)
CHUNK_ENTRIES = 1 << 22
_INT32_MAX = 2**31 - 1
_DENSE_ROW = 8  # a row with more than cols/_DENSE_ROW entries is drawn column by column

# A column sampler: (first row, requested counts of the chunk's rows, rng) ->
# (local row of every entry, column of every entry); duplicates allowed, any order.
_Sampler = Callable[[int, np.ndarray, np.random.Generator], tuple[np.ndarray, np.ndarray]]


# --------------------------------------------------------------------------------------------
# Public API


def synthetic(
    kind: str, *, rows: int, cols: int | None = None, nnz: int, seed: int = 0, **options: Any
) -> sp.csr_matrix:
    """A seeded synthetic CSR matrix of the given kind (see the module docstring).

    Every argument is checked before anything is drawn (see
    :mod:`teaal_loops.matrix.synthetic_args`): a bad one, or a matrix that cannot fit in the
    available memory, is a one-line :class:`~teaal_loops.errors.MatrixError`.
    """
    if kind not in SYNTHETIC_KINDS:
        raise MatrixError(
            f"unknown synthetic matrix kind {kind!r} (valid kinds: {', '.join(SYNTHETIC_KINDS)})"
        )
    allowed = ("dtype", *KIND_KEYS[kind])
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise MatrixError(
            f"synthetic {kind}: unknown option(s) {', '.join(unknown)} "
            f"(valid keys: {', '.join(COMMON_KEYS + KIND_KEYS[kind])})"
        )
    dtype = value_dtype(options.pop("dtype", "float64"), kind)
    rows, cols = check_shape(kind, rows, cols, nnz, seed, options)
    rng = np.random.default_rng(seed)
    if kind == "rmat":
        return _rmat(rows, nnz, rng, dtype, options)
    if kind == "banded":
        counts, sampler = _banded(rows, cols, nnz, options)
    elif kind == "longrows":
        counts, sampler = _longrows(rows, cols, nnz, rng, options)
    elif kind == "emptyrows":
        counts, sampler = _emptyrows(rows, cols, nnz, rng, options)
    else:
        counts = np.minimum(rng.poisson(nnz / rows, rows), cols) if rows else np.zeros(0, int)
        sampler = _uniform_sampler(cols)
    return _csr_from_counts(counts, cols, sampler, rng, dtype)


def synthetic_from_string(text: str) -> sp.csr_matrix:
    """``"rmat:rows=1000000,nnz=10000000,seed=7"`` -> the matrix ``synthetic`` builds.

    Numbers may be written ``1000000``, ``1e6``, ``1.5e6``, ``10M`` / ``4k`` / ``2G`` (powers
    of 1000) or ``2^20``, up to 2^62. Booleans are ``0/1/true/false``; ``dtype`` is ``float32``
    (``f32``) or ``float64`` (``f64``). Anything else is a one-line MatrixError naming the key.
    """
    kind, values = parse_spec(text)
    return synthetic(kind, **values)


# --------------------------------------------------------------------------------------------
# CSR assembly from per-row counts


def _index_dtype(cols: int, nnz_bound: int) -> type[np.signedinteger[Any]]:
    return np.int32 if cols <= _INT32_MAX and nnz_bound <= _INT32_MAX else np.int64


def _random_values(rng: np.random.Generator, n: int, dtype: np.dtype[Any]) -> np.ndarray:
    """Uniform in [-1, 1), with exact zeros (probability 2**-53) replaced by 0.5."""
    values = rng.random(n)
    values *= 2.0
    values -= 1.0
    values[values == 0.0] = 0.5
    return values.astype(dtype, copy=False)


def _chunk_bounds(counts: np.ndarray) -> list[tuple[int, int]]:
    """Row ranges holding about CHUNK_ENTRIES requested entries each (a long row alone)."""
    ends = np.cumsum(counts, dtype=np.int64)
    bounds = []
    start = 0
    rows = len(counts)
    while start < rows:
        base = int(ends[start - 1]) if start else 0
        stop = int(np.searchsorted(ends, base + CHUNK_ENTRIES, side="right"))
        stop = min(rows, max(stop, start + 1))
        bounds.append((start, stop))
        start = stop
    return bounds


def _csr_from_counts(
    counts: np.ndarray,
    cols: int,
    sampler: _Sampler,
    rng: np.random.Generator,
    dtype: np.dtype[Any],
) -> sp.csr_matrix:
    """Build CSR chunk by chunk: sample, sort (row, col) keys, merge duplicates, append."""
    rows = len(counts)
    bound = int(counts.sum())
    index = _index_dtype(cols, bound)
    indptr = np.zeros(rows + 1, dtype=index)
    indices = np.empty(bound, dtype=index)
    data = np.empty(bound, dtype=dtype)
    filled = 0
    for start, stop in _chunk_bounds(counts):
        local_rows, columns = sampler(start, counts[start:stop], rng)
        keys = local_rows.astype(np.int64) * cols + columns
        keys.sort()
        if len(keys) > 1:
            keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
        row_lengths = np.bincount(keys // cols, minlength=stop - start)
        n = len(keys)
        indices[filled : filled + n] = keys % cols
        data[filled : filled + n] = _random_values(rng, n, dtype)
        indptr[start + 1 : stop + 1] = filled + np.cumsum(row_lengths)
        filled += n
    indices.resize(filled, refcheck=False)  # in place: no second copy of a huge array
    data.resize(filled, refcheck=False)
    return sp.csr_matrix((data, indices, indptr), shape=(rows, cols), copy=False)


def _uniform_sampler(cols: int) -> _Sampler:
    """Columns uniformly at random; rows denser than cols/_DENSE_ROW are drawn cell by cell
    (each column kept with probability count/cols) so merging duplicates loses little."""

    def sample(
        start: int, counts: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        dense = counts * _DENSE_ROW > cols
        light = np.where(dense, 0, counts)
        local_rows = [np.repeat(np.arange(len(counts), dtype=np.int64), light)]
        columns = [rng.integers(0, cols, int(light.sum()), dtype=np.int64)]
        for row in np.flatnonzero(dense):
            wanted = int(counts[row])
            probability = wanted / cols
            parts = []
            for lo in range(0, cols, CHUNK_ENTRIES):
                hi = min(cols, lo + CHUNK_ENTRIES)
                kept = np.flatnonzero(rng.random(hi - lo, dtype=np.float32) < probability)
                parts.append(kept + lo)
            kept = np.concatenate(parts)
            if len(kept) > wanted:  # never more than asked: the output arrays are sized by it
                kept = rng.choice(kept, wanted, replace=False)
            columns.append(kept.astype(np.int64))
            local_rows.append(np.full(len(kept), row, dtype=np.int64))
        return np.concatenate(local_rows), np.concatenate(columns)

    return sample


# --------------------------------------------------------------------------------------------
# Kinds


def _banded(rows: int, cols: int, nnz: int, options: dict[str, Any]) -> tuple[np.ndarray, _Sampler]:
    width = options.get("bandwidth")
    if width is None:
        width = max(1, round(nnz / rows))
    width = min(check_int("banded", "bandwidth", width, 1), cols)
    centre = np.arange(rows, dtype=np.int64) * cols // rows
    first = centre - width // 2
    counts = np.clip(first + width, 0, cols) - np.clip(first, 0, cols)

    def sample(
        start: int, chunk_counts: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        local = np.repeat(np.arange(len(chunk_counts), dtype=np.int64), chunk_counts)
        begin = np.clip(first[start : start + len(chunk_counts)], 0, cols)
        offsets = np.cumsum(chunk_counts) - chunk_counts
        within = np.arange(len(local), dtype=np.int64) - offsets[local]
        return local, begin[local] + within

    return counts, sample


def _longrows(
    rows: int, cols: int, nnz: int, rng: np.random.Generator, options: dict[str, Any]
) -> tuple[np.ndarray, _Sampler]:
    long_rows = check_int("longrows", "long_rows", options.get("long_rows", 4), 1)
    if long_rows > rows:
        raise MatrixError(f"synthetic longrows: long_rows={long_rows} exceeds rows={rows}")
    fraction = check_fraction("longrows", "fraction", options.get("fraction", 0.9))
    chosen = rng.choice(rows, long_rows, replace=False)
    per_long = min(cols, round(fraction * nnz / long_rows))
    rest = max(0, nnz - per_long * long_rows)
    others = rows - long_rows
    counts = np.minimum(rng.poisson(rest / others if others else 0.0, rows), cols)
    counts[chosen] = per_long
    return counts, _uniform_sampler(cols)


def _emptyrows(
    rows: int, cols: int, nnz: int, rng: np.random.Generator, options: dict[str, Any]
) -> tuple[np.ndarray, _Sampler]:
    fraction = check_fraction("emptyrows", "empty_fraction", options.get("empty_fraction", 0.5))
    n_empty = round(fraction * rows)
    n_full = rows - n_empty
    if nnz < n_full:
        raise MatrixError(
            f"synthetic emptyrows: nnz={nnz} cannot fill the {n_full} non-empty rows "
            "(every non-empty row holds at least one nonzero)"
        )
    empty = np.zeros(rows, dtype=bool)
    empty[rng.permutation(rows)[:n_empty] if n_empty else []] = True
    extra = (nnz - n_full) / n_full if n_full else 0.0
    counts = np.minimum(1 + rng.poisson(extra, rows), cols)
    counts[empty] = 0
    return counts, _uniform_sampler(cols)


def _rmat(
    rows: int,
    nnz: int,
    rng: np.random.Generator,
    dtype: np.dtype[Any],
    options: dict[str, Any],
) -> sp.csr_matrix:
    """R-MAT edges -> sorted unique int64 keys (row * rows + col) -> CSR."""
    probabilities = _rmat_probabilities(options)
    permute = bool(options.get("permute", False))
    scale = (rows - 1).bit_length()  # edges are drawn on 2**scale >= rows vertices
    permutation = rng.permutation(rows) if permute else None
    keys = np.zeros(0, dtype=np.int64)
    wanted = nnz
    for _ in range(8):  # top up what merging duplicate edges removed
        fresh = _rmat_keys(scale, rows, wanted, probabilities, rng, permutation)
        keys = np.concatenate((keys, fresh)) if len(keys) else fresh
        del fresh
        keys.sort()
        if len(keys) > 1:
            keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
        missing = nnz - len(keys)
        if missing <= nnz // 200:
            break
        wanted = missing
    if len(keys) > nnz:
        keys = keys[:nnz]  # never happens on the first pass; keeps the total at most nnz
    index = _index_dtype(rows, len(keys))
    indptr = np.zeros(rows + 1, dtype=index)
    indptr[1:] = np.cumsum(np.bincount(keys // rows, minlength=rows))
    indices = (keys % rows).astype(index)
    del keys
    data = _random_values(rng, len(indices), dtype)
    return sp.csr_matrix((data, indices, indptr), shape=(rows, rows), copy=False)


def _rmat_probabilities(options: dict[str, Any]) -> tuple[float, float, float, float]:
    a = check_fraction("rmat", "a", options.get("a", GRAPH500[0]))
    b = check_fraction("rmat", "b", options.get("b", GRAPH500[1]))
    c = check_fraction("rmat", "c", options.get("c", GRAPH500[2]))
    d_given = options.get("d")
    d = 1.0 - a - b - c if d_given is None else check_fraction("rmat", "d", d_given)
    if d < -1e-9 or abs(a + b + c + d - 1.0) > 1e-6:
        raise MatrixError(f"synthetic rmat: a+b+c+d must be 1, got {a}+{b}+{c}+{d}")
    return a, b, c, max(d, 0.0)


def _rmat_keys(
    scale: int,
    rows: int,
    count: int,
    probabilities: tuple[float, float, float, float],
    rng: np.random.Generator,
    permutation: np.ndarray | None,
) -> np.ndarray:
    """``count`` R-MAT edges as keys ``row * rows + col`` (16-bit quantised quadrant choice).

    Edges are drawn on ``2**scale`` vertices; vertex ``v`` becomes ``v * rows >> scale`` (the
    identity when ``rows`` is a power of two, else neighbouring pairs of vertices merge)."""
    a, b, c, _ = probabilities
    # Quadrant by one uint16 draw u: u < A top-left, < AB top-right, < ABC bottom-left, else
    # bottom-right. Thresholds are quantised to 1/65536, far below R-MAT's own noise.
    t_a, t_ab, t_abc = (round(p * 65536) for p in (a, a + b, a + b + c))
    keys = np.empty(count, dtype=np.int64)
    shrink = rows != 1 << scale
    for lo in range(0, count, CHUNK_ENTRIES):
        n = min(CHUNK_ENTRIES, count - lo)
        row = np.zeros(n, dtype=np.uint32 if scale <= 32 else np.uint64)
        col = np.zeros_like(row)
        for _ in range(scale):
            u = rng.integers(0, 65536, n, dtype=np.uint16)
            row_bit = _at_least(u, t_ab)
            # top-right [A, AB) and bottom-right [ABC, 1) set the column bit
            col_bit = _at_least(u, t_a) ^ row_bit ^ _at_least(u, t_abc)
            row <<= 1
            row |= row_bit
            col <<= 1
            col |= col_bit
        if shrink:  # scale <= 31 and rows < 2**31: the products fit uint64
            row = (row.astype(np.uint64) * np.uint64(rows)) >> np.uint64(scale)
            col = (col.astype(np.uint64) * np.uint64(rows)) >> np.uint64(scale)
        if permutation is not None:
            row = permutation[row]
            col = permutation[col]
        keys[lo : lo + n] = row.astype(np.int64) * rows + col.astype(np.int64)
    return keys


def _at_least(u: np.ndarray, threshold: int) -> np.ndarray:
    """``u >= threshold`` for uint16 draws, with thresholds 0 and 65536 meaning always / never."""
    if threshold <= 0:
        return np.ones(len(u), dtype=bool)
    if threshold > 65535:
        return np.zeros(len(u), dtype=bool)
    return u >= np.uint16(threshold)
