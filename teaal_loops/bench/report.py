"""A markdown report and a PNG plot from a results document (no GPU needed).

Documents of schema 1 are drawn as they always were (:mod:`teaal_loops.bench.report_v1`). For
schema 2, ``markdown(doc)`` gives: the device, date and command; the copy bandwidth; which
libraries ran the baselines (CuPy's cuSPARSE binding, nvmath-python and whether cuSPARSE's
preprocessing ran, PyTorch, the SDDMM backend); the targets with their margins; per kernel
(SpMV, SpMM at each N, SDDMM at each K) and matrix group a table of the best cuSPARSE and our
best variant side by side (device time, throughput, latency, graph replay), the speedups over
the best cuSPARSE, the second column (cupyx, PyTorch) and our speedup over it, GB/s and its
share of the copy rate, and the auto choice (SpMV); the device time of every variant; why a
graph replay was not timed; and what the numbers measure. ``plot(doc, path)`` draws every
case's best speedups and bandwidth (:mod:`teaal_loops.bench.report_plot`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teaal_loops.bench import report_plot, report_v1
from teaal_loops.bench.report_format import (
    count,
    minor_tick_label,
    pct,
    rate,
    tick_label,
    times,
    us,
)
from teaal_loops.bench.results import graph_ms, median, summarize
from teaal_loops.bench.schema import version

GROUP_TITLES = {"corpus": "corpus matrices", "large": "large synthetic matrices (> L2)",
                "custom": "other matrices"}
KERNEL_TITLES = {"spmv": "SpMV", "spmm": "SpMM", "sddmm": "SDDMM"}
WIDTH_NAMES = {"spmm": "N", "sddmm": "K"}


def markdown(doc: dict[str, Any], *, plot_name: str | None = None) -> str:
    if version(doc) == 1:
        return report_v1.markdown(doc, plot_name=plot_name)
    summary = doc.get("summary") or summarize(doc)
    lines = _header(doc)
    if doc.get("incomplete"):
        lines += [f"**Incomplete run**: skipped {', '.join(doc.get('skipped', []))}", ""]
    lines += _targets(summary)
    if plot_name:
        lines += [f"![speedup and bandwidth]({plot_name})", ""]
    for title, cases in sections(doc.get("cases", [])):
        lines += [f"### {title}", ""]
        lines += _case_table(cases)
        lines.append("")
    lines += _variant_tables(doc.get("cases", []))
    lines += _graph_reasons(doc.get("cases", []))
    lines += _timing_notes(doc)
    return "\n".join(lines).rstrip() + "\n"


def plot(doc: dict[str, Any], path: str | Path) -> Path:
    """Speedups and achieved GB/s per case, as a PNG at ``path``."""
    if version(doc) == 1:
        return report_v1.plot(doc, path)
    return report_plot.plot(doc, path)


def figure(doc: dict[str, Any]) -> Any:
    """The matplotlib figure :func:`plot` saves."""
    return report_v1.figure(doc) if version(doc) == 1 else report_plot.figure(doc)


__all__ = ["case_title", "figure", "markdown", "minor_tick_label", "plot", "sections",
           "tick_label"]


def case_title(case: dict[str, Any]) -> str:
    """``SpMM N=32`` / ``SpMV``: a case's kernel and width."""
    kernel = str(case.get("kernel", "spmv"))
    width = case.get("width")
    title = KERNEL_TITLES.get(kernel, kernel)
    return f"{title} {WIDTH_NAMES[kernel]}={width}" if kernel in WIDTH_NAMES else title


def sections(cases: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Cases grouped by kernel, width and matrix group, in the order they first appear."""
    out: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        title = f"{case_title(case)}: {GROUP_TITLES.get(case.get('group', ''), 'matrices')}"
        out.setdefault(title, []).append(case)
    return list(out.items())


def _header(doc: dict[str, Any]) -> list[str]:
    dev = doc.get("device", {})
    copy = doc.get("copy", {})
    libs = doc.get("libraries") or {}

    def said(name: str) -> str:
        value = libs.get(name)
        return "yes" if value is True else f"no ({value})" if value else "not recorded"

    return [
        f"GPU: **{dev.get('name', '?')}** ({dev.get('sm_count', '?')} SMs, "
        f"L2 {dev.get('l2_bytes', 0) / 2**20:.0f} MiB, compute capability "
        f"{dev.get('compute_capability', '?')}, CuPy {dev.get('cupy_version', '?')}, "
        f"CUDA runtime {dev.get('runtime_version', '?')}, driver {dev.get('driver_version', '?')})",
        "",
        f"Date: {doc.get('date', '?')}",
        "",
        f"Command: `{doc.get('command', '?')}`",
        "",
        f"Device-to-device copy: **{rate(copy.get('gbps'))} GB/s** (read + write, "
        f"{copy.get('buffer_bytes', 0) / 2**30:.1f} GiB buffer, median of {copy.get('reps', '?')})",
        "",
        f"Baselines: CuPy's cuSPARSE binding: {said('cupy')}; nvmath-python: {said('nvmath')} "
        f"(cuSPARSE preprocessing {libs.get('preprocess', 'not recorded')}); PyTorch: "
        f"{said('torch')}; SDDMM baseline: {libs.get('sddmm') or 'none'}.",
        "",
    ]


def _targets(summary: dict[str, Any]) -> list[str]:
    targets = summary.get("targets", {})
    lines: list[str] = []
    if targets:
        lines += ["### Targets (float32, against the best cuSPARSE)", "",
                  "| target | result | detail |", "|---|---|---|"]
    for t in targets.values():
        detail = []
        if "passed" in t:
            detail.append(f"{t['passed']}/{t['of']}")
        if t.get("geomean"):
            detail.append(f"geomean {t['geomean']:.2f}x ({t.get('way', 'kernel')})")
        if "copy_fraction" in t:
            detail += [f"{m}: {pct(f)} of copy" for m, f in t["copy_fraction"].items()]
        misses = t.get("misses", [])
        detail += [f"miss {m['matrix']} {times(m.get('value'))}" for m in misses[:12]]
        if len(misses) > 12:
            detail.append(f"and {len(misses) - 12} more (see the JSON)")
        lines.append(f"| {t['goal']} | {'met' if t['met'] else 'MISSED'} | {'; '.join(detail)} |")
    lines.append("")
    for kernel, g in (summary.get("geomeans") or {}).items():
        if g.get("speedup_kernel"):
            lines.append(
                f"{KERNEL_TITLES.get(kernel, kernel)} geomeans over {g.get('cases')} cases "
                f"(float32), best over the best cuSPARSE: device {times(g.get('speedup_kernel'))}"
                f", throughput {times(g.get('speedup_throughput'))}, latency "
                f"{times(g.get('speedup_latency'))}, graph {times(g.get('speedup_graph'))}; "
                f"over the second column: device {times(g.get('second_speedup_kernel'))}, "
                f"throughput {times(g.get('second_speedup_throughput'))}.")
            lines.append("")
    for key, what in (("invalid_results", "Invalid, failed or skipped variants"),
                      ("baseline_errors", "Baselines that did not run"),
                      ("case_errors", "Cases that failed")):
        if summary.get(key):
            lines += [f"{what}: {len(summary[key])} (see the JSON)", ""]
    return lines


def _three(block: Any) -> str:
    """``device / throughput / latency`` microseconds of a side."""
    if not isinstance(block, dict) or "error" in block:
        return "-"
    return " / ".join(us(median(block.get(way))) for way in ("kernel", "throughput", "latency"))


def _best_label(cs: dict[str, Any]) -> str:
    if not cs:
        return "-"
    if "error" in cs:
        return "did not run"
    label = str(cs.get("winner") or "-")
    return f"{cs['library']} {label}" if cs.get("library") in ("nvmath", "torch") else label


def _case_table(cases: list[dict[str, Any]]) -> list[str]:
    head = ("| matrix | dtype | rows | nnz | best cuSPARSE | its us: device / thr / lat "
            "| its graph thr us | best | our us: device / thr / lat | our graph thr us "
            "| x device / thr / lat | x graph | second: thr us | x second | GB/s | of copy "
            "| limit us (bound) | of limit: ours / cuSPARSE | auto / best |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for c in cases:
        if "error" in c:
            lines.append(f"| {c.get('matrix')} | - | - | - | error: {c['error']} |"
                         + " |" * 14)
            continue
        cs = c.get("cusparse") or {}
        second = c.get("second") or {}
        best = c.get("best") or {}
        speed = best.get("speedup") or {}
        over = best.get("second_speedup") or {}
        x_second = over.get("call") if over.get("call") is not None else over.get("throughput")
        auto = c.get("auto") or {}
        ratios = " / ".join(times(speed.get(w)) for w in ("kernel", "throughput", "latency"))
        lines.append(
            f"| {c['matrix']} | {c['dtype'].replace('float', 'f')} | {count(c['rows'])} "
            f"| {count(c['nnz'])} | {_best_label(cs)} | {_three(cs)} | {us(graph_ms(cs))} "
            f"| {best.get('label', '-')} | "
            f"{' / '.join(us(best.get(f'{w}_ms')) for w in ('kernel', 'throughput', 'latency'))}"
            f" | {us(best.get('graph_ms'))} | {ratios} | {times(speed.get('graph'))} "
            f"| {us(median(second.get('throughput')))} | {times(x_second)} "
            f"| {rate(best.get('gbps'))} | {pct(best.get('copy_fraction'))} "
            f"| {_limit_cell(c.get('limit'))} "
            f"| {pct(best.get('of_limit'))} / {pct(cs.get('of_limit'))} "
            f"| {times(auto.get('over_best'))} |"
        )
    return lines


def _limit_cell(limit: dict[str, Any] | None) -> str:
    """The limit model's time and what binds it (teaal_loops.matrix.limit_model)."""
    if not limit or "limit_us" not in limit:
        return "-"
    what = "L2" if str(limit.get("bound_by", "")).startswith("L2") else "DRAM"
    nominal = "" if limit.get("bandwidths_measured") else ", nominal"
    return f"{limit['limit_us']:.1f} ({what}{nominal})"


def _variant_tables(cases: list[dict[str, Any]]) -> list[str]:
    by_title: dict[str, list[dict[str, Any]]] = {}
    for c in cases:
        if "results" in c:
            by_title.setdefault(case_title(c), []).append(c)
    lines: list[str] = []
    for title, group in by_title.items():
        labels = list(dict.fromkeys(r["label"] for c in group for r in c["results"]))
        if not labels:
            continue
        lines += [f"### {title}: device time of every variant", "",
                  "Microseconds; * best, a auto, ! wrong result (not timed), c capped "
                  "repetitions, err: failed, skip: not launched (see the JSON).", "",
                  "| matrix | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
        for c in group:
            by_label = {r["label"]: r for r in c["results"]}
            best = (c.get("best") or {}).get("label")
            cells = [_cell(by_label.get(label), label == best) for label in labels]
            lines.append(f"| {c['matrix']} ({c['dtype'].replace('float', 'f')}) | "
                         + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _cell(r: dict[str, Any] | None, is_best: bool) -> str:
    if r is None:
        return ""
    if r.get("valid") is False:
        return "!"
    if "error" in r:
        return "err"
    if "skipped" in r:
        return "skip"
    mark = ("*" if is_best else "") + ("a" if r.get("auto") else "")
    return f"{us(median(r.get('kernel')))}{mark}" + ("c" if r.get("capped") else "")


def _graph_reasons(cases: list[dict[str, Any]]) -> list[str]:
    reasons: dict[str, list[str]] = {}
    for c in cases:
        name = f"{c.get('matrix')} ({case_title(c)})"
        sides = [("cuSPARSE", c.get("cusparse"))] + [(r.get("label", "?"), r)
                                                      for r in c.get("results", [])]
        for side, block in sides:
            graph = (block or {}).get("graph") if isinstance(block, dict) else None
            if isinstance(graph, dict) and "reason" in graph:
                reasons.setdefault(str(graph["reason"]), []).append(f"{side} on {name}")
    if not reasons:
        return []
    lines = ["### Graph replays not timed", ""]
    for reason, where in reasons.items():
        more = f" and {len(where) - 3} more" if len(where) > 3 else ""
        lines.append(f"- {reason}: {'; '.join(where[:3])}{more}")
    return lines + [""]


def _timing_notes(doc: dict[str, Any]) -> list[str]:
    s = doc.get("settings", {})
    lines = ["### What the numbers measure", ""]
    for key, text in (s.get("timing") or {}).items():
        lines.append(f"- **{key}**: {text}.")
    lines += [
        f"- Medians of {s.get('reps', '?')} repetitions after {s.get('warmup', '?')} warm-up "
        f"calls; inputs rotated over copies spanning {s.get('rotate_factor', '?')}x the L2 "
        f"(at most {s.get('max_copies', '?')} copies); cuSPARSE's algorithms chosen on "
        f"{s.get('choice_reps', '?')} repetitions each; a side over {s.get('slow_ms', '?')} ms "
        f"a call (a generated one also far slower than its baseline) is repeated only "
        f"{s.get('capped_reps', '?')} times (c).",
        f"- Checked: {s.get('check', 'see the JSON')}.",
        "- GB/s: compulsory bytes over the device time; SpMV nnz*(value+index) + (rows+1)*offset"
        " + cols*value + rows*value; SpMM the same with N values per row of B and of Z; SDDMM "
        "nnz*(index + 2 values) + (rows+1)*offset + (rows+cols)*K*value. 'of copy' divides by "
        "the copy bandwidth measured in the same run.",
        "",
    ]
    return lines
