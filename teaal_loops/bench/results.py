"""Reading a results document: its schema, the best variant, auto over best, and the targets.

Everything here is plain Python over the JSON document that :func:`run_bench` writes, so
reports can be regenerated (and tested) without a GPU. Documents of schema 1 (SpMV against
cupyx alone) are read by :mod:`teaal_loops.bench.results_v1`; this module reads schema 2.

Definitions (per case: one kernel, matrix, dtype and dense width):

* ``best``: among valid, fully repeated variants, the lowest median ``kernel`` time (device
  time, zeroing included where a schedule accumulates).
* ``speedup.<way>``: the best cuSPARSE's median over the variant's, for ``kernel`` (device
  time), ``throughput`` (calls back to back), ``latency`` (one call alone) and ``graph``
  (throughput of CUDA-graph replays, both sides).
* ``second_speedup.<way>``: the same over the second column (cupyx ``A @ x`` / ``A @ B``;
  PyTorch's ``sampled_addmm`` for SDDMM where nvmath-python runs the best); ``call``: the
  second column's throughput over our convenient call's (SpMV's ``kernel(prepared, x)``).
* ``auto.over_best``: the auto choice's ``kernel`` time over the best's (SpMV).

Targets, float32 cases only, every one against the best cuSPARSE:

* SpMV corpus: best ``speedup.throughput`` >= 2 on every corpus matrix (throughput: what
  "as called" measured in schema 1, now against cuSPARSE with descriptors made once);
* SpMV large: best ``speedup.kernel`` >= 1 on each large class; the banded class's best at
  least 80% of the measured copy bandwidth; ``auto`` within 10% of the best on 90% of cases;
* SpMM: best ``speedup.kernel`` >= 1 on every corpus matrix and large class at every N; its
  geometric mean >= 2 over the large random-access classes (uniform, R-MAT, longrows: columns
  drawn at random) at every N; banded's best at least 60% of the copy bandwidth at every N;
* SDDMM: the geometric mean of the best ``speedup.kernel`` over every SDDMM case >= 2, against
  its anchor, the best cuSPARSE SDDMM that ran (nvmath-python's, else PyTorch's), named per
  case.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from teaal_loops.bench import results_v1
from teaal_loops.bench.best import best_and_auto
from teaal_loops.bench.schema import check_document, read_document, version

TARGET_DTYPE = "float32"
WAYS = ("kernel", "throughput", "latency")
# SpMV against the best cuSPARSE (the performance issue's targets, device time)
SPMV_PARITY = 1.0  # every corpus matrix and every large class
SPMV_RANDOM_GEOMEAN = 1.25  # over the large classes with random column access
BANDED_COPY_FRACTION = 0.9
AUTO_SLACK = 1.05  # auto within 5% of the best variant ...
AUTO_SHARE = 0.9  # ... on at least 90% of the matrices
AUTO_FLOOR = 0.95  # and never below 0.95x the best cuSPARSE
SPMM_PARITY = 1.0
SPMM_RANDOM_GEOMEAN = 2.0
SPMM_BANDED_COPY_FRACTION = 0.6
SDDMM_ANCHOR_GEOMEAN = 2.0
# generators whose columns are random (SpMV's large suite has the last two; SpMM's does not)
RANDOM_ACCESS = ("uniform", "rmat", "longrows", "powerlaw", "emptyrows")


def load(path: str | Path, *, need_stats: bool = False) -> dict[str, Any]:
    """A results document from ``.json`` or gzip-compressed ``.json.gz``, checked field by field
    (:mod:`teaal_loops.bench.schema`): a wrong file is one :class:`BenchResultsError` line."""
    doc = read_document(path)
    check_document(doc, str(path), need_stats=need_stats)
    return doc


def median(block: Any) -> float | None:
    """``block["median_ms"]`` as a number, or None (missing, null or NaN)."""
    if not isinstance(block, dict):
        return None
    value = block.get("median_ms")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def graph_ms(block: Any) -> float | None:
    """A side's graph-replay throughput median, or None."""
    graph = block.get("graph") if isinstance(block, dict) else None
    return median(graph.get("throughput")) if isinstance(graph, dict) else None


def timed(result: dict[str, Any]) -> bool:
    """A result that counts for ``best``: no error, validated, fully repeated."""
    return (
        "error" not in result
        and bool(result.get("valid"))
        and not result.get("capped")
        and median(result.get("kernel")) is not None
    )


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def case_best_and_auto(case: dict[str, Any]) -> dict[str, Any]:
    """``{"best": {...}, "auto": {...}}`` for one case (:mod:`teaal_loops.bench.best`)."""
    return best_and_auto(case, summary_of, timed, median)


def summary_of(r: dict[str, Any]) -> dict[str, Any]:
    out = {"label": r.get("label"), "schedule": r.get("schedule")}
    for way in WAYS:
        out[f"{way}_ms"] = median(r.get(way))
    out["graph_ms"] = graph_ms(r)
    out["call_ms"] = median(r.get("call"))
    out["speedup"] = dict(r.get("speedup") or {})
    out["second_speedup"] = dict(r.get("second_speedup") or {})
    out["gbps"] = r.get("gbps")
    out["of_limit"] = r.get("of_limit")
    out["copy_fraction"] = r.get("copy_fraction")
    return out


def geomean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def generator_of(case: dict[str, Any]) -> str:
    """``banded``, ``uniform``, ... for a GPU-generated class; ``""`` otherwise."""
    source = str(case.get("source", ""))
    return source.split(":")[1] if source.startswith("gpu:") else ""


def is_banded(case: dict[str, Any]) -> bool:
    return generator_of(case) == "banded"


def best_speedup(case: dict[str, Any], way: str) -> float | None:
    value = ((case.get("best") or {}).get("speedup") or {}).get(way)
    return float(value) if value is not None else None


def summarize(doc: dict[str, Any]) -> dict[str, Any]:
    """Target checks, misses with their margins, and geometric means (module docstring)."""
    if version(doc) == 1:
        return results_v1.summarize(doc)
    # a case that failed stays in: a target over every matrix counts it as a miss
    cases = [c for c in doc.get("cases", []) if c.get("dtype", TARGET_DTYPE) == TARGET_DTYPE]
    by_kernel: dict[str, list[dict[str, Any]]] = {}
    for c in cases:
        by_kernel.setdefault(c.get("kernel", "spmv"), []).append(c)
    targets: dict[str, Any] = {}
    targets.update(_spmv_targets(by_kernel.get("spmv", [])))
    targets.update(_spmm_targets(by_kernel.get("spmm", [])))
    targets.update(_sddmm_targets(by_kernel.get("sddmm", [])))
    all_cases = doc.get("cases", [])
    return {
        "dtype": TARGET_DTYPE,
        "targets": targets,
        "geomeans": {kernel: _geomeans(group) for kernel, group in by_kernel.items()},
        "invalid_results": [
            {"matrix": c["matrix"], "kernel": c.get("kernel"), "width": c.get("width"),
             "dtype": c.get("dtype"), "label": r.get("label"), "error": r.get("error"),
             "skipped": r.get("skipped"), "mismatches": r.get("mismatches")}
            for c in all_cases
            for r in c.get("results", [])
            if "error" in r or "skipped" in r or not r.get("valid")
        ],
        "case_errors": [
            {"matrix": c.get("matrix"), "kernel": c.get("kernel"), "width": c.get("width"),
             "error": c["error"]} for c in all_cases if "error" in c
        ],
        "baseline_errors": [
            {"matrix": c.get("matrix"), "kernel": c.get("kernel"), "width": c.get("width"),
             "side": side, "error": (c.get(side) or {}).get("error")}
            for c in all_cases for side in ("cusparse", "second")
            if isinstance(c.get(side), dict) and "error" in c[side]
        ],
    }


def _geomeans(cases: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"cases": len(cases)}
    for way in (*WAYS, "graph"):
        out[f"speedup_{way}"] = geomean(best_speedup(c, way) for c in cases)
    for way in (*WAYS, "call"):
        out[f"second_speedup_{way}"] = geomean(
            ((c.get("best") or {}).get("second_speedup") or {}).get(way) for c in cases)
    return out


def _label(c: dict[str, Any]) -> str:
    width = c.get("width")
    name = {"spmm": "N", "sddmm": "K"}.get(str(c.get("kernel")), "")
    return f"{c['matrix']} {name}={width}" if width is not None else str(c["matrix"])


def _below(cases: list[dict[str, Any]], way: str, floor: float) -> list[dict[str, Any]]:
    return [{"matrix": _label(c), "value": best_speedup(c, way),
             "best": (c.get("best") or {}).get("label")}
            for c in cases if (best_speedup(c, way) or 0.0) < floor]


def _missing(cases: list[dict[str, Any]]) -> list[str]:
    """Cases without a device-time speedup (no valid variant or no baseline): a target over
    them cannot be met."""
    return [_label(c) for c in cases if best_speedup(c, "kernel") is None]


def _every(key: str, goal: str, cases: list[dict[str, Any]], way: str,
           floor: float) -> dict[str, Any]:
    misses = _below(cases, way, floor)
    return {key: {"goal": goal, "met": not misses, "passed": len(cases) - len(misses),
                  "of": len(cases), "misses": misses, "way": way,
                  "geomean": geomean(best_speedup(c, way) for c in cases)}}


def _copy_share(key: str, goal: str, cases: list[dict[str, Any]],
                floor: float) -> dict[str, Any]:
    fractions = {_label(c): (c.get("best") or {}).get("copy_fraction") for c in cases}
    return {key: {"goal": goal, "met": all((f or 0.0) >= floor for f in fractions.values()),
                  "copy_fraction": fractions}}


def _spmv_targets(cases: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    scope = [c for c in cases if c.get("group") in ("corpus", "large")]
    large = [c for c in cases if c.get("group") == "large"]
    if scope:
        out.update(_every("spmv_parity", "SpMV: best device time <= the best cuSPARSE's on "
                          "every corpus matrix and every large class", scope, "kernel",
                          SPMV_PARITY))
    random = [c for c in large if generator_of(c) in RANDOM_ACCESS]
    if random:
        value = geomean(best_speedup(c, "kernel") for c in random)
        out["spmv_random_1_25x"] = {
            "goal": f"SpMV: geomean >= {SPMV_RANDOM_GEOMEAN:g}x the best cuSPARSE over the "
                    "large classes with random column access (uniform, R-MAT, longrows, "
                    "power-law, empty rows)",
            "met": not _missing(random) and (value or 0.0) >= SPMV_RANDOM_GEOMEAN,
            "geomean": value, "of": len(random), "way": "kernel",
            "misses": _below(random, "kernel", SPMV_RANDOM_GEOMEAN),
        }
    banded = [c for c in large if is_banded(c)]
    if banded:
        out.update(_copy_share("spmv_banded_copy_90", f"SpMV banded: best >= "
                               f"{BANDED_COPY_FRACTION:.0%} of the copy bandwidth", banded,
                               BANDED_COPY_FRACTION))
    with_auto = [c for c in cases if (c.get("auto") or {}).get("over_best") is not None]
    if with_auto:
        out["spmv_auto"] = _auto_target(with_auto)
    return out


def _auto_target(with_auto: list[dict[str, Any]]) -> dict[str, Any]:
    """auto within 5% of the best variant on 90% of the matrices, never below 0.95x the best
    cuSPARSE (its own device-time speedup)."""
    near = [c for c in with_auto if c["auto"]["over_best"] <= AUTO_SLACK]
    floor = [c for c in with_auto
             if ((c["auto"].get("speedup") or {}).get("kernel") or 0.0) < AUTO_FLOOR]
    return {
        "goal": f"SpMV auto within {AUTO_SLACK - 1:.0%} of the best on >= {AUTO_SHARE:.0%} of "
                f"the matrices and never below {AUTO_FLOOR:g}x the best cuSPARSE",
        "met": len(near) / len(with_auto) >= AUTO_SHARE and not floor,
        "passed": len(near), "of": len(with_auto),
        "misses": [{"matrix": _label(c), "value": c["auto"]["over_best"],
                    "best": (c.get("best") or {}).get("label")}
                   for c in with_auto if c["auto"]["over_best"] > AUTO_SLACK],
        "below_floor": [{"matrix": _label(c),
                         "value": (c["auto"].get("speedup") or {}).get("kernel")}
                        for c in floor],
    }


def _spmm_targets(cases: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    scope = [c for c in cases if c.get("group") in ("corpus", "large")]
    if scope:
        out.update(_every("spmm_parity", "SpMM: best device time <= the best cuSPARSE's on "
                          "every corpus matrix and large class at every N", scope, "kernel",
                          SPMM_PARITY))
    random = [c for c in cases if c.get("group") == "large"
              and generator_of(c) in RANDOM_ACCESS]
    if random:
        value = geomean(best_speedup(c, "kernel") for c in random)
        out["spmm_random_2x"] = {
            "goal": f"SpMM: geomean >= {SPMM_RANDOM_GEOMEAN:g}x the best cuSPARSE over the "
                    "large random-access classes (uniform, R-MAT, longrows) at every N",
            "met": not _missing(random) and (value or 0.0) >= SPMM_RANDOM_GEOMEAN,
            "geomean": value, "of": len(random), "way": "kernel",
            "misses": _below(random, "kernel", SPMM_RANDOM_GEOMEAN),
        }
    banded = [c for c in cases if c.get("group") == "large" and is_banded(c)]
    if banded:
        out.update(_copy_share("spmm_banded_copy_60", f"SpMM banded: best >= "
                               f"{SPMM_BANDED_COPY_FRACTION:.0%} of the copy bandwidth at "
                               "every N", banded, SPMM_BANDED_COPY_FRACTION))
    return out


def _sddmm_targets(cases: list[dict[str, Any]]) -> dict[str, Any]:
    if not cases:
        return {}
    value = geomean(best_speedup(c, "kernel") for c in cases)
    anchors = sorted({str(c["cusparse"]["library"]) for c in cases
                      if isinstance(c.get("cusparse"), dict) and c["cusparse"].get("library")
                      and "error" not in c["cusparse"]}) or ["none ran"]
    return {"sddmm_anchor_2x": {
        "goal": f"SDDMM: geomean >= {SDDMM_ANCHOR_GEOMEAN:g}x its anchor (the best cuSPARSE "
                f"SDDMM that ran: {', '.join(anchors)}) over every SDDMM case",
        "met": not _missing(cases) and (value or 0.0) >= SDDMM_ANCHOR_GEOMEAN,
        "geomean": value, "of": len(cases), "way": "kernel", "anchors": anchors,
        "misses": _below(cases, "kernel", 1.0),
    }}
