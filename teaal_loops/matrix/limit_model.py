"""A limit model of CSR SpMV on one matrix: how fast any kernel could be, and why.

Two floors, each a time a kernel cannot beat at the rates this GPU was measured to reach:

* **DRAM:** the compulsory bytes (every value and column index once, the row offsets once,
  ``x`` and ``y`` once: :func:`compulsory_bytes`) over the measured device-to-device copy
  bandwidth (read plus written, over time);
* **L2:** the gathers of ``x``. Each nonzero reads ``x[col]``, a 4- or 8-byte load served by
  L2 in 32-byte sectors. Loads of one row by the lanes of a warp that fall in the same sector
  are one request, so a row costs at least as many sector requests as the distinct sectors its
  columns fall in (:func:`x_gather_counts`). L2 serves scattered one-sector requests more
  slowly than it streams: on an H100 random 32-byte gathers from an L2-resident buffer run at
  4.3 TB/s of sectors against 6.9 TB/s for coalesced 16-byte reads (BENCHMARKS.md). A row's
  sectors fall in runs of consecutive sectors (:class:`SectorCounts`): the first sector of a
  run is a scattered request, the rest of the run is read like a stream. So the floor divides
  the runs' first sectors by the rate at which L2 served random sectors from a resident buffer
  of x's size (at most :data:`RESIDENT_BYTES`; :class:`GatherCurve`) and the rest by the L2
  read bandwidth. The dense forms (SpMM's rows of B, SDDMM's rows of A and B) count sectors but
  not runs, so every one of their sectors goes at the read bandwidth: charging neighbouring
  rows of B as scattered requests would put the floor of a banded SpMM above its kernels.

The model's limit is the larger floor. Gathers from an operand that L2 cannot hold are slower
still, and the measured curve says by how much: the random-gather rate falls once the buffer
passes about 40% of L2 (H100: 133 G gathers/s up to 16 MiB, 98 at 32 MiB, 54 at 64 MiB, of a
50 MiB L2). The model's *estimate* (not a floor) divides the sectors by the rate measured at
the operand's own size, which is how uniformly random columns behave; skewed columns (R-MAT,
power-law graphs), whose hot part stays in L2, run faster than it. Without a curve the estimate
adds the gathers that miss L2 in proportion to its size to DRAM's traffic. Bench reports and
``explain`` show each kernel's (and cuSPARSE's) time over the limit: 1.0 would be a kernel at
it. The rates are measured by the benchmarks on the GPU (``teaal_loops.bench.l2_probe``, the
copy probe); without a measurement ``explain`` uses the H100 figures below and says so.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SECTOR_BYTES = 32
INDEX_BYTES = 4  # int32 column indices
# The copy rate was measured on this project's H100 machines (device-to-device, read plus
# written); the L2 figure is an assumption in the range public microbenchmarks report for the
# H100's L2 read bandwidth (about 5.5 to 7.5 TB/s). Both are replaced by the benchmarks' own
# measurements (teaal_loops.bench.l2_probe, the copy probe) wherever a GPU is present.
NOMINAL_COPY_GBPS = 2937.0
NOMINAL_L2_GBPS = 7000.0
NOMINAL_L2_BYTES = 50 * 2**20  # the H100's L2
# Gathers from an operand of at most this many bytes are taken to be L2-resident for the floor
# (the random-gather rate is flat from 4 to 16 MiB on the H100 and the H200; smaller buffers
# are partly held by L1, which the floor grants only to operands that small).
RESIDENT_BYTES = 8 * 2**20
# Random 32-byte gathers by buffer size (bytes, GB/s of sectors), measured on an NVIDIA H100
# 80GB HBM3 (`nvidia-h100-x1`, 2026-11-24, the probe of teaal_loops.bench.l2_probe): what
# ``explain`` assumes without a GPU.
NOMINAL_GATHER_CURVE = (
    (1 << 20, 4613.0), (2 << 20, 4404.0), (4 << 20, 4299.0), (8 << 20, 4278.0),
    (16 << 20, 4265.0), (32 << 20, 3152.0), (64 << 20, 1713.0), (128 << 20, 1282.0),
)


@dataclass(frozen=True)
class GatherCurve:
    """The rate of random one-sector gathers (GB/s of 32-byte sectors) by the size of the
    buffer gathered from, measured at a few sizes; between them the rate is interpolated in
    log2 of the size, beyond them it is the nearest measurement."""

    points: tuple[tuple[int, float], ...]

    def __post_init__(self) -> None:
        points = tuple(sorted(self.points))
        sizes = {b for b, _ in points}
        positive = all(b > 0 and r > 0 for b, r in points)  # (r > 0 is False for NaN)
        if not points or not positive or len(sizes) < len(points):
            raise ValueError(f"a gather curve needs distinct positive sizes and positive "
                             f"rates: {self.points}")
        object.__setattr__(self, "points", points)

    @classmethod
    def of(cls, points: Sequence[Sequence[float]] | None) -> GatherCurve | None:
        """The curve of ``[[bytes, gbps], ...]`` (a results document's), or None."""
        if not points:
            return None
        return cls(tuple((int(b), float(r)) for b, r in points))

    def gbps(self, nbytes: int) -> float:
        pts = self.points
        if nbytes <= pts[0][0]:
            return pts[0][1]
        for (b0, r0), (b1, r1) in itertools.pairwise(pts):
            if nbytes <= b1:
                t = (math.log2(nbytes) - math.log2(b0)) / (math.log2(b1) - math.log2(b0))
                return r0 + t * (r1 - r0)
        return pts[-1][1]

    def as_list(self) -> list[list[float]]:
        return [[b, r] for b, r in self.points]


NOMINAL_GATHERS = GatherCurve(NOMINAL_GATHER_CURVE)


@dataclass(frozen=True)
class Limits:
    """The floors of one matrix and dtype, and the bandwidths they assume."""

    compulsory_bytes: int
    sector_bytes: int  # x gathers: distinct 32-byte sectors per row, summed, times 32
    copy_gbps: float
    l2_gbps: float
    measured: bool  # False: the nominal bandwidths
    gathered_bytes: int = 0  # the operand the gathers read (x, B, the dense factors)
    l2_bytes: int = NOMINAL_L2_BYTES
    # random one-sector gathers by buffer size (SpMV's x); None: every sector at the L2 read
    # rate (not measured on this GPU, or a dense form, whose runs are not counted)
    gathers: GatherCurve | None = field(default=None, compare=False)
    # the gathered sectors that continue a run of consecutive sectors in their row (read like
    # a stream, at the L2 read rate); the rest are scattered requests (SectorCounts)
    run_bytes: int = 0

    @property
    def scattered_bytes(self) -> int:
        """Sector bytes requested one scattered sector at a time: a run's first sectors."""
        return self.sector_bytes - self.run_bytes

    @property
    def miss_fraction(self) -> float:
        """Without a gather curve, the share of gathers that miss L2 if uniformly random
        gathers from an operand larger than L2 hit in proportion to L2 / operand size."""
        if self.gathers is not None or self.gathered_bytes <= self.l2_bytes:
            return 0.0
        return 1.0 - self.l2_bytes / self.gathered_bytes

    @property
    def gather_gbps(self) -> float:
        """The rate the L2 floor divides the sectors by: random gathers from a resident buffer
        of the operand's size (module docstring), else the L2 read bandwidth. An operand
        smaller than the smallest buffer measured gets the read bandwidth too: L1 may serve
        much of its gathers, faster than any L2 rate."""
        curve = self.gathers
        if curve is None or self.gathered_bytes < curve.points[0][0]:
            return self.l2_gbps
        return curve.gbps(min(self.gathered_bytes, RESIDENT_BYTES))

    @property
    def estimate_us(self) -> float:
        """An estimate, not a floor: with a gather curve, the sectors at the rate measured for
        a buffer of the operand's size; without one, the gathers that miss L2 added to DRAM's
        traffic."""
        if self.gathers is not None:
            if self.gathered_bytes <= RESIDENT_BYTES:
                return self.limit_us  # the floor already took the rate at this size
            at_size = (self.scattered_bytes / (self.gathers.gbps(self.gathered_bytes) * 1e3)
                       + self.run_bytes / (self.l2_gbps * 1e3))
            return max(self.limit_us, at_size)
        missed = self.sector_bytes * self.miss_fraction
        return max(self.limit_us, (self.compulsory_bytes + missed) / (self.copy_gbps * 1e3))

    @property
    def dram_us(self) -> float:
        return self.compulsory_bytes / (self.copy_gbps * 1e3)

    @property
    def l2_us(self) -> float:
        """Scattered sectors at :attr:`gather_gbps`, the rest of each run at the read rate."""
        return (self.scattered_bytes / (self.gather_gbps * 1e3)
                + self.run_bytes / (self.l2_gbps * 1e3))

    @property
    def limit_us(self) -> float:
        return max(self.dram_us, self.l2_us)

    @property
    def bound_by(self) -> str:
        return "L2 (gathers)" if self.l2_us > self.dram_us else "DRAM (compulsory bytes)"

    def closeness(self, us: float) -> float:
        """How close a kernel of ``us`` microseconds comes to the limit (1.0: at it)."""
        return self.limit_us / us if us > 0 else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {
            "compulsory_bytes": self.compulsory_bytes,
            "x_sector_bytes": self.sector_bytes,
            "x_run_bytes": self.run_bytes,
            "copy_gbps": self.copy_gbps,
            "l2_gbps": self.l2_gbps,
            "gather_gbps": self.gather_gbps,
            "gather_curve": self.gathers.as_list() if self.gathers is not None else None,
            "bandwidths_measured": self.measured,
            "dram_us": self.dram_us,
            "l2_us": self.l2_us,
            "limit_us": self.limit_us,
            "bound_by": self.bound_by,
            "gathered_bytes": self.gathered_bytes,
            "l2_miss_fraction_estimate": self.miss_fraction,
            "estimate_us": self.estimate_us,
        }


def compulsory_bytes(rows: int, cols: int, nnz: int, value_bytes: int,
                     offset_bytes: int = 4) -> int:
    """``nnz*(value+index) + (rows+1)*offset + cols*value + rows*value``."""
    return (nnz * (value_bytes + INDEX_BYTES) + (rows + 1) * offset_bytes
            + cols * value_bytes + rows * value_bytes)


@dataclass(frozen=True)
class SectorCounts:
    """The x sectors a matrix's rows gather: ``sectors`` distinct (row, sector) pairs, and
    ``runs``, the maximal stretches of consecutive sectors among them (a row whose columns
    fill sectors 3, 4, 5 and 9 has 4 sectors in 2 runs). A run's first sector is a scattered
    request; the rest of a run is read like a stream."""

    sectors: int
    runs: int


def x_gather_counts(indptr: Any, indices: Any, value_bytes: int) -> SectorCounts:
    """:class:`SectorCounts` of a CSR matrix's rows, columns in any order (on the host)."""
    ptr = np.asarray(indptr, dtype=np.int64)
    if len(ptr) < 2 or ptr[-1] == 0:
        return SectorCounts(0, 0)
    per_sector = SECTOR_BYTES // value_bytes
    sector = np.asarray(indices, dtype=np.int64)[: ptr[-1]] // per_sector
    row = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
    # distinct (row, sector) pairs, sorted; a run breaks at a new row or a skipped sector
    width = int(sector.max()) + 1
    key = np.unique(row * width + sector)
    key_row, key_sector = key // width, key % width
    breaks = (key_row[1:] != key_row[:-1]) | (key_sector[1:] != key_sector[:-1] + 1)
    return SectorCounts(int(key.size), int(1 + np.count_nonzero(breaks)))


def x_gather_sectors(indptr: Any, indices: Any, value_bytes: int) -> int:
    """Distinct 32-byte sectors of ``x`` each row's columns fall in, summed over the rows."""
    return x_gather_counts(indptr, indices, value_bytes).sectors


def x_gather_counts_sorted(xp: Any, indptr: Any, indices: Any,
                           value_bytes: int) -> SectorCounts:
    """:func:`x_gather_counts` for rows whose indices are sorted (canonical CSR), in one pass
    and in the arrays' own module ``xp`` (NumPy, or CuPy for a matrix on the device): a row's
    sector count is 1 plus the number of times its sector changes, its run count 1 plus the
    number of times it skips a sector."""
    nnz = int(indptr[-1]) if len(indptr) > 1 else 0
    if nnz == 0:
        return SectorCounts(0, 0)
    sector = indices[:nnz].astype(xp.int64) // (SECTOR_BYTES // value_bytes)
    starts = xp.zeros(nnz, dtype=bool)
    nonempty = indptr[:-1][indptr[1:] > indptr[:-1]]
    starts[nonempty] = True
    if bool(xp.any((indices[1:nnz] < indices[: nnz - 1]) & ~starts[1:])):
        raise ValueError("the rows' column indices are not sorted: sectors not counted")
    step = xp.zeros(nnz, dtype=xp.int64)
    step[1:] = sector[1:] - sector[:-1]
    return SectorCounts(int(xp.count_nonzero(starts | (step != 0))),
                        int(xp.count_nonzero(starts | (step > 1))))


def x_gather_sectors_sorted(xp: Any, indptr: Any, indices: Any, value_bytes: int) -> int:
    """:func:`x_gather_sectors` for rows whose indices are sorted (canonical CSR)."""
    return x_gather_counts_sorted(xp, indptr, indices, value_bytes).sectors


def spmv_limits(rows: int, cols: int, counts: SectorCounts, nnz: int, value_bytes: int,
                offset_bytes: int, *, copy_gbps: float | None, l2_gbps: float | None,
                gathers: GatherCurve | None = None) -> Limits:
    """:func:`limits` from counts already taken (the benchmarks count on the device). The
    nominal curve stands in only where nothing was measured, so that measured copy and L2
    rates are never mixed with another GPU's curve."""
    measured = copy_gbps is not None and l2_gbps is not None
    return Limits(
        compulsory_bytes=compulsory_bytes(rows, cols, nnz, value_bytes, offset_bytes),
        sector_bytes=counts.sectors * SECTOR_BYTES,
        run_bytes=(counts.sectors - counts.runs) * SECTOR_BYTES,
        copy_gbps=float(copy_gbps or NOMINAL_COPY_GBPS),
        l2_gbps=float(l2_gbps or NOMINAL_L2_GBPS),
        measured=measured,
        gathered_bytes=cols * value_bytes,
        gathers=gathers if gathers is not None or measured else NOMINAL_GATHERS,
    )


def limits(A: Any, dtype: Any = "float32", *, copy_gbps: float | None = None,
           l2_gbps: float | None = None, offset_bytes: int = 4,
           gathers: GatherCurve | None = None) -> Limits:
    """The floors of SciPy CSR matrix ``A`` (module docstring); rates default to the nominal
    figures (``measured`` False)."""
    value = int(np.dtype(dtype).itemsize)
    rows, cols = (int(n) for n in A.shape)
    nnz = int(A.indptr[-1]) if rows else 0
    counts = x_gather_counts(A.indptr, A.indices, value)
    return spmv_limits(rows, cols, counts, nnz, value, offset_bytes, copy_gbps=copy_gbps,
                       l2_gbps=l2_gbps, gathers=gathers)


def _sectors(nbytes: int) -> int:
    return -(-nbytes // SECTOR_BYTES)


def dense_row_sectors(indptr: Any, indices: Any, width: int, value_bytes: int,
                      xp: Any = None) -> int:
    """Sectors the gathers of dense rows ``indices`` (each ``width`` elements, row-major) cost,
    distinct per sparse row: exact where rows are narrower than a sector, else one aligned
    row's sectors per nonzero. ``xp``: the arrays' module where they are sorted canonical CSR
    (CuPy for a matrix on the device: counted there); None: any order, on the host."""
    nnz = int(indptr[-1]) if len(indptr) > 1 else 0
    row_bytes = width * value_bytes
    if nnz == 0:
        return 0
    if row_bytes >= SECTOR_BYTES:
        return nnz * _sectors(row_bytes)
    # several dense rows share a sector: count distinct (row, sector) of the rows' first bytes
    if xp is not None:
        first = indices[:nnz].astype(xp.int64) * (row_bytes // value_bytes)
        return x_gather_sectors_sorted(xp, indptr, first, value_bytes)
    first = np.asarray(indices, dtype=np.int64)[:nnz] * row_bytes // value_bytes
    return x_gather_sectors(np.asarray(indptr, dtype=np.int64), first, value_bytes)


def spmm_limits(A: Any, width: int, dtype: Any = "float32", *, copy_gbps: float | None = None,
                l2_gbps: float | None = None, offset_bytes: int = 4, xp: Any = None) -> Limits:
    """SpMM ``Z = A @ B`` with ``width`` columns: DRAM moves A once, B once and Z once; every
    nonzero gathers a row of B (row-major) through L2 (``xp``: :func:`dense_row_sectors`)."""
    value = int(np.dtype(dtype).itemsize)
    rows, cols = (int(n) for n in A.shape)
    nnz = int(A.indptr[-1]) if rows else 0
    compulsory = (nnz * (value + INDEX_BYTES) + (rows + 1) * offset_bytes
                  + (cols + rows) * width * value)
    return Limits(
        compulsory_bytes=compulsory,
        sector_bytes=dense_row_sectors(A.indptr, A.indices, width, value, xp) * SECTOR_BYTES,
        copy_gbps=float(copy_gbps or NOMINAL_COPY_GBPS),
        l2_gbps=float(l2_gbps or NOMINAL_L2_GBPS),
        measured=copy_gbps is not None and l2_gbps is not None,
        gathered_bytes=cols * width * value,
    )


def sddmm_limits(C: Any, depth: int, dtype: Any = "float32", *, copy_gbps: float | None = None,
                 l2_gbps: float | None = None, offset_bytes: int = 4) -> Limits:
    """SDDMM with ``depth`` (K): DRAM moves C (values, indices, offsets), both dense factors
    and the output values once; every nonzero gathers its column of B (stored [N, K]) and each
    row reads its row of A, through L2."""
    value = int(np.dtype(dtype).itemsize)
    rows, cols = (int(n) for n in C.shape)
    nnz = int(C.indptr[-1]) if rows else 0
    compulsory = (nnz * (2 * value + INDEX_BYTES) + (rows + 1) * offset_bytes
                  + (rows + cols) * depth * value)
    row_sectors = _sectors(depth * value)
    return Limits(
        compulsory_bytes=compulsory,
        sector_bytes=(nnz + rows) * row_sectors * SECTOR_BYTES,
        copy_gbps=float(copy_gbps or NOMINAL_COPY_GBPS),
        l2_gbps=float(l2_gbps or NOMINAL_L2_GBPS),
        measured=copy_gbps is not None and l2_gbps is not None,
        gathered_bytes=cols * depth * value,
    )


def limit_lines(lim: Limits, what: str = "float32 SpMV") -> list[str]:
    """``explain``'s lines for the model."""
    source = "measured" if lim.measured else "nominal H100 figures, not measured here"
    gathers = "x gathers" if what.endswith("SpMV") else "dense-row gathers"
    random = lim.gathers is not None and lim.gather_gbps != lim.l2_gbps
    if random:
        rate = (f": {lim.scattered_bytes / 1e6:.2f} MB scattered / {lim.gather_gbps:.0f} GB/s of "
                f"random sector gathers from L2, {lim.run_bytes / 1e6:.2f} MB in runs / "
                f"{lim.l2_gbps:.0f} GB/s of L2 reads")
    else:
        rate = f"/ {lim.gather_gbps:.0f} GB/s of L2 reads"
    lines = [
        f"limit:     {lim.limit_us:.3g} us ({what}), bound by {lim.bound_by}: DRAM "
        f"{lim.compulsory_bytes / 1e6:.2f} MB / {lim.copy_gbps:.0f} GB/s = {lim.dram_us:.3g} us; "
        f"{gathers} {lim.sector_bytes / 1e6:.2f} MB of 32-byte sectors {rate} = "
        f"{lim.l2_us:.3g} us ({source})",
    ]
    size = f"{lim.gathered_bytes / 2**20:.3g} MiB"
    if lim.gathers is not None and lim.estimate_us > lim.limit_us:
        lines.append(
            f"estimate:  {lim.estimate_us:.3g} us if the columns are uniformly random: gathers "
            f"from an operand of {size} ran at {lim.gathers.gbps(lim.gathered_bytes):.0f} GB/s "
            f"(skewed columns, whose hot part stays in L2, run faster)")
    elif lim.miss_fraction:
        lines.append(
            f"estimate:  {lim.estimate_us:.3g} us if gathers miss L2 in proportion to its size "
            f"({lim.miss_fraction:.0%} of them: the gathered operand is {size}, L2 "
            f"{lim.l2_bytes / 2**20:.0f} MiB)")
    return lines
