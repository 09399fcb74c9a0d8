"""Refit the constants of :func:`teaal_loops.auto.choose` to a benchmark's measured times.

    teaal-loops bench --fit-auto bench.json [more.json ...] [-o teaal_loops/auto_constants.json]

What is fitted: every constant of :class:`~teaal_loops.auto.AutoConstants` except ``CW`` (the
latency model's unit: only ratios of its constants matter), for each dtype separately (float32
and float64 have constants of their own); a dtype the results do not hold keeps its constants.

Against what: the cases of results documents written by ``teaal-loops bench`` (every matrix and
dtype that has row statistics and at least one valid, fully repeated variant), pooled over the
documents given. For a candidate set of constants, ``choose`` picks a variant for each case
from the case's row statistics and its run's device; the pick is looked up among the case's
measured variants (same spec, every parameter of the pick bound to the same value, explicitly
or by the spec's default as the run recorded it in ``bound``). Its median device time over the
case's best is its *ratio*; a pick the run did not time, or that failed there, counts as a
ratio of :data:`MISSING_RATIO`.

Objective, lexicographic: first the number of cases whose ratio is at most :data:`FIT_SLACK`
(within 5% of the best variant), then the sum of the ratios' logarithms (the geometric mean of
the ratios: smaller is better).

How: coordinate search from the current constants. Each constant in turn tries the values of
its grid (multiples of its current value from a quarter to four times, powers of two for sizes)
and takes the one with the best objective, the nearest among equals; it moves only on a
strict improvement, so constants the data cannot tell apart keep their values. Rounds repeat
until one changes nothing (at most :data:`MAX_ROUNDS`). The fit is in-sample:
confirm a refit with a fresh benchmark run before trusting it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teaal_loops import auto
from teaal_loops.bench.results import timed
from teaal_loops.errors import Location, TeaalLoopsError

FIT_SLACK = 1.05
MISSING_RATIO = 2.0
MAX_ROUNDS = 20
SCALES = (0.9, 1.1, 0.8, 1.25, 2 / 3, 1.5, 0.5, 2.0, 0.25, 4.0)
POW2_SIZES = (2, 4, 8, 16, 32)
MERGE_ITEMS = (4, 8, 16, 32)
ZERO_TRIES = (0.1, 0.25, 0.5, 1.0)


@dataclass(frozen=True)
class Stats:
    """The row statistics :func:`teaal_loops.auto.choose` reads, from a case's ``stats``."""

    rows: int
    nnz: int
    mean: float
    max: int
    cv: float
    cols: int  # rule T1 reads it (auto.reads_x_in_sequence)


@dataclass(frozen=True)
class Measured:
    """One timed variant of a case: its spec, every bound parameter, its device time."""

    spec: str
    explicit: Mapping[str, int]
    bound: Mapping[str, int]
    ms: float


@dataclass(frozen=True)
class FitCase:
    name: str  # "matrix (dtype)"
    stats: Stats
    variants: tuple[Measured, ...]
    best_ms: float
    value_bytes: int = 4  # the case's dtype: auto caps merge-path's items by it
    device: auto.DeviceInfo = auto.DeviceInfo.h100()  # its run's GPU (auto counts its threads)

    @property
    def dtype(self) -> str:
        return auto.dtype_of(self.value_bytes)

    def time_of(self, choice: auto.AutoChoice) -> float | None:
        """The device time of the measured variant that is ``choice``, or None."""
        times = [m.ms for m in self.variants if _is_choice(m, choice)]
        return min(times) if times else None


@dataclass(frozen=True)
class Score:
    within: int  # cases with ratio <= FIT_SLACK
    of: int
    log_ratio: float  # sum over cases of log(ratio)

    def better_than(self, other: Score) -> bool:
        if self.within != other.within:
            return self.within > other.within
        return self.log_ratio < other.log_ratio - 1e-9

    @property
    def geomean_ratio(self) -> float:
        return math.exp(self.log_ratio / self.of) if self.of else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {"within_slack": self.within, "of": self.of,
                "geomean_over_best": round(self.geomean_ratio, 4)}


@dataclass(frozen=True)
class FitResult:
    constants: auto.AutoConstants
    before: Score
    after: Score
    rounds: int

    def changed(self, start: auto.AutoConstants) -> dict[str, tuple[float, float]]:
        old, new = start.as_dict(), self.constants.as_dict()
        return {k: (old[k], new[k]) for k in old if old[k] != new[k]}


def _is_choice(m: Measured, choice: auto.AutoChoice) -> bool:
    if m.spec != choice.spec or not set(m.explicit) <= set(choice.params):
        return False
    return all(m.explicit.get(k, m.bound.get(k)) == v for k, v in choice.params.items())


def cases_of(doc: Mapping[str, Any]) -> list[FitCase]:
    """The cases of a checked results document that the fit can use (module docstring)."""
    device = device_of(doc)
    out = []
    for case in doc.get("cases", []):
        stats = case.get("stats")
        if "error" in case or not stats or case.get("kernel", "spmv") != "spmv":
            continue  # auto chooses SpMV schedules only
        variants = tuple(
            Measured(str(r.get("spec") or r["label"].split("[")[0]), dict(r.get("params") or {}),
                     dict(r.get("bound") or {}), float(r["kernel"]["median_ms"]))
            for r in case.get("results", [])
            if timed(r) and r.get("layout", "csr") == "csr" and not _experiment(r)
        )
        if not variants:
            continue
        out.append(FitCase(
            f"{case['matrix']} ({case.get('dtype', '?')})",
            Stats(int(stats["rows"]), int(stats["nnz"]), float(stats["mean"]), int(stats["max"]),
                  float(stats["cv"]), int(case["cols"])),  # (the schema requires a case's cols)
            variants,
            min(v.ms for v in variants),
            8 if case.get("dtype") in ("f64", "float64") else 4,
            device,
        ))
    return out


def _experiment(result: Mapping[str, Any]) -> bool:
    """A tuning experiment's variant (``@t256`` block size, ``+file`` source or patch,
    ``+l2persist``; older documents mark it in the label only): not a kernel auto can pick,
    so neither its pick nor the best."""
    label = str(result.get("label", ""))
    return bool(result.get("experiment")) or "+" in label or "@" in label


def device_of(doc: Mapping[str, Any]) -> auto.DeviceInfo:
    dev = doc.get("device") or {}
    sm_count = dev.get("sm_count")
    if not isinstance(sm_count, int) or isinstance(sm_count, bool) or sm_count <= 0:
        return auto.DeviceInfo.h100()
    return auto.DeviceInfo(str(dev.get("name", "?")), sm_count)


def ratio(case: FitCase, c: auto.AutoConstants) -> float:
    """The pick's device time over the case's best (:data:`MISSING_RATIO` if not measured)."""
    choice = auto.choose(case.stats, case.device, c, value_bytes=case.value_bytes)
    ms = case.time_of(choice)
    return MISSING_RATIO if ms is None else ms / case.best_ms


def score(cases: Sequence[FitCase], c: auto.AutoConstants) -> Score:
    ratios = [ratio(case, c) for case in cases]
    return Score(sum(r <= FIT_SLACK for r in ratios), len(ratios),
                 sum(math.log(max(r, 1e-12)) for r in ratios))


# -- the search --------------------------------------------------------------------------------


def _scaled(value: float, integral: bool) -> list[float]:
    """Multiples of ``value`` (3 significant digits), nearest first; a zero tries 0.1 to 1."""
    out: list[float] = []
    for raw in (value * s for s in SCALES) if value else ZERO_TRIES:
        v = float(round(raw)) if integral else float(f"{raw:.3g}")
        if v > 0 and v not in out and v != value:
            out.append(v)
    return out


def _pow2(choices: Iterable[int]) -> Callable[[float], list[float]]:
    return lambda value: sorted((float(v) for v in choices if v != value),
                                key=lambda v: abs(math.log2(v / value)) if value > 0 else v)


GRIDS: dict[str, Callable[[float], list[float]]] = {
    "THROUGHPUT_WAVES": lambda v: _scaled(v, False),
    "CI": lambda v: _scaled(v, False),
    "CB": lambda v: [*_scaled(v, False), 0.0],
    "MIN_WAVES": lambda v: _scaled(v, False),
    "CF0": lambda v: [*_scaled(v, False), 0.0],
    "CFS": lambda v: [*_scaled(v, False), 0.0],
    "CFW": lambda v: _scaled(v, False),
    "CT": lambda v: [*_scaled(v, False), 0.0],
    "FLAT_WORK": _pow2(MERGE_ITEMS),
    "FLAT_WORK_LARGE": _pow2(MERGE_ITEMS),
    "FLAT_LARGE_NNZ": lambda v: _scaled(v, True),
    "HIGH_CV": lambda v: _scaled(v, False),
    "LONG_ROW": lambda v: _scaled(v, True),
    "SKEW": lambda v: _scaled(v, False),
    "LARGE_ITEMS_MIN": _pow2(MERGE_ITEMS),
    "LARGE_ITEMS_MAX": _pow2(MERGE_ITEMS),
    "LANE_WORK": lambda v: _scaled(v, False),
    "MIN_LARGE_GROUP": _pow2(POW2_SIZES),
}
INTEGRAL = {"FLAT_WORK", "FLAT_WORK_LARGE", "FLAT_LARGE_NNZ", "LONG_ROW", "LARGE_ITEMS_MIN",
            "LARGE_ITEMS_MAX", "MIN_LARGE_GROUP"}


def fit(cases: Sequence[FitCase], start: auto.AutoConstants) -> FitResult:
    """Coordinate search for the constants with the best :func:`score` (module docstring),
    from ``start``; the cases are of one dtype."""

    current = start
    before = best = score(cases, current)
    rounds = 0
    while rounds < MAX_ROUNDS:
        rounds += 1
        moved = False
        for name, grid in GRIDS.items():
            base = current
            for candidate in grid(base.as_dict()[name]):
                value = int(candidate) if name in INTEGRAL else candidate
                try:
                    trial = base.replace(**{name: value})
                except TeaalLoopsError:  # out of range (e.g. LARGE_ITEMS_MIN > LARGE_ITEMS_MAX)
                    continue
                s = score(cases, trial)
                if s.better_than(best):  # strictly better: among equals the nearest stays
                    current, best, moved = trial, s, True
        if not moved:
            break
    return FitResult(current, before, best, rounds)


@dataclass(frozen=True)
class DtypeFit:
    """The fit of one dtype's constants and the ``fitted_from`` record of its file section;
    ``device``: the GPU model of a per-device section (None: the dtype's own)."""

    dtype: str
    result: FitResult
    record: Mapping[str, Any]
    start: auto.AutoConstants  # the constants the fit started from
    device: str | None = None


def fit_documents(
    docs: Sequence[tuple[Mapping[str, Any], str]],
    start: Mapping[str, auto.AutoConstants] | None = None,
    *, per_device: bool = False,
) -> list[DtypeFit]:
    """Fit every dtype the checked results documents ``(doc, source)`` hold, their cases
    pooled, from ``start`` (default: the shipped constants); ``per_device``: each GPU model's
    cases on their own, from ``start`` where one is given, else from the constants that model
    uses now (its shipped section, or the dtype's)."""

    given = start is not None
    start = start or auto.constant_sets()
    pooled = [(case, doc, source) for doc, source in docs for case in cases_of(doc)]
    if not pooled:
        where = docs[0][1] if docs else "--fit-auto"
        raise TeaalLoopsError("no case has row statistics and a valid timed variant to fit to",
                              location=Location(where))
    groups: list[tuple[str | None, str]] = [(None, dtype) for dtype in auto.DTYPES]
    if per_device:
        names = dict.fromkeys(case.device.name for case, _, _ in pooled)
        groups = [(name, dtype) for name in names for dtype in auto.DTYPES]
    fits = []
    for device, dtype in groups:
        mine = [entry for entry in pooled if entry[0].dtype == dtype
                and (device is None or entry[0].device.name == device)]
        if not mine:
            continue
        cases = [case for case, _, _ in mine]
        first = start[dtype] if device is None or given else auto.device_constant_sets().get(
            (device, dtype), start[dtype])
        result = fit(cases, first)
        sources = list(dict.fromkeys(source for _, _, source in mine))
        runs = [doc for doc, source in docs if source in sources]
        record = {
            "results": [Path(source).name for source in sources],
            "dates": [doc.get("date") for doc in runs],
            "devices": [device_of(doc).name for doc in runs],
            "commands": [doc.get("command") for doc in runs],
            "cases": len(cases),
            "objective": f"most cases with auto's device time within {FIT_SLACK:.2f}x of the "
            f"best measured variant, then the smallest geometric mean of auto over best (a "
            f"pick not measured counts {MISSING_RATIO}x); in-sample",
            "before": result.before.as_dict(),
            "after": result.after.as_dict(),
        }
        fits.append(DtypeFit(dtype, result, record, first, device))
    return fits


def write_constants(
    fits: Sequence[DtypeFit], path: str | Path, base: str | Path | None = None
) -> Path:
    """Write the constants file that :func:`teaal_loops.auto.constants` reads: the fitted
    sections (a dtype's, or one GPU's), the others as ``base`` (default: the shipped file) has
    them."""
    base = Path(base or auto.CONSTANTS_FILE)
    doc = auto.read_constants(base)  # read once, checked by the loaders below
    sets = dict(auto.constant_sets_of(doc, str(base)))
    records = _records(doc)
    device_records = _device_records(doc)
    devices = {key: (values, device_records.get(key, {}))
               for key, values in auto.device_sets_of(doc, str(base)).items()}
    for f in fits:
        if f.device is None:
            sets[f.dtype] = f.result.constants
            records[f.dtype] = dict(f.record)
        else:
            devices[(f.device, f.dtype)] = (f.result.constants, dict(f.record))
    out = Path(path)
    text = json.dumps(auto.constants_document(sets, records, devices), indent=1) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(out)
    if out.resolve() == auto.CONSTANTS_FILE.resolve():
        auto.constant_sets.cache_clear()
        auto.device_constant_sets.cache_clear()
    return out


def _records(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each dtype's ``fitted_from`` in a constants document (a schema-1 file's one record for
    both); the document was checked by :func:`teaal_loops.auto.constant_sets_of`."""
    if doc.get("schema") == auto.CONSTANTS_SCHEMA_V1:
        return dict.fromkeys(auto.DTYPES, dict(doc.get("fitted_from") or {}))
    return {d: dict(doc[d].get("fitted_from") or {}) for d in auto.DTYPES}


def _device_records(doc: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each per-GPU section's ``fitted_from`` (checked by
    :func:`teaal_loops.auto.device_sets_of`)."""
    return {(name, dtype): dict(section.get("fitted_from") or {})
            for name, sections in (doc.get("devices") or {}).items()
            for dtype, section in sections.items()}
