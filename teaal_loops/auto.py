"""``auto``: choose a schedule and its parameters from cheap matrix statistics.

Selected by ``x-teaal-loops: {schedule: auto}`` in a spec or ``--schedule auto`` on the command
line. :func:`choose` is a pure function of row-length statistics (rows, nnz, mean / max / cv of
the row lengths; all computable in one pass over the row offsets) and of the device's resident
thread count, plus, for rule T3 alone (large matrices whose x passes ``PANEL_X_BYTES``), two
shares of their column indices; it never reads values and never times anything.

The answer names one spec of our library (``specs/<spec>.yaml``) plus parameter bindings for it,
so the chosen kernel is an ordinary generated kernel of an ordinary spec: ``explain`` and the
trace tests apply to it unchanged.

Two regimes, split at ``THROUGHPUT_WAVES`` waves of nonzeros (nnz >= that many times the
device's resident threads, ~8.6M nonzeros on an H100/H200):

**Latency regime** (small and medium matrices, a few microseconds a launch). The time of a
launch is a few waves of threads plus the critical path of the slowest worker, so every
candidate gets a cost and the cheapest wins:

* group-mapped with ``G`` lanes a row (``G = 1`` is thread-mapped; 2..32 a (sub)warp; 128, 256,
  512 a thread block): ``CW * max(rows*G / resident, MIN_WAVES) + CI * ceil(max_row / G)``
  ``(+ CB for a block group's shared-memory reduction, - CT for thread-mapped, which reduces
  nothing)``;
* merge-path (equal shares of row ends plus nonzeros, split rows combined in the block, y
  zeroed first; ``FLAT_WORK`` items a thread, past ``FLAT_LARGE_NNZ`` nonzeros merge-path's
  default of 8, and ``FLAT_WORK_LARGE`` past its 2M merge items, :func:`_flat_choice`):
  ``CF0 + CFS * log2(rows) + CFW * nnz / resident`` (the zeroing, the tile search, the
  streaming). This candidate was work-oriented until merge-path's staged kernel beat it on
  every skewed matrix (H200, the tuning run recorded in BENCHMARKS.md).

**Throughput regime** (large matrices, bandwidth-bound):

* skewed rows (``cv >= HIGH_CV``, or a longest row ``>= LONG_ROW`` and ``>= SKEW`` x the mean):
  ``T1``, merge-path. A warp a row waits on the longest row (R-MAT scale 23: 0.49x
  cuSPARSE), work-oriented's chunks do not coalesce (longrows: 0.24x); staged merge-path
  reached 0.91x on both in the same H200 run. Items a thread: ``LARGE_ITEMS_MAX`` where the
  row of a typical nonzero reads ``x`` nearly in sequence (:func:`reads_x_in_sequence`: its
  columns on average at most :data:`SEQUENTIAL_GAP_BYTES` of ``x`` apart), else
  ``LARGE_ITEMS_MIN``. Scattered gathers of ``x`` bound the walk, and small tiles win there
  (more of L1 left to ``x``); a walk along ``x`` is bound by its instructions, which long
  chunks amortise (BENCHMARKS.md, "merge-path's items on skewed rows");
* otherwise (``T2``) group-mapped with about ``LANE_WORK`` nonzeros a lane (``G`` = the power of
  two nearest below ``mean / LANE_WORK``, a block group past 32 lanes, up to 512), but at least
  ``MIN_LARGE_GROUP`` lanes for rows of ``2 * LANE_WORK`` or more.

In both regimes merge-path's items a thread are then capped at what its staged tile holds for
the kernel's values (:func:`staged_merge_items`: 32 in float32, 16 in float64): past it the
chunks fall to the direct walk.

**Column panels** (rule ``T3``, large matrices only, and only where the caller leaves the layout
to auto): where ``x`` is larger than :data:`PANEL_X_BYTES`, at least :data:`PANEL_COLD_SHARE`
of the nonzeros fall outside ``x``'s hottest 8 MiB of columns (random access that the L2 cannot
hold) and at least :data:`PANEL_FAR_SHARE` lie away from the diagonal (a band's window stays
in L2), merge-path runs
over ``panels:P``, P = ``ceil(x bytes / PANEL_SLICE_BYTES)``, with about a mean row of a
panel of items a thread (8 to 16; :func:`panel_choice`). This is
the one rule that reads column indices (:func:`column_stats`: a column histogram and each
nonzero's distance from the diagonal, :mod:`teaal_loops.matrix.columns`), and only past the
first size test.

float32 and float64 have constants of their own (:func:`constants` takes the value size):
float64 moves twice the bytes a nonzero, so the same rules with float32's constants picked
groups up to 1.37x slower than the best in float64 runs (wiki-Vote, ca-AstroPh; BENCHMARKS.md).

Rules are labelled in :attr:`AutoChoice.rule`: ``R0`` (no nonzeros), ``L`` (latency-regime cost
model), ``T1`` (skewed, large), ``T2`` (regular, large). A group is never chosen
whose ``rows * G`` threads would exceed 2**31 - 1 (the kernels' 32-bit thread index).

The constants (the names above) live in ``teaal_loops/auto_constants.json``, a section per
dtype, and sections fitted on one GPU model used on that model alone (:func:`constants`),
shipped inside the package and read once (:func:`constant_sets`). ``teaal-loops bench
--fit-auto RESULTS.json ...`` refits the sections of the dtypes the results hold to their
measured device times and rewrites that file, with ``--per-device`` the sections of each GPU
the results name (:mod:`teaal_loops.bench.fit_auto` says how).
Only the ratios of the latency model's constants matter; their units are roughly microseconds,
and ``CW`` is held fixed as the unit.

History of the shipped values (BENCHMARKS.md has the runs, on an H200): the latency model was
fitted to the device times of every library variant on the corpus in float64 (run 1) and then
held within 10% of the best on 77 of 78 corpus cases of two later runs (float32 and float64);
``CT`` was added after them. After the kernels were tuned (staged merge-path, unrolled group
loads, streaming loads), run 3 gave 26 of 30; from its measured times ``CI`` went from 0.25 to
0.2, ``LANE_WORK`` from 8 to 4 and ``MIN_LARGE_GROUP`` from 4 to 8, and the skewed rule takes
the power of two nearest the mean row (longrows' mean of 31.99 wants 32). Run 4 confirmed them:
30 of 30 within 10% (``BENCHMARKS.json.gz``). Those are float32's constants. float64's were
fitted later to the float64 suites of an H100 (merge-path with its prepared partition) and an
H200 together: ``CI`` 0.25, ``CFS`` 0 and ``LANE_WORK`` 1 (BENCHMARKS.md, float64 constants).
Every run then had the H100 wanting 16 lanes a row on the banded float64 matrix and the H200
8, which one set cannot give both: the H200's own float64 set, fitted to its two float64
suites (``--per-device``), has ``FLAT_WORK`` 4, ``FLAT_LARGE_NNZ`` 500,000 and ``LANE_WORK`` 2
(in-sample 51 -> 56 of 60 within 5%; BENCHMARKS.md, per-GPU constants). Rule T1 took about a
mean row of items until ncu showed that the best chunk follows how a typical nonzero's row reads
``x`` (:func:`reads_x_in_sequence`): ``LARGE_ITEMS_MIN`` went from 16 to 4 in every set (rmat-s23
1.09x -> 1.00x its best variant on the H100 in float32, 1.07x -> 1.00x in float64).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from teaal_loops.errors import Location, TeaalLoopsError
from teaal_loops.matrix.columns import ColumnStats, column_stats_of
from teaal_loops.matrix.convert import as_csr
from teaal_loops.matrix.limit_model import RESIDENT_BYTES
from teaal_loops.matrix.stats import RowStats, row_stats
from teaal_loops.schedules.flat import DEFAULT_ITEMS_PER_THREAD
from teaal_loops.schedules.merge_path import MERGE_LARGE_ITEMS
from teaal_loops.types import DeviceInfo

INT32_MAX = 2**31 - 1
CONSTANTS_FILE = Path(__file__).resolve().parent / "auto_constants.json"
CONSTANTS_SCHEMA = "teaal-loops-auto-constants/2"
CONSTANTS_SCHEMA_V1 = "teaal-loops-auto-constants/1"  # one set for every dtype

GROUP_SIZES = (1, 2, 4, 8, 16, 32, 128, 256, 512)
THREAD_SPEC = "thread_mapped"
WARP_SPEC = "group_mapped"  # specs/group_mapped.yaml: K: [uniform_occupancy(A.BLOCK_SIZE)]
BLOCK_SPEC = "group_mapped_block"  # specs/group_mapped_block.yaml: uniform_occupancy(A.GROUP)
WARP_GROUP_PARAM = "BLOCK_SIZE"
BLOCK_GROUP_PARAM = "GROUP"
WORK_SPEC, WORK_PARAM = "work_oriented", "WORK_PER_THREAD"
MERGE_SPEC, MERGE_PARAM = "merge_path", "ITEMS_PER_THREAD"
MAX_MERGE_ITEMS = 32  # past this (f32) the staged merge-path tile overflows shared memory

# Column panels (rule T3; teaal_loops/layouts/panels.py). Measured on the large classes, merge-path
# (BENCHMARKS.md, "Column panels built"): x of 64 MiB (uniform float64) wants 3 panels on an H100
# and an H200 (2.04x and 1.63x the best cuSPARSE, CSR 0.96x and 0.94x); x of 32 MiB wants 2
# where its gathers are random (uniform float32 1.20x / 1.05x, longrows float64 1.38x / 1.06x)
# and none where R-MAT's hot columns serve most of them (0.90x / 0.91x against CSR's 0.92x /
# 0.93x); x of 16 MiB (longrows float32) loses 9 to 11% with panels.
PANEL_X_BYTES = 24 * 2**20  # x larger than this, past the L2's full-rate gather range
PANEL_SLICE_BYTES = 22 * 2**20  # ... is cut into panels of at most this much of x
# ... when this share of the nonzeros misses x's hottest 8 MiB, and this share lies away from
# the diagonal (a band's gathers stay in L2 whatever x's size). Shares of the large classes
# (float32 / float64, x of 32 / 64 MiB): cold where panels paid, uniform 0.67 / 0.82, power-law
# 0.49 / 0.64, longrows (x of 32 MiB) 0.70; cold where they lost, R-MAT 0.02 / 0.07; banded
# 0.75 / 0.87 cold but 0.00 far, the others 0.56 to 0.89 far. A first threshold of 0.5 for both
# left the float32 power-law graph (0.49) in CSR, 1.19x (H100) and 1.09x (H200) slower than
# over two panels.
PANEL_COLD_SHARE = 0.25
PANEL_FAR_SHARE = 0.5
PANEL_MAX = 8
# Merge-path's items a thread over panels: about a mean row of one panel (a row's nonzeros
# spread over the panels), clamped to 8..16. With the staged tile sized for its chunk, 8 items
# beat the default 16 on uniform, power-law and many-empty-rows over their panels (2 in float32,
# 3 in float64: 1.2% to 6.0% faster on an H100 and an H200), and 16 kept longrows' 32-nonzero
# rows over two float64 panels 5% to 12% faster than 8 (BENCHMARKS.md, "panels' items").
PANEL_ITEMS_MIN = 8
PANEL_ITEMS_MAX = 16
# Rule T1's split (reads_x_in_sequence). On an H100 in float32 (ncu; BENCHMARKS.md, "merge-path's
# items on skewed rows"): rmat-s23, whose nonzeros' rows are 3.4K of 8.4M columns long (a
# gather every 10 KB of x), is bound by L2 throughput (85-93% busy at 4 and 16 items) and 4 items
# win, as smaller tiles leave L1 to x (hit rate 16.6% against 9.4%); longrows, whose nonzeros
# mostly lie in rows of 943K sorted columns of 4.2M (one every 20 bytes of x), reads x along
# those rows, and 4 items run twice the instructions of 16 at half the memory throughput (0.58x
# cuSPARSE against 0.96x). One 128-byte line: a gap of 8 float32 or 16 float64 columns.
SEQUENTIAL_GAP_BYTES = 128


def staged_merge_items(value_bytes: int = 4, wide_offsets: bool = False) -> int:
    """The most items a thread that merge-path's staged tile holds: 128 bytes of slots a
    thread, a slot the larger of a value and an offset (``TEAAL_STAGED_IPT`` of
    templates/schedules/merge_path.cu.j2 for its blocks of 128 threads): 32 in float32, 16 in
    float64 or with 64-bit offsets. Longer shares walk the layout directly; in float64 that
    measured 1.9x to 3.9x slower than 16 items on the H100 and the H200 (BENCHMARKS.md), so auto
    never picks them."""
    slot = max(int(value_bytes), 8 if wide_offsets else 4)
    return min(MAX_MERGE_ITEMS, 128 // slot)


@dataclass(frozen=True)
class AutoConstants:
    """The fitted constants of :func:`choose` (module docstring; defaults: none, see the file)."""

    # Regime split: nnz at or above this many waves of resident threads is bandwidth-bound.
    THROUGHPUT_WAVES: float
    # Latency-regime cost model.
    CW: float  # one wave of threads (the unit: never refitted)
    CI: float  # one sequential step of the slowest lane (the critical path)
    CB: float  # a block group's barriers and shared-memory reduction
    MIN_WAVES: float  # a launch costs at least this much of a wave, however few threads
    CF0: float  # merge-path: zeroing y (a second launch) and fixed costs
    CFS: float  # ... one step of its per-thread binary search for the first row
    CFW: float  # ... one wave of nonzeros
    CT: float  # thread-mapped has no reduction across lanes
    FLAT_WORK: int  # merge items a thread in the latency regime
    FLAT_WORK_LARGE: int  # ... past FLAT_LARGE_NNZ nonzeros and merge-path's large shares
    FLAT_LARGE_NNZ: int
    # Throughput regime.
    HIGH_CV: float
    LONG_ROW: int
    SKEW: float
    LARGE_ITEMS_MIN: int  # merge items a thread for large skewed matrices whose x is gathered
    LARGE_ITEMS_MAX: int  # ... and whose typical nonzero's row reads x in sequence
    LANE_WORK: float  # nonzeros a lane for large regular matrices
    MIN_LARGE_GROUP: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def replace(self, **changes: float) -> AutoConstants:
        """A copy with some constants changed, checked like a loaded file."""
        return constants_from_mapping({**self.as_dict(), **changes}, "AutoConstants.replace")


# Cost terms may be zero; everything else must be positive. Integer constants must be integers.
_MAY_BE_ZERO = frozenset({"CB", "CT", "CFS", "CF0"})


def constants_from_mapping(values: Mapping[str, Any], where: str) -> AutoConstants:
    """:class:`AutoConstants` from a mapping, every name present, typed and in range."""
    names = [f.name for f in fields(AutoConstants)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise _error(where, f"unknown auto constant {unknown[0]!r}")
    checked: dict[str, Any] = {}
    for f in fields(AutoConstants):
        if f.name not in values:
            raise _error(where, f"auto constant {f.name} is missing")
        value = values[f.name]
        integral = f.type in (int, "int")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            integral and not isinstance(value, int)
        ):
            kind = "an integer" if integral else "a number"
            raise _error(where, f"auto constant {f.name}: expected {kind}, got {value!r}")
        low_ok = value >= 0 if f.name in _MAY_BE_ZERO else value > 0
        if not low_ok or not math.isfinite(value):
            raise _error(where, f"auto constant {f.name} = {value} is out of range")
        checked[f.name] = value
    if not checked["LARGE_ITEMS_MIN"] <= checked["LARGE_ITEMS_MAX"] <= MAX_MERGE_ITEMS:
        raise _error(where, "auto constants need LARGE_ITEMS_MIN <= LARGE_ITEMS_MAX <= "
                     f"{MAX_MERGE_ITEMS}")
    if max(checked["FLAT_WORK"], checked["FLAT_WORK_LARGE"]) > MAX_MERGE_ITEMS:
        raise _error(where, f"FLAT_WORK and FLAT_WORK_LARGE must be at most {MAX_MERGE_ITEMS}")
    return AutoConstants(**checked)


def _error(where: str, message: str) -> TeaalLoopsError:
    return TeaalLoopsError(message, location=Location(where))


# The value types with constants of their own: float64 halves the nonzeros a byte of traffic
# carries and merge-path's staged tile, so float32's choices were up to 1.37x off there.
DTYPES = ("float32", "float64")


def dtype_of(value_bytes: int) -> str:
    """The constants' key for values of ``value_bytes`` bytes (8: float64, else float32)."""
    return "float64" if int(value_bytes) == 8 else "float32"


def load_constant_sets(path: str | Path) -> dict[str, AutoConstants]:
    """Every dtype's constants from a file in the format :func:`constants_document` writes
    (schema ``/2``: a section per dtype of :data:`DTYPES`); a schema ``/1`` file (one set)
    serves both dtypes. The sets of one GPU are :func:`load_device_sets`'."""
    return constant_sets_of(read_constants(path), str(path))


def constant_sets_of(doc: Mapping[str, Any], where: str) -> dict[str, AutoConstants]:
    """:func:`load_constant_sets` of a document already read (:func:`read_constants`)."""
    if doc.get("schema") == CONSTANTS_SCHEMA_V1:
        one = constants_from_mapping(_object(doc, "constants", where), where)
        return dict.fromkeys(DTYPES, one)
    return {
        dtype: constants_from_mapping(
            _object(_object(doc, dtype, where), "constants", f"{where}: {dtype}"),
            f"{where}: {dtype}")
        for dtype in DTYPES
    }


# A schema-2 file may also hold sets fitted on one GPU model, under "devices": {NAME: {dtype:
# section}}, used on a device whose name is NAME exactly (CUDA's, as DeviceInfo has it): the
# H100 and the H200 want different group sizes on the same float64 matrices in every run, so
# no one set serves both (BENCHMARKS.md, per-GPU constants). Other GPUs use the dtype's set.
def load_device_sets(path: str | Path) -> dict[tuple[str, str], AutoConstants]:
    """The per-GPU sets of a constants file, by (device name, dtype); none for schema 1."""
    return device_sets_of(read_constants(path), str(path))


def device_sets_of(doc: Mapping[str, Any], where: str) -> dict[tuple[str, str], AutoConstants]:
    """:func:`load_device_sets` of a document already read (:func:`read_constants`)."""
    if doc.get("schema") == CONSTANTS_SCHEMA_V1 or "devices" not in doc:
        return {}
    out: dict[tuple[str, str], AutoConstants] = {}
    for name, sections in _object(doc, "devices", where).items():
        here = f"{where}: devices: {name}"
        if not isinstance(sections, dict) or not sections:
            raise _error(here, "must be an object with a section per dtype")
        for dtype, section in sections.items():
            if dtype not in DTYPES:
                raise _error(here, f"unknown dtype {dtype!r} (expected one of {list(DTYPES)})")
            if not isinstance(section, dict):
                raise _error(here, f"{dtype!r} must be an object")
            out[(name, dtype)] = constants_from_mapping(
                _object(section, "constants", f"{here}: {dtype}"), f"{here}: {dtype}")
    return out


def read_constants(path: str | Path) -> Mapping[str, Any]:
    """A constants file's JSON object, its schema one this version reads."""
    where = str(path)
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise _error(where, f"cannot read auto constants: {err}") from None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema not in (CONSTANTS_SCHEMA, CONSTANTS_SCHEMA_V1):
        raise _error(where, f"not an auto constants file (schema {CONSTANTS_SCHEMA!r} expected)")
    return doc


def _object(doc: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = doc.get(key)
    if not isinstance(value, dict):
        raise _error(where, f"{key!r} must be an object")
    return value


def load_constants(path: str | Path, dtype: str = "float32") -> AutoConstants:
    """One dtype's constants from a constants file (:func:`load_constant_sets`)."""
    return load_constant_sets(path)[dtype]


def constants_document(
    sets: Mapping[str, AutoConstants], fitted_from: Mapping[str, Mapping[str, Any]],
    devices: Mapping[tuple[str, str], tuple[AutoConstants, Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The JSON document of a constants file: for each dtype, its values and where they come
    from; ``devices``: the per-GPU sets, (values, where from) by (device name, dtype)."""
    doc: dict[str, Any] = {
        "schema": CONSTANTS_SCHEMA,
        **{dtype: {"fitted_from": dict(fitted_from.get(dtype, {})),
                   "constants": sets[dtype].as_dict()} for dtype in DTYPES}}
    if devices:
        per: dict[str, dict[str, Any]] = {}
        for (name, dtype), (values, record) in sorted(devices.items()):
            per.setdefault(name, {})[dtype] = {"fitted_from": dict(record),
                                               "constants": values.as_dict()}
        doc["devices"] = per
    return doc


@functools.lru_cache(maxsize=1)
def constant_sets() -> dict[str, AutoConstants]:
    """The shipped constants of every dtype (``auto_constants.json`` beside this module), read
    once."""
    return load_constant_sets(CONSTANTS_FILE)


@functools.lru_cache(maxsize=1)
def device_constant_sets() -> dict[tuple[str, str], AutoConstants]:
    """The shipped per-GPU sets (:func:`load_device_sets`), read once."""
    return load_device_sets(CONSTANTS_FILE)


def constants(value_bytes: int = 4, device: DeviceInfo | None = None) -> AutoConstants:
    """The shipped constants for values of ``value_bytes`` bytes (float32 by default): those
    fitted on ``device``'s GPU model where the file has them, else the dtype's."""
    dtype = dtype_of(value_bytes)
    if device is not None:
        mine = device_constant_sets().get((device.name, dtype))
        if mine is not None:
            return mine
    return constant_sets()[dtype]


class MatrixStats(Protocol):
    """What :func:`choose` reads; :class:`teaal_loops.matrix.stats.RowStats` provides it."""

    @property
    def rows(self) -> int: ...

    @property
    def cols(self) -> int: ...

    @property
    def nnz(self) -> int: ...

    @property
    def mean(self) -> float: ...

    @property
    def max(self) -> int: ...

    @property
    def cv(self) -> float: ...


@dataclass(frozen=True)
class AutoChoice:
    """A schedule chosen by :func:`choose`: the library spec, its parameters and why."""

    schedule: str  # the schedule kind of the chosen spec
    spec: str  # name of a spec in the library, e.g. "group_mapped" (specs/group_mapped.yaml)
    params: Mapping[str, int] = field(default_factory=dict)
    rule: str = ""  # "L", "T1", ...
    reason: str = ""  # one sentence naming the statistics that decided
    layout: str | None = None  # a layout chosen too (T3: "panels:3"); None: the kernel's own

    @property
    def label(self) -> str:
        """``group_mapped[BLOCK_SIZE=8]``: the spec and its bound parameters, sorted, and a
        layout auto chose (``merge_path@panels:3``), as the bench labels its variants."""
        bound = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        label = f"{self.spec}[{bound}]" if bound else self.spec
        return f"{label}@{self.layout}" if self.layout else label


def group_choice(group: int, rule: str, reason: str) -> AutoChoice:
    """The library spec realising a group of ``group`` lanes (1 = thread-mapped)."""
    if group == 1:
        return AutoChoice("thread_mapped", THREAD_SPEC, {}, rule, reason)
    if group <= 32:
        return AutoChoice("group_mapped", WARP_SPEC, {WARP_GROUP_PARAM: group}, rule,
                          reason)
    return AutoChoice("group_mapped", BLOCK_SPEC, {BLOCK_GROUP_PARAM: group}, rule,
                      reason)


def resident_threads(device: DeviceInfo | None) -> int:
    device = device or DeviceInfo.h100()
    return device.sm_count * device.max_threads_per_sm


def group_cost(
    group: int, rows: int, max_row: int, resident: int, c: AutoConstants | None = None
) -> float:
    """Latency-regime cost of ``group`` lanes a row (module docstring)."""
    c = c or constants()
    waves = max(rows * group / resident, c.MIN_WAVES)
    extra = c.CB if group > 32 else (-c.CT if group == 1 else 0.0)
    return c.CW * waves + c.CI * math.ceil(max_row / group) + extra


def flat_cost(rows: int, nnz: int, resident: int, c: AutoConstants | None = None) -> float:
    """Latency-regime cost of merge-path (module docstring)."""
    c = c or constants()
    return c.CF0 + c.CFS * math.log2(max(rows, 2)) + c.CFW * nnz / resident


def costs(
    stats: MatrixStats, device: DeviceInfo | None = None, c: AutoConstants | None = None
) -> dict[str, float]:
    """Every latency-regime candidate's cost, by variant label (for explanations and tests)."""
    c = c or constants(device=device)
    resident = resident_threads(device)
    rows, nnz, longest = int(stats.rows), int(stats.nnz), int(stats.max)
    out = {
        group_choice(g, "", "").label: group_cost(g, rows, longest, resident, c)
        for g in GROUP_SIZES
        if rows * g <= INT32_MAX
    }
    out[_flat_choice(rows, nnz, "", "", c).label] = flat_cost(rows, nnz, resident, c)
    return out


def choose(
    stats: MatrixStats, device: DeviceInfo | None = None, c: AutoConstants | None = None,
    *, value_bytes: int = 4, columns: ColumnStats | None = None,
) -> AutoChoice:
    """The schedule (and parameters) the rules of the module docstring pick for ``stats``,
    for values of ``value_bytes`` (merge-path's items a thread are capped at what its staged
    tile holds for them: :func:`staged_merge_items`). ``columns`` (None: the layout is not
    auto's to choose) lets rule T3 pick column panels.

    ``c`` replaces the shipped constants of that dtype and device (the fit of
    :mod:`teaal_loops.bench.fit_auto` tries candidates this way).
    """
    c = c or constants(value_bytes, device)
    if columns is not None and int(stats.nnz) >= c.THROUGHPUT_WAVES * resident_threads(device):
        panels = panel_choice(columns, int(stats.nnz), value_bytes, _mean_row(stats))
        if panels is not None:
            return panels
    choice = _choose(stats, device, c, value_bytes)
    if choice.spec != MERGE_SPEC:
        return choice
    cap = staged_merge_items(value_bytes, int(stats.rows) + int(stats.nnz) > INT32_MAX)
    items = int(choice.params[MERGE_PARAM])
    if items <= cap:
        return choice
    return AutoChoice(choice.schedule, choice.spec, {MERGE_PARAM: cap}, choice.rule,
                      f"{choice.reason}; {cap} items a thread, the most the staged tile holds "
                      f"for {value_bytes}-byte values")


def panel_choice(
    columns: ColumnStats, nnz: int, value_bytes: int, mean: float = 0.0
) -> AutoChoice | None:
    """Rule T3 (module docstring): merge-path over column panels, or None; ``mean``: the mean
    row's nonzeros (items a thread: about a mean row of a panel, see PANEL_ITEMS_MIN)."""
    x_bytes = columns.cols * int(value_bytes)
    if (x_bytes <= PANEL_X_BYTES or columns.cold_share < PANEL_COLD_SHARE
            or columns.far_share < PANEL_FAR_SHARE):
        return None
    panels = min(PANEL_MAX, math.ceil(x_bytes / PANEL_SLICE_BYTES))
    items = max(PANEL_ITEMS_MIN, min(PANEL_ITEMS_MAX, _pow2_nearest(mean / panels)))
    return AutoChoice(
        "merge_path", MERGE_SPEC, {MERGE_PARAM: items}, "T3",
        f"{nnz} nonzeros gathering from {x_bytes / 2**20:.0f} MiB of x, "
        f"{columns.cold_share:.0%} of them outside its hottest {RESIDENT_BYTES >> 20} MiB and "
        f"{columns.far_share:.0%} far from the diagonal: "
        f"merge-path over {panels} column panels of at most "
        f"{math.ceil(x_bytes / panels / 2**20)} MiB, {items} items a thread",
        layout=f"panels:{panels}",
    )


def column_stats(A: Any, value_bytes: int) -> ColumnStats | None:
    """:class:`~teaal_loops.matrix.columns.ColumnStats` of ``A`` where rule T3 could apply
    (x past :data:`PANEL_X_BYTES`), else None without reading a column."""
    if int(A.shape[1]) * int(value_bytes) <= PANEL_X_BYTES:
        return None
    device = _device_csr(A)
    xp, csr = device if device is not None else (np, as_csr(A))
    return column_stats_of(xp, csr.indptr, csr.indices, csr.shape, value_bytes)


def _choose(
    stats: MatrixStats, device: DeviceInfo | None, c: AutoConstants, value_bytes: int
) -> AutoChoice:
    rows, nnz, longest = int(stats.rows), int(stats.nnz), int(stats.max)
    resident = resident_threads(device)
    if rows == 0 or nnz == 0:
        return group_choice(1, "R0", "the matrix has no nonzeros")
    if nnz >= c.THROUGHPUT_WAVES * resident:
        return _throughput(stats, value_bytes, c)
    table = costs(stats, device, c)
    label = min(table, key=lambda k: table[k])
    ranked = sorted(table.items(), key=lambda kv: kv[1])[:3]
    reason = (
        f"{rows} rows, longest {longest}: estimated "
        + ", ".join(f"{k} {v:.1f}" for k, v in ranked)
    )
    if label.startswith(MERGE_SPEC):
        return _flat_choice(rows, nnz, "L", reason, c)
    group = next(g for g in GROUP_SIZES if group_choice(g, "", "").label == label)
    return group_choice(group, "L", reason)


def _throughput(
    stats: MatrixStats, value_bytes: int, c: AutoConstants
) -> AutoChoice:
    rows, nnz, mean = int(stats.rows), int(stats.nnz), _mean_row(stats)
    longest, cv = int(stats.max), float(stats.cv)
    skew = longest / mean if mean else 0.0
    if cv >= c.HIGH_CV or (longest >= c.LONG_ROW and skew >= c.SKEW):
        along = reads_x_in_sequence(stats, value_bytes)
        items = c.LARGE_ITEMS_MAX if along else c.LARGE_ITEMS_MIN
        return AutoChoice(
            "merge_path", MERGE_SPEC, {MERGE_PARAM: items}, "T1",
            f"{nnz} nonzeros with skewed rows (cv {cv:.2f}, longest {longest}): merge-path, "
            f"{items} items a thread (a warp a row waits ~{math.ceil(longest / 32)} steps on the "
            "longest row; a typical nonzero's row "
            + ("reads x in sequence)" if along else "gathers x)"),
        )
    group = max(2, _pow2_floor(mean / c.LANE_WORK))
    if mean >= 2 * c.LANE_WORK:
        group = max(group, c.MIN_LARGE_GROUP)
    group = group if group <= 32 else min(512, group)
    while group > 1 and rows * group > INT32_MAX:  # past 2**30 rows: down to a thread a row
        group //= 2
    return group_choice(
        group, "T2",
        f"{nnz} nonzeros in regular rows (mean {mean:.1f}, cv {cv:.2f}): {group} lanes a row",
    )


def _flat_choice(rows: int, nnz: int, rule: str, reason: str, c: AutoConstants) -> AutoChoice:
    """Merge-path: equal shares of row ends and nonzeros (the flat candidate). ``FLAT_WORK``
    items a thread up to ``FLAT_LARGE_NNZ`` nonzeros; past them merge-path's own default share
    (``DEFAULT_ITEMS_PER_THREAD``) up to its threshold for large shares (``MERGE_LARGE_ITEMS``
    merge items), where its default grows, and ``FLAT_WORK_LARGE`` past that. Between the two
    the default's 8 beat 16 on soc-Slashdot0902 (948K nonzeros) in all four suite runs of
    float32 and float64 on an H100 and an H200 (1.00x against 0.94x the best cuSPARSE on the
    H100 in float32; BENCHMARKS.md, "merge-path's items on skewed rows")."""
    if nnz <= c.FLAT_LARGE_NNZ:
        items = c.FLAT_WORK
    elif rows + nnz <= MERGE_LARGE_ITEMS:
        items = DEFAULT_ITEMS_PER_THREAD
    else:
        items = c.FLAT_WORK_LARGE
    return AutoChoice("merge_path", MERGE_SPEC, {MERGE_PARAM: items}, rule, reason)


def reads_x_in_sequence(stats: MatrixStats, value_bytes: int) -> bool:
    """Whether the row of a typical nonzero reads ``x`` nearly in sequence: that row's length
    (the mean row seen from a nonzero, ``E[L^2] / E[L] = mean * (1 + cv^2)``) puts its columns
    on average at most :data:`SEQUENTIAL_GAP_BYTES` of ``x`` apart, so that neighbouring
    nonzeros' gathers share lines (rule T1)."""
    mean = _mean_row(stats)
    typical = mean * (1.0 + float(stats.cv) ** 2)
    return typical > 0 and int(stats.cols) * value_bytes <= SEQUENTIAL_GAP_BYTES * typical


def _mean_row(stats: MatrixStats) -> float:
    """The mean row's nonzeros: the statistics' own, else nnz / rows (0 for no rows)."""
    rows, nnz = int(stats.rows), int(stats.nnz)
    return float(stats.mean) if stats.mean else (nnz / rows if rows else 0.0)


def _pow2_nearest(value: float) -> int:
    """The power of two nearest to value in log scale (1 for value <= 1)."""
    return 1 << max(0, round(math.log2(value))) if value > 1 else 1


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
    device = _device_csr(A)
    if device is not None:
        cupy, csr = device
        return device_row_stats(cupy, csr.indptr, int(csr.shape[1]))
    return row_stats(A)


def _device_csr(A: Any) -> tuple[Any, Any] | None:
    """(CuPy, ``A`` as a cupyx CSR matrix) for a CuPy / cupyx matrix, else None: the
    statistics of a matrix on the GPU are taken there."""
    module = type(A).__module__ or ""
    if not module.startswith(("cupy", "cupyx")):
        return None
    import cupy

    return cupy, (A if getattr(A, "format", None) == "csr" else A.tocsr())


def device_row_stats(cp: Any, indptr: Any, cols: int) -> Any:
    """:class:`~teaal_loops.matrix.stats.RowStats` from CSR row offsets held by array module
    ``cp`` (CuPy on the device; NumPy works too), with a handful of reductions."""

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


def resolve(spec: Any, A: Any, device: DeviceInfo | None = None, *,
            value_bytes: int = 4, layout_free: bool = True) -> tuple[Path, AutoChoice]:
    """For a spec with ``schedule: auto``: the library spec file and the choice for matrix ``A``.

    The caller compiles ``spec_path`` with ``choice.params`` (plus the user's own bindings of
    parameters that spec has) in ``choice.layout`` where it names one (only when
    ``layout_free``: the caller gave no layout). A spec that does not ask for auto is a
    TeaalLoopsError.
    """
    if not is_auto(spec):
        raise TeaalLoopsError("resolve(): the spec does not say x-teaal-loops: {schedule: auto}")
    columns = column_stats(A, value_bytes) if layout_free else None
    choice = choose(matrix_stats(A), device, value_bytes=value_bytes, columns=columns)
    return spec_path(choice), choice
