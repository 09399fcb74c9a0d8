"""Reading a results document of schema 1 (SpMV against cupyx's ``A @ x``, written until the
best-cuSPARSE baseline came): the best variant, auto over best, and the targets of then.

Kept so that the committed ``BENCHMARKS.json.gz`` and other old runs still regenerate their
reports exactly (:mod:`teaal_loops.bench.report_v1`); :mod:`teaal_loops.bench.results` reads
schema 2. Everything here is plain Python over the JSON document, no GPU needed.

Definitions:

* ``best``: among valid, fully repeated variants of a case, the lowest median ``kernel`` time
  (device time, zeroing included for accumulating schedules).
* ``speedup_called``: cuSPARSE's median ``call`` time (``A @ x`` as users call it) over the
  variant's median ``launch`` time (lean launch path). ``speedup_kernel``: cuSPARSE's median
  device time over the variant's.
* ``auto.over_best``: the auto choice's ``kernel`` time over the best's.

Targets (float32 cases only; the project's performance goals):

* corpus: best ``speedup_called`` >= 2 on every corpus matrix;
* large: best ``speedup_kernel`` >= 1 on each large class, and the banded class's best reaches
  at least 80% of the measured copy bandwidth;
* auto: ``over_best`` <= 1.10 on at least 90% of the cases.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from teaal_loops.bench.best import best_and_auto

CORPUS_SPEEDUP = 2.0
LARGE_SPEEDUP = 1.0
BANDED_COPY_FRACTION = 0.8
AUTO_SLACK = 1.10
AUTO_SHARE = 0.9
TARGET_DTYPE = "float32"


def _median(block: Any) -> float | None:
    if not isinstance(block, dict):
        return None
    value = block.get("median_ms")
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def timed(result: dict[str, Any]) -> bool:
    """A result that counts for ``best``: no error, validated, fully repeated."""
    return (
        "error" not in result
        and bool(result.get("valid"))
        and not result.get("capped")
        and _median(result.get("kernel")) is not None
    )


def add_speedups(case: dict[str, Any]) -> None:
    """Per result: cupyx's time over ours, as called (lean launch) and device-only."""
    cs = case["cusparse"]
    for r in case["results"]:
        if "kernel" not in r:
            continue
        r["speedup_called"] = _ratio(cs["call"]["median_ms"], r["launch"]["median_ms"])
        r["speedup_kernel"] = _ratio(cs["kernel"]["median_ms"], r["kernel"]["median_ms"])
    case.update(case_best_and_auto(case))


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def case_best_and_auto(case: dict[str, Any]) -> dict[str, Any]:
    """``{"best": {...}, "auto": {...}}`` for one case (:mod:`teaal_loops.bench.best`)."""
    return best_and_auto(case, _summary_of, timed, _median)


def _summary_of(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "label": r.get("label"),
        "schedule": r.get("schedule"),
        "kernel_ms": _median(r.get("kernel")),
        "launch_ms": _median(r.get("launch")),
        "call_ms": _median(r.get("call")),
        "speedup_called": r.get("speedup_called"),
        "speedup_kernel": r.get("speedup_kernel"),
        "gbps": r.get("gbps"),
        "copy_fraction": r.get("copy_fraction"),
    }


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def is_banded(case: dict[str, Any]) -> bool:
    return str(case.get("source", "")).startswith("gpu:banded")


def summarize(doc: dict[str, Any]) -> dict[str, Any]:
    """Target checks, misses with their margins, and geometric means (module docstring)."""
    cases = [c for c in doc.get("cases", []) if c.get("dtype", TARGET_DTYPE) == TARGET_DTYPE]
    corpus = [c for c in cases if c.get("group") == "corpus"]
    large = [c for c in cases if c.get("group") == "large"]
    targets: dict[str, Any] = {}
    if corpus:
        targets["corpus_2x"] = _corpus_target(corpus)
    if large:
        targets["large_parity"] = _large_target(large)
        banded = [c for c in large if is_banded(c)]
        if banded:
            targets["banded_copy_80"] = _banded_target(banded)
    with_auto = [c for c in cases if (c.get("auto") or {}).get("over_best") is not None]
    if with_auto:
        targets["auto_within_10pct"] = _auto_target(with_auto)
    all_cases = doc.get("cases", [])
    return {
        "dtype": TARGET_DTYPE,
        "targets": targets,
        "invalid_results": [
            {"matrix": c["matrix"], "dtype": c.get("dtype"), "label": r.get("label"),
             "error": r.get("error"), "skipped": r.get("skipped"),
             "mismatches": r.get("mismatches")}
            for c in all_cases
            for r in c.get("results", [])
            if "error" in r or "skipped" in r or not r.get("valid")
        ],
        "case_errors": [
            {"matrix": c.get("matrix"), "error": c["error"]} for c in all_cases if "error" in c
        ],
    }


def _best(c: dict[str, Any], key: str) -> float | None:
    value = (c.get("best") or {}).get(key)
    return float(value) if value is not None else None


def _misses(cases: list[dict[str, Any]], key: str, floor: float) -> list[dict[str, Any]]:
    return [
        {"matrix": c["matrix"], key: _best(c, key), "best": (c.get("best") or {}).get("label")}
        for c in cases
        if (_best(c, key) or 0.0) < floor
    ]


def _corpus_target(corpus: list[dict[str, Any]]) -> dict[str, Any]:
    misses = _misses(corpus, "speedup_called", CORPUS_SPEEDUP)
    return {
        "goal": f"best speedup as called >= {CORPUS_SPEEDUP} on every corpus matrix",
        "met": not misses,
        "passed": len(corpus) - len(misses),
        "of": len(corpus),
        "misses": misses,
        "geomean_speedup_called": geomean(_best(c, "speedup_called") or 0 for c in corpus),
        "geomean_speedup_kernel": geomean(_best(c, "speedup_kernel") or 0 for c in corpus),
    }


def _large_target(large: list[dict[str, Any]]) -> dict[str, Any]:
    misses = _misses(large, "speedup_kernel", LARGE_SPEEDUP)
    return {
        "goal": "best device time <= cuSPARSE's on each large class",
        "met": not misses,
        "passed": len(large) - len(misses),
        "of": len(large),
        "misses": misses,
    }


def _banded_target(banded: list[dict[str, Any]]) -> dict[str, Any]:
    fractions = {c["matrix"]: _best(c, "copy_fraction") for c in banded}
    return {
        "goal": f"banded: best >= {BANDED_COPY_FRACTION:.0%} of the copy bandwidth",
        "met": all((f or 0.0) >= BANDED_COPY_FRACTION for f in fractions.values()),
        "copy_fraction": fractions,
    }


def _auto_target(with_auto: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [c for c in with_auto if c["auto"]["over_best"] <= AUTO_SLACK]
    share = len(ok) / len(with_auto)
    return {
        "goal": f"auto within {AUTO_SLACK - 1:.0%} of the best on >= {AUTO_SHARE:.0%} of "
        "the matrices",
        "met": share >= AUTO_SHARE,
        "share": share,
        "passed": len(ok),
        "of": len(with_auto),
        "misses": [
            {"matrix": c["matrix"], "auto": c["auto"]["label"],
             "best": (c.get("best") or {}).get("label"), "over_best": c["auto"]["over_best"]}
            for c in with_auto
            if c["auto"]["over_best"] > AUTO_SLACK
        ],
    }
