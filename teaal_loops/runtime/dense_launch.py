"""A dense-form product (SpMM, SDDMM) bound once to its operands and output.

``kernel.bind_dense(A, operands, out=None)`` does every check of a dense call once (operand
shapes, dtypes and strides, the output, the launch geometry for the dense rank's size) and
returns a :class:`DenseLaunch`. Its ``launch()`` is then what a loop or a benchmark repeats:
the output zeroed where the schedule accumulates (one ``cudaMemsetAsync``, or CuPy's fill for
a strided output) and one kernel launch on the current stream, with no checks, no allocation
and no host synchronisation. Every argument is packed once into the array ``cuLaunchKernel``
takes (``launcher.RawLaunch`` with no trailing slots: CuPy's generic launch boxes a dozen
arguments on every call); where that launcher is unavailable, CuPy's launch with the argument
tuple built at bind time. A CUDA graph can capture either.

The launch holds the arrays' device addresses, as a captured graph does: new inputs are
written into the same arrays (``B[...] = ...``); other arrays, or a matrix prepared again,
need a new ``bind_dense``. The object keeps the matrix, operands and output alive.
"""

from __future__ import annotations

from typing import Any

from teaal_loops.runtime import backend, launcher


class DenseLaunch:
    """One bound product; ``output`` is the array it writes (SpMM: (M, N); SDDMM: the values
    in the sampler's atom order)."""

    __slots__ = ("output", "_cupy", "_fn", "_grid", "_block", "_args", "_raw", "_zero",
                 "_keep")

    def __init__(self, cupy: Any, fn: Any, grid: tuple[int, ...], block: tuple[int, ...],
                 args: tuple[Any, ...], output: Any, zero: bool, keep: Any,
                 raw: launcher.RawLaunch | None = None) -> None:
        """``raw``: the packed launcher (built here from ``fn`` when None; CuPy's launch where
        none can be built)."""
        self.output = output
        self._cupy = cupy
        self._fn = fn
        self._grid = grid
        self._block = block
        self._args = args
        self._raw = raw or (launcher.raw_launch(fn, grid[0], block[0], args, 0)
                            if grid[0] else None)
        self._zero = zero
        self._keep = keep  # the prepared matrix and the checked operands

    def launch(self) -> None:
        """Zero the output where the schedule accumulates, then launch; no checks."""
        if self._zero:
            backend.zero_async(self._cupy, self.output)
        if self._raw is not None:
            self._raw()
        elif self._grid[0]:
            self._fn(self._grid, self._block, self._args)
