"""What every case of a benchmark run shares: the options, the device, the timer, the copy
rate, the progress line and the compiled kernels."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teaal_loops.bench.plan import DEFAULT_WIDTHS
from teaal_loops.bench.progress import Progress
from teaal_loops.bench.suite import MatrixEntry, PlanItem
from teaal_loops.bench.variants import Variant, compile_variant
from teaal_loops.matrix.heavy_rows import HEAVY_MIN_NNZ
from teaal_loops.matrix.limit_model import GatherCurve

ROTATE_FACTOR = 3.0  # inputs are rotated until the sets span this many L2 caches


@dataclass(frozen=True)
class SplitAt:
    """Where a case is split: heavy rows from ``min_nnz`` nonzeros, in panels of ``width``
    columns. The default minimum (4,096) suits a few rows of tens of thousands (longrows, at
    1,024 columns); R-MAT's SpMM gains from 64 at 262,144 columns, its rows of hundreds walked
    apart from its short ones (BENCHMARKS.md)."""

    width: int
    min_nnz: int = HEAVY_MIN_NNZ

    @property
    def name(self) -> str:
        """``split:W``, or ``split:W:MIN`` for another minimum: the label and layout of the
        case's result."""
        tail = "" if self.min_nnz == HEAVY_MIN_NNZ else f":{self.min_nnz}"
        return f"split:{self.width}{tail}"


@dataclass
class BenchOptions:
    """A benchmark run. ``entries`` x ``variants`` is the SpMV run of old; ``plan`` (matrices
    with their kernels) and ``kernel_variants`` (variants by kernel) add SpMM and SDDMM."""

    entries: Sequence[MatrixEntry]
    variants: Sequence[Variant]
    dtypes: Sequence[str] = ("float32",)
    reps: int = 25
    warmup: int = 5
    auto: bool = True  # time the auto choice too (and report auto / best)
    only_auto: bool = False  # time only the auto choice (plus cuSPARSE)
    max_copies: int = 32
    seed: int = 0
    command: str = ""
    time_budget_s: float | None = None  # start no new case after this many seconds
    json_path: Path | None = None  # written after every case
    extra: dict[str, Any] = field(default_factory=dict)
    plan: Sequence[PlanItem] = ()  # default: every entry with SpMV
    kernel_variants: Mapping[str, Sequence[Variant]] = field(default_factory=dict)
    widths: Mapping[str, Sequence[int]] = field(default_factory=lambda: dict(DEFAULT_WIDTHS))
    # SpMV and SpMM: also time each case split at its heavy rows, at each of these
    # (teaal_loops.bench.case_split)
    splits: Sequence[SplitAt] = ()

    def items(self) -> list[PlanItem]:
        return list(self.plan) or [PlanItem(e, ("spmv",)) for e in self.entries]

    def variants_of(self, kernel: str) -> list[Variant]:
        if kernel in self.kernel_variants:
            return list(self.kernel_variants[kernel])
        return list(self.variants) if kernel == "spmv" else []

    def widths_of(self, kernel: str) -> tuple[int | None, ...]:
        return (None,) if kernel == "spmv" else tuple(self.widths.get(kernel, ()))


class Context:
    """The shared state of one run (module docstring)."""

    def __init__(self, cp: Any, timer: Any, device: Any, options: BenchOptions,
                 copy_gbps: float, progress: Progress | None, *,
                 l2_gbps: float | None = None, gathers: GatherCurve | None = None) -> None:
        self.cp = cp
        self.timer = timer
        self.device = device
        self.options = options
        self.copy_gbps = copy_gbps
        self.l2_gbps = l2_gbps  # None: not measured (the limit model then uses its nominal)
        self.gathers = gathers  # random-gather rates by buffer size; None: not measured
        self.progress = progress
        self.kernels: dict[tuple[str, str], Any] = {}

    def kernel(self, variant: Variant, dtype: str) -> Any:
        """The compiled kernel of ``variant`` in ``dtype`` (compiled once a run)."""
        key = (f"{variant.spec}|{variant.label}|{variant.layout}", dtype)
        kernel = self.kernels.get(key)
        if kernel is None:
            kernel = self.kernels[key] = compile_variant(variant, dtype)
        return kernel

    def forget(self, variant: Variant, dtype: str, matrices: Sequence[Any]) -> None:
        """Let the kernel of ``variant`` drop what it prepared for ``matrices`` (a compiled
        kernel lives for the whole run; what it remembers would keep a gigabyte-sized class
        on the device after its cases)."""
        kernel = self.kernels.get((f"{variant.spec}|{variant.label}|{variant.layout}", dtype))
        if kernel is not None:
            for matrix in matrices:
                kernel.forget(matrix)

    def copies(self, working_set: int) -> int:
        return rotation_copies(working_set, self.device.l2_bytes, self.options.max_copies)

    def say(self, label: str) -> None:
        if self.progress:
            self.progress.update(label)

    def advance(self, detail: str = "") -> None:
        if self.progress:
            self.progress.advance()
            if detail:
                self.progress.detail(detail)


def rotation_copies(working_set: int, l2_bytes: int, max_copies: int) -> int:
    """Input sets to rotate so that they span ROTATE_FACTOR x L2 (1 if one set already does)."""
    if working_set <= 0:
        return 1
    need = math.ceil(ROTATE_FACTOR * l2_bytes / working_set)
    return int(max(1, min(max_copies, need)))
