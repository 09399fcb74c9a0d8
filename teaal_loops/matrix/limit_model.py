"""A limit model of CSR SpMV on one matrix: how fast any kernel could be, and why.

Two floors, each a time a kernel cannot beat:

* **DRAM:** the compulsory bytes (every value and column index once, the row offsets once,
  ``x`` and ``y`` once: :func:`compulsory_bytes`) over the measured device-to-device copy
  bandwidth (read plus written, over time);
* **L2:** the gathers of ``x``. Each nonzero reads ``x[col]``, a 4- or 8-byte load served by
  L2 in 32-byte sectors. Loads of one row by the lanes of a warp that fall in the same sector
  are one request, so a row costs at least as many sector requests as the distinct sectors its
  columns fall in (:func:`x_gather_sectors`); those sectors over the measured L2 bandwidth is
  the second floor. It binds on random-access matrices (uniform, R-MAT, power-law), where a
  4-byte load brings a 32-byte sector: DRAM bytes say the kernel could be 4x faster than the
  L2 lets it.

The model's limit is the larger floor. Where the gathered operand (x, B) is larger than L2,
uniformly random gathers miss L2 roughly in proportion (1 - L2 / operand size) and those
misses go to DRAM: the model adds an *estimate* with that traffic (not a floor). Bench
reports and ``explain`` show each kernel's (and cuSPARSE's) time over it: 1.0 would be a
kernel at the limit. The bandwidths are measured by the benchmarks on the GPU
(``teaal_loops.bench``); without a measurement, ``explain`` uses the nominal figures below
and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
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

    @property
    def miss_fraction(self) -> float:
        """An estimate, not a floor: the share of gathers that miss L2 when uniformly random
        gathers from an operand larger than L2 hit in proportion to L2 / operand size."""
        if self.gathered_bytes <= self.l2_bytes:
            return 0.0
        return 1.0 - self.l2_bytes / self.gathered_bytes

    @property
    def estimate_us(self) -> float:
        """The limit with the missed gathers added to DRAM's traffic (an estimate)."""
        missed = self.sector_bytes * self.miss_fraction
        return max(self.limit_us, (self.compulsory_bytes + missed) / (self.copy_gbps * 1e3))

    @property
    def dram_us(self) -> float:
        return self.compulsory_bytes / (self.copy_gbps * 1e3)

    @property
    def l2_us(self) -> float:
        return self.sector_bytes / (self.l2_gbps * 1e3)

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
            "copy_gbps": self.copy_gbps,
            "l2_gbps": self.l2_gbps,
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


def x_gather_sectors(indptr: Any, indices: Any, value_bytes: int) -> int:
    """Distinct 32-byte sectors of ``x`` each row's columns fall in, summed over the rows."""
    ptr = np.asarray(indptr, dtype=np.int64)
    if len(ptr) < 2 or ptr[-1] == 0:
        return 0
    per_sector = SECTOR_BYTES // value_bytes
    sector = np.asarray(indices, dtype=np.int64)[: ptr[-1]] // per_sector
    row = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
    # distinct (row, sector) pairs: sort the pairs, count changes
    key = row * (int(sector.max()) + 1) + sector
    key.sort()
    return int(1 + np.count_nonzero(np.diff(key)))


def x_gather_sectors_sorted(xp: Any, indptr: Any, indices: Any, value_bytes: int) -> int:
    """:func:`x_gather_sectors` for rows whose indices are sorted (canonical CSR), in one pass
    and in the arrays' own module ``xp`` (NumPy, or CuPy for a matrix on the device): a row's
    sector count is 1 plus the number of times its sector changes."""
    nnz = int(indptr[-1]) if len(indptr) > 1 else 0
    if nnz == 0:
        return 0
    sector = indices[:nnz].astype(xp.int64) // (SECTOR_BYTES // value_bytes)
    starts = xp.zeros(nnz, dtype=bool)
    nonempty = indptr[:-1][indptr[1:] > indptr[:-1]]
    starts[nonempty] = True
    changes = xp.zeros(nnz, dtype=bool)
    changes[1:] = sector[1:] != sector[:-1]
    if bool(xp.any((indices[1:nnz] < indices[: nnz - 1]) & ~starts[1:])):
        raise ValueError("the rows' column indices are not sorted: sectors not counted")
    return int(xp.count_nonzero(starts | changes))


def spmv_limits(rows: int, cols: int, sectors: int, nnz: int, value_bytes: int,
                offset_bytes: int, *, copy_gbps: float | None, l2_gbps: float | None) -> Limits:
    """:func:`limits` from counts already taken (the benchmarks count on the device)."""
    return Limits(
        compulsory_bytes=compulsory_bytes(rows, cols, nnz, value_bytes, offset_bytes),
        sector_bytes=sectors * SECTOR_BYTES,
        copy_gbps=float(copy_gbps or NOMINAL_COPY_GBPS),
        l2_gbps=float(l2_gbps or NOMINAL_L2_GBPS),
        measured=copy_gbps is not None and l2_gbps is not None,
        gathered_bytes=cols * value_bytes,
    )


def limits(A: Any, dtype: Any = "float32", *, copy_gbps: float | None = None,
           l2_gbps: float | None = None, offset_bytes: int = 4) -> Limits:
    """The floors of SciPy CSR matrix ``A`` (module docstring); bandwidths default to the
    nominal figures (``measured`` False)."""
    value = int(np.dtype(dtype).itemsize)
    rows, cols = (int(n) for n in A.shape)
    nnz = int(A.indptr[-1]) if rows else 0
    measured = copy_gbps is not None and l2_gbps is not None
    return Limits(
        compulsory_bytes=compulsory_bytes(rows, cols, nnz, value, offset_bytes),
        sector_bytes=x_gather_sectors(A.indptr, A.indices, value) * SECTOR_BYTES,
        copy_gbps=float(copy_gbps or NOMINAL_COPY_GBPS),
        l2_gbps=float(l2_gbps or NOMINAL_L2_GBPS),
        measured=measured,
        gathered_bytes=cols * value,
    )


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
    return [
        f"limit:     {lim.limit_us:.3g} us ({what}), bound by {lim.bound_by}: DRAM "
        f"{lim.compulsory_bytes / 1e6:.2f} MB / {lim.copy_gbps:.0f} GB/s = {lim.dram_us:.3g} us; "
        f"{gathers} {lim.sector_bytes / 1e6:.2f} MB of 32-byte sectors / {lim.l2_gbps:.0f} GB/s "
        f"L2 = {lim.l2_us:.3g} us ({source})",
        *([f"estimate:  {lim.estimate_us:.3g} us if gathers miss L2 in proportion to its size "
           f"({lim.miss_fraction:.0%} of them: the gathered operand is "
           f"{lim.gathered_bytes / 2**20:.0f} MiB, L2 {lim.l2_bytes / 2**20:.0f} MiB)"]
          if lim.miss_fraction else []),
    ]
