"""Large synthetic CSR matrices generated where they will be used: on the GPU.

A gigabyte of CSR (about 130 million nonzeros in float32) takes minutes to build with the
single-threaded NumPy generators of :mod:`teaal_loops.matrix.synthetic`; the same structure
classes built with whole-array operations of CuPy take about a second. Every function here takes
the array module ``xp`` (``cupy`` on the device, ``numpy`` in CPU tests) and returns
``(indptr, indices, data)`` arrays of that module: int32 offsets and columns (int64 offsets when
nnz exceeds int32), values uniform in [-1, 1) and never zero, columns sorted within each row,
no duplicates (the canonical CSR that cuSPARSE and the generated kernels both accept).

The random streams of NumPy and CuPy differ, so the two modules give matrices of the same class
and size, not the same matrix; each is reproducible for a given seed.

Classes (the ones the bandwidth claims of BENCHMARKS.md rest on):

``banded``   ``width`` nonzeros a row centred on the diagonal (clipped at the edges).
``uniform``  Poisson(nnz / rows) nonzeros a row, uniformly random columns.
``rmat``     Graph500 R-MAT edges (a, b, c = 0.57, 0.19, 0.19) at ``scale``: 2**scale rows.
``longrows`` ``long_rows`` rows share ``fraction`` of the nonzeros; the rest are Poisson.
``powerlaw`` the project's power-law graph (``matrix.rowwise.PowerLaw``): Pareto row lengths,
           low-numbered columns hot (Chung-Lu-like), counter-based.
``emptyrows`` a random ``empty_fraction`` of the rows empty, the others Poisson, random columns.
"""

from __future__ import annotations

from typing import Any

from teaal_loops.matrix.rowwise import MAX_ALPHA, MAX_SKEW, PowerLaw, entry_rows, generate_rows

INT32_MAX = 2**31 - 1
GRAPH500 = (0.57, 0.19, 0.19)

Csr = tuple[Any, Any, Any]


def _offsets_dtype(xp: Any, nnz: int) -> Any:
    return xp.int64 if nnz > INT32_MAX else xp.int32


def _values(xp: Any, rs: Any, n: int, dtype: Any) -> Any:
    """Uniform in [-1, 1), exact zeros replaced by 0.5 (zeros would hide unwritten rows)."""
    v = (rs.random_sample(n) * 2.0 - 1.0).astype(dtype)
    v[v == 0] = 0.5
    return v


def _indptr_from_counts(xp: Any, counts: Any) -> Any:
    total = int(counts.sum())
    indptr = xp.zeros(len(counts) + 1, dtype=xp.int64)
    xp.cumsum(counts, out=indptr[1:])
    return indptr.astype(_offsets_dtype(xp, total))


def _from_keys(xp: Any, rs: Any, keys: Any, rows: int, cols: int, dtype: Any) -> Csr:
    """Unique sorted keys row * cols + col -> canonical CSR with random values."""
    keys = xp.sort(keys)
    if len(keys) > 1:
        keep = xp.empty(len(keys), dtype=bool)
        keep[0] = True
        xp.not_equal(keys[1:], keys[:-1], out=keep[1:])
        keys = keys[keep]
    row = keys // cols
    counts = xp.bincount(row, minlength=rows)
    del row
    indptr = _indptr_from_counts(xp, counts)
    indices = (keys % cols).astype(xp.int32)
    del keys
    return indptr, indices, _values(xp, rs, len(indices), dtype)


def banded(xp: Any, *, rows: int, width: int, seed: int = 0, dtype: Any = "float32") -> Csr:
    """Row r holds columns r - width//2 .. r - width//2 + width - 1, clipped to [0, rows)."""
    if rows < 1 or width < 1:
        raise ValueError(f"banded: rows={rows} and width={width} must be positive")
    rs = xp.random.RandomState(seed)
    r = xp.arange(rows, dtype=xp.int64)
    first = xp.clip(r - width // 2, 0, rows)
    last = xp.clip(r - width // 2 + width, 0, rows)
    counts = last - first
    indptr = _indptr_from_counts(xp, counts)
    nnz = int(indptr[-1])
    row = entry_rows(xp, indptr.astype(xp.int64), 0, nnz)
    indices = (first[row] + xp.arange(nnz, dtype=xp.int64) - indptr[row]).astype(xp.int32)
    del row
    return indptr, indices, _values(xp, rs, nnz, dtype)


def uniform(xp: Any, *, rows: int, nnz: int, seed: int = 0, dtype: Any = "float32") -> Csr:
    """Poisson(nnz / rows) entries a row at uniformly random columns (square)."""
    if rows < 1 or nnz < 0:
        raise ValueError(f"uniform: rows={rows} must be positive and nnz={nnz} non-negative")
    rs = xp.random.RandomState(seed)
    counts = xp.minimum(rs.poisson(nnz / rows, rows), rows).astype(xp.int64)
    return _scatter_rows(xp, rs, counts, rows, dtype)


def longrows(
    xp: Any,
    *,
    rows: int,
    nnz: int,
    long_rows: int = 128,
    fraction: float = 0.9,
    seed: int = 0,
    dtype: Any = "float32",
) -> Csr:
    """``long_rows`` random rows hold ``fraction`` of the nonzeros, the rest Poisson (square)."""
    if not 1 <= long_rows <= rows or not 0.0 <= fraction <= 1.0:
        raise ValueError("longrows: need 1 <= long_rows <= rows and 0 <= fraction <= 1")
    rs = xp.random.RandomState(seed)
    per_long = min(rows, round(fraction * nnz / long_rows))
    rest = max(0, nnz - per_long * long_rows)
    counts = xp.minimum(rs.poisson(rest / max(rows - long_rows, 1), rows), rows).astype(xp.int64)
    chosen = rs.permutation(rows)[:long_rows]
    counts[chosen] = 0
    # Long rows take distinct columns (a random sample without replacement), so each holds
    # exactly per_long nonzeros and the fraction holds after duplicates are merged.
    long_keys = [int(r) * rows + rs.permutation(rows)[:per_long].astype(xp.int64)
                 for r in chosen.tolist()]
    return _scatter_rows(xp, rs, counts, rows, dtype, extra_keys=long_keys)


def _scatter_rows(
    xp: Any, rs: Any, counts: Any, rows: int, dtype: Any, extra_keys: list[Any] | None = None
) -> Csr:
    """Random columns (with replacement, merged) for ``counts`` entries a row, plus the keys
    ``row * rows + col`` of ``extra_keys``; square."""
    indptr = _indptr_from_counts(xp, counts)
    total = int(indptr[-1])
    row = entry_rows(xp, indptr.astype(xp.int64), 0, total)
    cols = rs.randint(0, rows, size=total, dtype=xp.int64)
    keys = row * rows + cols
    del row, cols
    if extra_keys:
        keys = xp.concatenate([keys, *extra_keys])
    return _from_keys(xp, rs, keys, rows, rows, dtype)


def rmat(
    xp: Any,
    *,
    scale: int,
    nnz: int,
    probabilities: tuple[float, float, float] = GRAPH500,
    seed: int = 0,
    dtype: Any = "float32",
) -> Csr:
    """``nnz`` R-MAT edges on 2**scale vertices; duplicate edges merged (so slightly fewer)."""
    if not 1 <= scale <= 31:
        raise ValueError(f"rmat: scale={scale} must lie in 1..31")
    a, b, c = probabilities
    rs = xp.random.RandomState(seed)
    row = xp.zeros(nnz, dtype=xp.int64)
    col = xp.zeros(nnz, dtype=xp.int64)
    for _ in range(scale):  # one quadrant choice per bit, most significant first
        u = rs.random_sample(nnz)
        row_bit = u >= a + b
        col_bit = ((u >= a) & ~row_bit) | (u >= a + b + c)
        del u
        row <<= 1
        row |= row_bit
        col <<= 1
        col |= col_bit
    n = 1 << scale
    keys = row * n + col
    del row, col
    return _from_keys(xp, rs, keys, n, n, dtype)


def powerlaw(
    xp: Any, *, rows: int, nnz: int, alpha: float = 1.5, skew: float = 0.5, seed: int = 0,
    dtype: Any = "float32",
) -> Csr:
    """The project's power-law graph (:class:`teaal_loops.matrix.rowwise.PowerLaw`, the one
    the distributed runs use): Pareto(``alpha``) row lengths of mean ``nnz / rows``, column
    popularity falling as ``(j + 1)^-skew`` (square), made whole on the device."""
    if rows < 1 or nnz < 0 or not 1.0 < alpha <= MAX_ALPHA or not 0.0 <= skew <= MAX_SKEW:
        raise ValueError(f"powerlaw: rows={rows} must be positive, nnz={nnz} non-negative, "
                         f"alpha={alpha} in (1, {MAX_ALPHA:g}] and skew={skew} in [0, "
                         f"{MAX_SKEW}]")
    family = PowerLaw(rows, rows, nnz / rows, alpha, skew, seed)
    indptr, indices, data = generate_rows(family, 0, rows, dtype, xp)
    data[data == 0] = 0.5  # (zeros would hide unwritten rows)
    return indptr.astype(_offsets_dtype(xp, int(indptr[-1]))), indices, data


def emptyrows(
    xp: Any, *, rows: int, nnz: int, empty_fraction: float = 0.5, seed: int = 0,
    dtype: Any = "float32",
) -> Csr:
    """A random ``empty_fraction`` of the rows empty; the others Poisson, about ``nnz`` in
    all, at uniformly random columns (square)."""
    if rows < 1 or nnz < 0 or not 0.0 <= empty_fraction < 1.0:
        raise ValueError("emptyrows: need rows >= 1, nnz >= 0 and 0 <= empty_fraction < 1")
    rs = xp.random.RandomState(seed)
    full = xp.asarray(rs.random_sample(rows) >= empty_fraction)
    mean = nnz / max(int(full.sum()), 1)
    counts = xp.minimum(rs.poisson(mean, rows), rows).astype(xp.int64) * full
    return _scatter_rows(xp, rs, counts, rows, dtype)


GENERATORS = {"banded": banded, "uniform": uniform, "rmat": rmat, "longrows": longrows,
              "powerlaw": powerlaw, "emptyrows": emptyrows}
