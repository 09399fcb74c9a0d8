"""``auto``: choose a schedule and its parameters from cheap matrix statistics.

Selected by ``x-teaal-loops: {schedule: auto}`` in a spec or ``--schedule auto`` on the command
line. :func:`choose` is a pure function of row-length statistics (rows, nnz, mean / max / cv of
the row lengths, empty rows; all computable in one pass over the row offsets) and, optionally,
the device; it never looks at column indices or values, and never times anything.

The answer names one spec of our library (``specs/<spec>.yaml``) plus parameter bindings for it,
so the chosen kernel is an ordinary generated kernel of an ordinary spec: ``explain`` and the
trace tests apply to it unchanged.

Rules, first match wins (``mean`` = nnz / rows, ``skew`` = max row / mean):

====  ==========================================  ==============================================
rule  when                                        choice
====  ==========================================  ==============================================
R0    no nonzeros or no rows                       thread-mapped: nothing to balance
R1    longest row >= LONG_ROW and skew >= SKEW     merge-path: rows long enough to stall one
                                                   thread, warp or block; equal shares of rows +
                                                   nonzeros per thread whatever the lengths
R2    cv >= HIGH_CV                                merge-path: power-law rows; any per-row
                                                   mapping leaves most lanes idle or one worker
                                                   far behind
R3    mean >= BLOCK_MEAN                           group-mapped, one thread block of
                                                   BLOCK_GROUP lanes per row (shared-memory
                                                   reduction): rows of thousands of nonzeros
R4    mean >= WARP_MEAN                            group-mapped, one warp (32 lanes) per row
R5    mean >= SUBWARP_MEAN                         group-mapped with G = the power of two nearest
                                                   below the mean (2..16 lanes a row):
                                                   coalesced loads without idle lanes
R6    otherwise (very short rows)                  thread-mapped: one row per thread
====  ==========================================  ==============================================

The thresholds are module constants; BENCHMARKS.md records the measurements they were set from
(each benchmark run reports, per matrix, the chosen schedule's time over the best one's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from teaal_loops.errors import TeaalLoopsError
from teaal_loops.ir.model import DeviceInfo, ScheduleKind

# Thresholds of the rules above (see the module docstring).
LONG_ROW = 4096  # R1: a row this long takes one warp >= 128 sequential steps
SKEW = 32.0  # R1: ... and is far longer than the typical row
HIGH_CV = 2.0  # R2: coefficient of variation of the row lengths
BLOCK_MEAN = 1024.0  # R3
BLOCK_GROUP = 256  # R3: lanes per row (a power of two, at most 1024)
WARP_MEAN = 24.0  # R4
SUBWARP_MEAN = 3.0  # R5
MAX_SUBWARP = 16  # R5: largest sub-warp group (32 is R4)

# Which spec of the library realises each choice, and the parameter that sets its group size.
SPEC_FOR = {
    ScheduleKind.THREAD_MAPPED: "thread_mapped",
    ScheduleKind.GROUP_MAPPED: "group_mapped",
    ScheduleKind.WORK_ORIENTED: "work_oriented",
    ScheduleKind.MERGE_PATH: "merge_path",
}
BLOCK_SPEC = "group_mapped_block"  # group-mapped with a block-sized group (parameter GROUP)
WARP_GROUP_PARAM = "BLOCK_SIZE"  # specs/group_mapped.yaml: K: [uniform_occupancy(A.BLOCK_SIZE)]
BLOCK_GROUP_PARAM = "GROUP"  # specs/group_mapped_block.yaml: K: [uniform_occupancy(A.GROUP)]


class MatrixStats(Protocol):
    """What :func:`choose` reads; :class:`teaal_loops.matrix.stats.RowStats` provides it."""

    @property
    def rows(self) -> int: ...

    @property
    def nnz(self) -> int: ...

    @property
    def mean(self) -> float: ...

    @property
    def max(self) -> int: ...

    @property
    def cv(self) -> float: ...

    @property
    def empty_rows(self) -> int: ...


@dataclass(frozen=True)
class AutoChoice:
    """A schedule chosen by :func:`choose`: the library spec, its parameters and why."""

    schedule: ScheduleKind
    spec: str  # name of a spec in the library, e.g. "group_mapped" (specs/group_mapped.yaml)
    params: Mapping[str, int] = field(default_factory=dict)
    rule: str = ""  # "R4"
    reason: str = ""  # one sentence naming the statistics that decided

    @property
    def label(self) -> str:
        """``group_mapped[BLOCK_SIZE=8]``: the spec and its bound parameters, sorted."""
        if not self.params:
            return self.spec
        bound = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.spec}[{bound}]"


def choose(stats: MatrixStats, device: DeviceInfo | None = None) -> AutoChoice:
    """The schedule (and parameters) the rules of the module docstring pick for ``stats``.

    ``device`` is accepted so that rules may depend on it; the current rules do not (launch
    sizes that depend on the device are left to :func:`teaal_loops.ir.bind`'s defaults).
    """
    del device  # the rules are device-independent today; bind() sizes the launch per device
    rows, nnz = int(stats.rows), int(stats.nnz)
    mean = float(stats.mean) if stats.mean else (nnz / rows if rows else 0.0)
    longest, cv = int(stats.max), float(stats.cv)
    skew = longest / mean if mean else 0.0
    if rows == 0 or nnz == 0:
        return _pick(ScheduleKind.THREAD_MAPPED, "R0", "the matrix has no nonzeros")
    if longest >= LONG_ROW and skew >= SKEW:
        return _pick(
            ScheduleKind.MERGE_PATH,
            "R1",
            f"longest row {longest} >= {LONG_ROW} and {skew:.0f}x the mean {mean:.1f}",
        )
    if cv >= HIGH_CV:
        return _pick(ScheduleKind.MERGE_PATH, "R2", f"row-length cv {cv:.2f} >= {HIGH_CV}")
    if mean >= BLOCK_MEAN:
        return AutoChoice(
            ScheduleKind.GROUP_MAPPED,
            BLOCK_SPEC,
            {BLOCK_GROUP_PARAM: BLOCK_GROUP},
            "R3",
            f"mean row length {mean:.0f} >= {BLOCK_MEAN:.0f}: a block of {BLOCK_GROUP} lanes a row",
        )
    if mean >= WARP_MEAN:
        return AutoChoice(
            ScheduleKind.GROUP_MAPPED,
            SPEC_FOR[ScheduleKind.GROUP_MAPPED],
            {WARP_GROUP_PARAM: 32},
            "R4",
            f"mean row length {mean:.1f} >= {WARP_MEAN:.0f}: one warp a row",
        )
    if mean >= SUBWARP_MEAN:
        group = min(MAX_SUBWARP, _pow2_floor(mean))
        return AutoChoice(
            ScheduleKind.GROUP_MAPPED,
            SPEC_FOR[ScheduleKind.GROUP_MAPPED],
            {WARP_GROUP_PARAM: group},
            "R5",
            f"mean row length {mean:.1f}: {group} lanes a row",
        )
    return _pick(ScheduleKind.THREAD_MAPPED, "R6", f"mean row length {mean:.1f} < {SUBWARP_MEAN}")


def _pick(kind: ScheduleKind, rule: str, reason: str) -> AutoChoice:
    return AutoChoice(kind, SPEC_FOR[kind], {}, rule, reason)


def _pow2_floor(value: float) -> int:
    """The largest power of two <= value (1 for value < 2)."""
    n = 1
    while n * 2 <= value:
        n *= 2
    return n


def library_dir() -> Path:
    """The folder of our spec library: packaged ``teaal_loops/specs`` first, then the checkout."""
    package_root = Path(__file__).resolve().parent
    for candidate in (package_root / "specs", package_root.parent / "specs"):
        if (candidate / "thread_mapped.yaml").is_file():
            return candidate
    raise TeaalLoopsError(
        f"the spec library (thread_mapped.yaml, ...) was not found under {package_root} or its "
        "parent; schedule auto needs it"
    )


def spec_path(choice: AutoChoice) -> Path:
    """The library spec file that realises ``choice``."""
    return library_dir() / f"{choice.spec}.yaml"


def is_auto(spec: Any) -> bool:
    """True when a parsed spec asks for ``x-teaal-loops: {schedule: auto}``."""
    ext = getattr(spec, "extensions", None)
    return bool(ext is not None and getattr(ext, "schedule", None) == "auto")


def matrix_stats(A: Any) -> Any:
    """Row statistics of ``A``: on the GPU for CuPy / cupyx matrices, else on the host.

    Returns a :class:`teaal_loops.matrix.stats.RowStats`. Only the row offsets are read.
    """
    module = type(A).__module__ or ""
    if module.startswith(("cupy", "cupyx")):
        import cupy

        csr = A if getattr(A, "format", None) == "csr" else A.tocsr()
        return device_row_stats(cupy, csr.indptr, int(csr.shape[1]))
    from teaal_loops.matrix.stats import row_stats

    return row_stats(A)


def device_row_stats(cp: Any, indptr: Any, cols: int) -> Any:
    """:class:`~teaal_loops.matrix.stats.RowStats` from CSR row offsets held by array module
    ``cp`` (CuPy on the device; NumPy works too), with a handful of reductions."""
    from teaal_loops.matrix.stats import RowStats

    rows = len(indptr) - 1
    if rows <= 0:
        return RowStats(0, cols, 0, 0.0, 0, 0, 0.0, 0.0, 0, 0.0, 0.0, 0.0)
    lengths = cp.diff(indptr.astype(cp.int64)).astype(cp.float64)
    nnz = int(indptr[-1])
    mean = nnz / rows
    std = float(lengths.std())
    quantiles = cp.percentile(lengths, cp.asarray([50.0, 90.0, 99.0]))
    p50, p90, p99 = (float(v) for v in quantiles)
    return RowStats(
        rows=rows,
        cols=cols,
        nnz=nnz,
        mean=mean,
        max=int(lengths.max()),
        min=int(lengths.min()),
        std=std,
        cv=std / mean if mean else 0.0,
        empty_rows=int(cp.count_nonzero(lengths == 0)),
        p50=p50,
        p90=p90,
        p99=p99,
    )


def resolve(spec: Any, A: Any, device: DeviceInfo | None = None) -> tuple[Path, AutoChoice]:
    """For a spec with ``schedule: auto``: the library spec file and the choice for matrix ``A``.

    The caller compiles ``spec_path`` with ``choice.params`` (plus the user's own bindings of
    parameters that spec has). A spec that does not ask for auto is a TeaalLoopsError.
    """
    if not is_auto(spec):
        raise TeaalLoopsError("resolve(): the spec does not say x-teaal-loops: {schedule: auto}")
    choice = choose(matrix_stats(A), device)
    return spec_path(choice), choice
