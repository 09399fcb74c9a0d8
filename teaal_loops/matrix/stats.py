"""Row-length statistics of a CSR matrix: what the automatic schedule chooser looks at."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from teaal_loops.matrix.convert import as_csr


@dataclass(frozen=True)
class RowStats:
    """Distribution of nonzeros per row.

    ``std`` is the population standard deviation; ``cv = std / mean`` (0 for a matrix without
    nonzeros). ``p50`` / ``p90`` / ``p99`` are row-length quantiles (linear interpolation).
    """

    rows: int
    cols: int
    nnz: int
    mean: float
    max: int
    min: int
    std: float
    cv: float
    empty_rows: int
    p50: float
    p90: float
    p99: float

    @property
    def empty_fraction(self) -> float:
        return self.empty_rows / self.rows if self.rows else 0.0

    @property
    def max_over_mean(self) -> float:
        """How much longer the longest row is than the average one (skew)."""
        return self.max / self.mean if self.mean else 0.0


def row_stats(A: Any) -> RowStats:
    """Row-length statistics of ``A`` (anything :func:`~teaal_loops.matrix.as_csr` accepts)."""
    csr = as_csr(A)  # no copy when A already is a canonical float CSR matrix
    rows, cols = (int(s) for s in csr.shape)
    lengths = np.diff(csr.indptr.astype(np.int64))
    if rows == 0:
        return RowStats(rows, cols, 0, 0.0, 0, 0, 0.0, 0.0, 0, 0.0, 0.0, 0.0)
    mean = float(lengths.mean())
    std = float(lengths.std())
    p50, p90, p99 = (float(q) for q in np.quantile(lengths, (0.5, 0.9, 0.99)))
    return RowStats(
        rows=rows,
        cols=cols,
        nnz=int(csr.nnz),
        mean=mean,
        max=int(lengths.max()),
        min=int(lengths.min()),
        std=std,
        cv=std / mean if mean else 0.0,
        empty_rows=int(np.count_nonzero(lengths == 0)),
        p50=p50,
        p90=p90,
        p99=p99,
    )
