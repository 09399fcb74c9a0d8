"""``schedule: auto``: a kernel whose schedule is chosen per matrix.

A spec that says ``x-teaal-loops: {schedule: auto}`` (or ``teaal-loops run --schedule auto``)
keeps its einsum but lets :mod:`teaal_loops.auto` pick the mapping from cheap statistics of each
matrix it meets: the chosen library spec (``specs/*.yaml``) is compiled once per choice and
reused. The choice and its reason are on :attr:`AutoKernel.last_choice`.

The choice, and the chosen kernel's prepared matrix, are remembered per matrix by the same
weak-reference cache as a kernel's prepared matrices (:mod:`teaal_loops.runtime.matrix_cache`
says what is detected when a matrix changes): computing the row statistics is what costs
milliseconds, so ``auto(A, x)`` in a loop pays it once. ``auto(prepared, x)`` accepts a
matrix this auto kernel prepared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from teaal_loops import auto
from teaal_loops.codegen import normalize_dtype
from teaal_loops.errors import TeaalLoopsError, UnsupportedMappingError
from teaal_loops.ir import recognise_einsum
from teaal_loops.pipeline.stages import load_schedule, make_kernel
from teaal_loops.runtime import Kernel, PreparedMatrix, backend
from teaal_loops.runtime.matrix_cache import MatrixCache


@dataclass
class _Resolved:
    """What auto decided for one matrix: the kernel, why, and (once used) the matrix prepared."""

    kernel: Kernel
    choice: Any
    prepared: PreparedMatrix | None = None


class AutoKernel:
    def __init__(
        self,
        spec: Any,
        *,
        dtype: object = "float32",
        layout: str | None = None,
        padding_limit: float | None | str = "default",
    ) -> None:
        shape = recognise_einsum(spec)
        if shape.kind != "spmv" or shape.transposed or shape.epilogue is not None:
            # auto's measured constants choose among SpMV kernels; a choice for SpMM or
            # SDDMM would be a guess
            raise UnsupportedMappingError(
                f"schedule: auto chooses among SpMV kernels; {shape.text} is "
                f"{'a transposed ' if shape.transposed else ''}{shape.kind}"
                f"{' with an epilogue' if shape.epilogue is not None else ''}: give its mapping "
                "(the spec library has SpMM and SDDMM mappings: specs/spmm, specs/sddmm)",
                key_path="x-teaal-loops.schedule",
            )
        self.spec = spec
        self.padding_limit = padding_limit
        self.dtype = np.dtype(normalize_dtype(dtype))
        self.layout = layout
        self.last_choice: Any = None
        self._kernels: dict[tuple[str, tuple[tuple[str, int], ...], str | None], Kernel] = {}
        self._resolved: MatrixCache[_Resolved] = MatrixCache(Kernel.CACHE_SIZE)

    # -- choosing ---------------------------------------------------------------------------
    def kernel_for(self, A: Any) -> Kernel:
        """The kernel ``auto`` picks for matrix ``A`` (compiled on first use; the choice is
        remembered for ``A``). For a matrix this auto kernel prepared, the kernel that did."""
        if isinstance(A, PreparedMatrix):
            return self._owner_of(A)
        return self._resolve(A).kernel

    def _resolve(self, A: Any) -> _Resolved:
        entry = self._resolved.lookup(A)
        if entry is None:
            entry = self._choose(A)
            self._resolved.store(A, entry)
        self.last_choice = entry.choice
        return entry

    def _choose(self, A: Any) -> _Resolved:
        # the GPU's own properties and, where the constants file has them, its constants
        device = backend.device_info() if backend.gpu_available() else None
        # a layout given to this kernel is kept; else auto may choose one (column panels)
        path, choice = auto.resolve(self.spec, A, device, value_bytes=self.dtype.itemsize,
                                    layout_free=self.layout is None)
        layout = self.layout or choice.layout
        key = (choice.spec, tuple(sorted(choice.params.items())), layout)
        if key not in self._kernels:
            schedule = load_schedule(path, params=choice.params, layout=layout)
            self._kernels[key] = make_kernel(
                schedule, dtype=self.dtype, layout=layout, padding_limit=self.padding_limit
            )
        return _Resolved(self._kernels[key], choice)

    def _owner_of(self, prepared: PreparedMatrix) -> Kernel:
        """The kernel that prepared ``prepared`` (one of this auto kernel's choices)."""
        for kernel in self._kernels.values():
            if prepared.config.schedule is kernel.schedule:
                return kernel
        raise TeaalLoopsError(
            "this prepared matrix was not prepared by this auto kernel: pass the matrix itself "
            "or a matrix from its prepare()"
        )

    def _prepared(self, A: Any) -> tuple[Kernel, PreparedMatrix]:
        """The chosen kernel and ``A`` prepared for it (both remembered for ``A``)."""
        if type(A) is PreparedMatrix:
            return self._owner_of(A), A
        entry = self._resolve(A)
        if entry.prepared is None:
            entry.prepared = entry.kernel.prepared_for(A)
        return entry.kernel, entry.prepared

    # -- the kernel API, on the chosen kernel -----------------------------------------------
    def prepare(self, A: Any) -> PreparedMatrix:
        """Choose for ``A`` and prepare it anew (after an in-place edit, say); remembered."""
        if isinstance(A, PreparedMatrix):
            self._owner_of(A)
            return A
        entry = self._choose(A)
        self.last_choice = entry.choice
        entry.prepared = entry.kernel.prepare(A)
        self._resolved.store(A, entry)
        return entry.prepared

    def forget(self, A: Any) -> bool:
        """Drop the choice and the prepared matrix remembered for ``A`` (True if any)."""
        forgotten = self._resolved.forget(A)
        for kernel in self._kernels.values():
            forgotten = kernel.forget(A) or forgotten
        return forgotten

    def __call__(self, A: Any, x: Any, *, out: Any = None) -> Any:
        kernel, prepared = self._prepared(A)
        return kernel(prepared, x, out=out)

    def launch_into(self, A: Any, x: Any, y: Any) -> None:
        kernel, prepared = self._prepared(A)
        kernel.launch_into(prepared, x, y)

    def capture(self, A: Any, x: Any, y: Any, *, stream: Any = None) -> Any:
        """:meth:`Kernel.capture` with the kernel chosen for ``A``."""
        kernel, prepared = self._prepared(A)
        return kernel.capture(prepared, x, y, stream=stream)

    def linear_operator(self, A: Any, *, dtype: object = None) -> Any:
        """:meth:`Kernel.linear_operator` with the kernel chosen for ``A``."""
        kernel, prepared = self._prepared(A)
        return kernel.linear_operator(prepared, dtype=dtype)

    def trace(self, A: Any, x: Any) -> Any:
        kernel, prepared = self._prepared(A)
        return kernel.trace(prepared, x)

    @property
    def source(self) -> str:
        raise TeaalLoopsError(
            "schedule auto: the source depends on the matrix; use kernel.kernel_for(A).source"
        )
