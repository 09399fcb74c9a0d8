"""Loading a suite entry onto the GPU as CSR arrays, with its row statistics.

Corpus files and CPU synthetic matrices are read on the host and uploaded with int32 offsets
(cuSPARSE through CuPy needs them); pattern files (all values one) get random values so that
a wrong row or column cannot hide. ``gpu`` entries are generated on the device
(:mod:`teaal_loops.bench.generate`). ``cp`` is the array module: CuPy, or NumPy in CPU tests.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from teaal_loops import matrix
from teaal_loops.auto import device_row_stats
from teaal_loops.bench import generate
from teaal_loops.bench.suite import MatrixEntry
from teaal_loops.errors import TeaalLoopsError
from teaal_loops.matrix.stats import row_stats

Loaded = tuple[Any, Any, Any, tuple[int, int], Any]  # indptr, indices, data, shape, RowStats


def load_entry(cp: Any, entry: MatrixEntry, seed: int = 0) -> Loaded:
    """``(indptr, indices, data, (rows, cols), stats)`` of ``entry`` as ``cp`` arrays."""
    if entry.origin == "gpu":

        fn: Any = generate.GENERATORS[entry.generator or ""]
        indptr, indices, data = fn(cp, seed=seed, **dict(entry.options))
        n = len(indptr) - 1
        shape = (n, n)

        stats = device_row_stats(cp, indptr, shape[1])
        return indptr, indices, data, shape, stats

    if entry.origin == "file":
        host = matrix.read_matrix_market(str(entry.path))
    else:
        host = matrix.synthetic_from_string(entry.text or "")
    host = matrix.as_csr(host)
    if host.nnz and np.all(host.data == host.data[0]):
        # pattern files (all ones): random values, so a wrong row or column cannot hide
        rng = np.random.default_rng(seed)
        host.data = rng.uniform(-1.0, 1.0, host.nnz)
    stats = row_stats(host)
    if host.indptr[-1] > 2**31 - 1:
        raise TeaalLoopsError(
            f"{entry.name}: over 2**31 nonzeros; cuSPARSE through CuPy needs int32 offsets"
        )
    return (
        cp.asarray(host.indptr.astype(np.int32)),
        cp.asarray(host.indices.astype(np.int32)),
        cp.asarray(host.data),
        (int(host.shape[0]), int(host.shape[1])),
        stats,
    )
