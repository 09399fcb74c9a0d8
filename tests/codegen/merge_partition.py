"""What merge-path's partition kernel (teaal_merge_partition) computes, from the row offsets
on the host: the oracle of the CPU and GPU tests (the runtime computes it on the device)."""

from __future__ import annotations

import numpy as np


def merge_partition(indptr: np.ndarray, block_items: int, staged: bool) -> np.ndarray:
    """For every block b: the rows ending before item ``b * block_items`` and before the
    block's end (staged) or its last item, interleaved (2 * blocks values)."""
    ptr = np.asarray(indptr, dtype=np.int64)
    rows = len(ptr) - 1
    items = rows + int(ptr[-1])
    blocks = -(-items // block_items)
    ends = ptr[1:] + np.arange(rows, dtype=np.int64)  # the end item of every row
    first = np.arange(blocks, dtype=np.int64) * block_items
    end = np.minimum(first + block_items, items)
    out = np.empty(2 * blocks, dtype=np.int64)
    out[0::2] = np.searchsorted(ends, first, side="left")
    out[1::2] = np.searchsorted(ends, end if staged else end - 1, side="left")
    return out
