"""``schedule: auto``: a kernel whose schedule is chosen per matrix.

A spec that says ``x-teaal-loops: {schedule: auto}`` (or ``teaal-loops run --schedule auto``)
keeps its einsum but lets :mod:`teaal_loops.auto` pick the mapping from cheap statistics of each
matrix it meets: the chosen library spec (``specs/*.yaml``) is compiled once per choice and
reused. The choice and its reason are on :attr:`AutoKernel.last_choice`.
"""

from __future__ import annotations

from typing import Any

from teaal_loops import auto
from teaal_loops.errors import TeaalLoopsError
from teaal_loops.ir import recognise_spmv
from teaal_loops.pipeline.stages import load_schedule, make_kernel
from teaal_loops.runtime import Kernel, PreparedMatrix


class AutoKernel:
    def __init__(self, spec: Any, *, dtype: object = "float32", layout: str | None = None) -> None:
        recognise_spmv(spec)  # auto still needs an SpMV einsum: refuse anything else now
        self.spec = spec
        self.dtype = dtype
        self.layout = layout
        self.last_choice: Any = None
        self._kernels: dict[tuple[str, tuple[tuple[str, int], ...]], Kernel] = {}

    def kernel_for(self, A: Any) -> Kernel:
        """The kernel ``auto`` picks for matrix ``A`` (compiled on first use)."""
        path, choice = auto.resolve(self.spec, A)
        self.last_choice = choice
        key = (choice.spec, tuple(sorted(choice.params.items())))
        if key not in self._kernels:
            schedule = load_schedule(path, params=choice.params, layout=self.layout)
            self._kernels[key] = make_kernel(schedule, dtype=self.dtype, layout=self.layout)
        return self._kernels[key]

    def prepare(self, A: Any) -> PreparedMatrix:
        return self.kernel_for(A).prepare(A)

    def __call__(self, A: Any, x: Any, *, out: Any = None) -> Any:
        if isinstance(A, PreparedMatrix):
            return self._owner_of(A)(A, x, out=out)
        return self.kernel_for(A)(A, x, out=out)

    def _owner_of(self, prepared: PreparedMatrix) -> Kernel:
        """The kernel that prepared ``prepared`` (one of this auto kernel's choices)."""
        for kernel in self._kernels.values():
            if prepared.config.schedule is kernel.schedule:
                return kernel
        raise TeaalLoopsError(
            "this prepared matrix was not prepared by this auto kernel: pass the matrix itself "
            "or a matrix from its prepare()"
        )

    def trace(self, A: Any, x: Any) -> Any:
        return self.kernel_for(A).trace(A, x)

    @property
    def source(self) -> str:
        raise TeaalLoopsError(
            "schedule auto: the source depends on the matrix; use kernel.kernel_for(A).source"
        )
