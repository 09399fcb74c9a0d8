"""A markdown report and a PNG plot from a results document of schema 1 (SpMV against cupyx's
``A @ x``; :mod:`teaal_loops.bench.report` draws schema 2), no GPU needed.

``markdown(doc)`` gives: the device, date and command; the copy bandwidth; the targets with
their margins; one table per matrix group (cuSPARSE, the best variant, speedups, GB/s and its
fraction of the copy rate, the auto choice and its time over the best); and a table of every
variant's device time. ``plot(doc, path)`` draws, per matrix, the best variant's and auto's
speedup over cuSPARSE, and the achieved GB/s of the best variant and of cuSPARSE against the
measured copy bandwidth (matplotlib with the Agg backend: no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teaal_loops.bench import report_plot
from teaal_loops.bench.report_format import count as _count
from teaal_loops.bench.report_format import minor_tick_label, tick_label
from teaal_loops.bench.report_format import pct as _pct
from teaal_loops.bench.report_format import rate as _gbps
from teaal_loops.bench.report_format import times as _x
from teaal_loops.bench.report_format import us as _us
from teaal_loops.bench.results_v1 import summarize

GROUP_TITLES = {"corpus": "Corpus matrices", "large": "Large synthetic matrices (> L2)",
                "custom": "Other matrices"}


def markdown(doc: dict[str, Any], *, plot_name: str | None = None) -> str:
    summary = doc.get("summary") or summarize(doc)
    dev = doc.get("device", {})
    copy = doc.get("copy", {})
    lines = [
        f"GPU: **{dev.get('name', '?')}** ({dev.get('sm_count', '?')} SMs, "
        f"L2 {dev.get('l2_bytes', 0) / 2**20:.0f} MiB, compute capability "
        f"{dev.get('compute_capability', '?')}, CuPy {dev.get('cupy_version', '?')}, "
        f"CUDA runtime {dev.get('runtime_version', '?')}, driver {dev.get('driver_version', '?')})",
        "",
        f"Date: {doc.get('date', '?')}",
        "",
        f"Command: `{doc.get('command', '?')}`",
        "",
        f"Device-to-device copy: **{_gbps(copy.get('gbps'))} GB/s** (read + write, "
        f"{copy.get('buffer_bytes', 0) / 2**30:.1f} GiB buffer, median of {copy.get('reps', '?')})",
        "",
    ]
    if doc.get("incomplete"):
        lines += [f"**Incomplete run**: skipped {', '.join(doc.get('skipped', []))}", ""]
    lines += _targets(summary)
    if plot_name:
        lines += [f"![speedup and bandwidth]({plot_name})", ""]
    groups: dict[str, list[dict[str, Any]]] = {}
    for case in doc.get("cases", []):
        groups.setdefault(case.get("group", "custom"), []).append(case)
    for group, cases in groups.items():
        lines += [f"### {GROUP_TITLES.get(group, group)}", ""]
        lines += _case_table(cases)
        lines.append("")
    lines += _variant_table(doc.get("cases", []))
    lines += _timing_notes(doc)
    return "\n".join(lines).rstrip() + "\n"


def _targets(summary: dict[str, Any]) -> list[str]:
    targets = summary.get("targets", {})
    if not targets:
        return []
    lines = ["### Targets (float32)", "", "| target | result | detail |", "|---|---|---|"]
    for t in targets.values():
        detail = []
        if "passed" in t:
            detail.append(f"{t['passed']}/{t['of']}")
        if t.get("geomean_speedup_called"):
            detail.append(f"geomean {t['geomean_speedup_called']:.2f}x as called")
        if t.get("geomean_speedup_kernel"):
            detail.append(f"{t['geomean_speedup_kernel']:.2f}x kernel")
        if "copy_fraction" in t:
            detail += [f"{m}: {_pct(f)} of copy" for m, f in t["copy_fraction"].items()]
        for miss in t.get("misses", []):
            value = miss.get("speedup_called", miss.get("speedup_kernel", miss.get("over_best")))
            detail.append(f"miss {miss['matrix']} {_x(value)}")
        lines.append(f"| {t['goal']} | {'met' if t['met'] else 'MISSED'} | {'; '.join(detail)} |")
    bad = summary.get("invalid_results", [])
    lines.append("")
    if bad:
        lines.append(f"Invalid or failed results: {len(bad)} (see the JSON)")
        lines.append("")
    return lines


def _case_table(cases: list[dict[str, Any]]) -> list[str]:
    head = (
        "| matrix | dtype | rows | nnz | cuSPARSE as called (us) | cuSPARSE kernel (us) | best "
        "| kernel (us) | lean launch (us) | speedup as called | speedup kernel | GB/s | of copy "
        "| auto | auto / best |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for c in cases:
        if "error" in c:
            lines.append(f"| {c.get('matrix')} | - | - | - | error: {c['error']} |" + " |" * 10)
            continue
        cs = c.get("cusparse", {})
        best = c.get("best") or {}
        auto = c.get("auto") or {}
        auto_label = auto.get("label", "-")
        if auto.get("rule"):
            auto_label = f"{auto_label} ({auto['rule']})"
        lines.append(
            f"| {c['matrix']} | {c['dtype'].replace('float', 'f')} | {_count(c['rows'])} "
            f"| {_count(c['nnz'])} | {_us(cs.get('call', {}).get('median_ms'))} "
            f"| {_us(cs.get('kernel', {}).get('median_ms'))} | {best.get('label', '-')} "
            f"| {_us(best.get('kernel_ms'))} | {_us(best.get('launch_ms'))} "
            f"| {_x(best.get('speedup_called'))} | {_x(best.get('speedup_kernel'))} "
            f"| {_gbps(best.get('gbps'))} | {_pct(best.get('copy_fraction'))} "
            f"| {auto_label} | {_x(auto.get('over_best'))} |"
        )
    return lines


def _variant_table(cases: list[dict[str, Any]]) -> list[str]:
    labels: list[str] = []
    for c in cases:
        for r in c.get("results", []):
            if r["label"] not in labels:
                labels.append(r["label"])
    if not labels:
        return []
    lines = [
        "### Device time of every variant",
        "",
        "Microseconds; * best, a auto, ! invalid, c capped repetitions, skip: not launched "
        "(see the JSON).",
        "",
        "| matrix | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for c in cases:
        by_label = {r["label"]: r for r in c.get("results", [])}
        best = (c.get("best") or {}).get("label")
        cells = []
        for label in labels:
            r = by_label.get(label)
            if r is None:
                cells.append("")
                continue
            if "error" in r:
                cells.append("err")
                continue
            if "skipped" in r:
                cells.append("skip")
                continue
            mark = ("*" if label == best else "") + ("a" if r.get("auto") else "")
            mark += ("!" if not r.get("valid") else "") + ("c" if r.get("capped") else "")
            cells.append(f"{_us((r.get('kernel') or {}).get('median_ms'))}{mark}")
        lines.append(f"| {c['matrix']} ({c['dtype'].replace('float', 'f')}) | " + " | ".join(cells)
                     + " |")
    lines.append("")
    return lines


def _timing_notes(doc: dict[str, Any]) -> list[str]:
    timing = doc.get("settings", {}).get("timing", {})
    s = doc.get("settings", {})
    lines = ["### What the numbers measure", ""]
    for key, text in timing.items():
        lines.append(f"- **{key}**: {text}.")
    lines.append(
        f"- Medians of {s.get('reps', '?')} repetitions after {s.get('warmup', '?')} warm-up "
        f"launches; inputs rotated over copies spanning {s.get('rotate_factor', '?')}x the L2 "
        f"(at most {s.get('max_copies', '?')} copies); a variant over "
        f"{s.get('slow_ms', '?')} ms a launch and far slower than cuSPARSE is repeated only "
        f"{s.get('capped_reps', '?')} times (c)."
    )
    lines.append(
        "- GB/s: compulsory bytes nnz*(value+index) + (rows+1)*offset + cols*value + rows*value "
        "over the device time; 'of copy' divides by the copy bandwidth measured in the same run."
    )
    lines.append("")
    return lines


def plot(doc: dict[str, Any], path: str | Path) -> Path:
    """Speedup over cuSPARSE and achieved GB/s per matrix, as a PNG at ``path``."""
    return report_plot.save(figure(doc), path)


def figure(doc: dict[str, Any]) -> Any:
    """The matplotlib figure :func:`plot` saves (Agg backend: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    cases = [c for c in doc.get("cases", []) if c.get("best")]
    names = [f"{c['matrix']}" + ("" if c["dtype"] == "float32" else " (f64)") for c in cases]
    best_called = [c["best"].get("speedup_called") or 0.0 for c in cases]
    best_kernel = [c["best"].get("speedup_kernel") or 0.0 for c in cases]
    auto_kernel = []
    for c in cases:
        auto = c.get("auto") or {}
        ratio = auto.get("over_best")
        sk = c["best"].get("speedup_kernel")
        auto_kernel.append(sk / ratio if ratio and sk else 0.0)
    best_gbps = [c["best"].get("gbps") or 0.0 for c in cases]
    cs_gbps = [(c.get("cusparse") or {}).get("gbps") or 0.0 for c in cases]
    copy = float((doc.get("copy") or {}).get("gbps") or 0.0)

    width = max(8.0, 0.42 * len(cases) + 2)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(width, 9), constrained_layout=True)
    xs = range(len(cases))
    w = 0.27
    ax1.bar([x - w for x in xs], best_called, w, label="best, as called (lean launch)")
    ax1.bar(list(xs), best_kernel, w, label="best, device time")
    ax1.bar([x + w for x in xs], auto_kernel, w, label="auto, device time")
    ax1.axhline(1.0, color="black", lw=0.8)
    ax1.axhline(2.0, color="gray", lw=0.8, ls="--")
    if any(v > 0 for v in best_called + best_kernel):
        ax1.set_yscale("log")
        # plain numbers (0.5, 1, 2) on the log axis, not matplotlib's "2x10^0"
        ax1.yaxis.set_major_formatter(FuncFormatter(lambda value, _: tick_label(value)))
        ax1.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: minor_tick_label(value)))
    ax1.set_ylabel("speedup over cuSPARSE (x)")
    ax1.set_xticks(list(xs))
    ax1.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax1.legend(fontsize=8)
    title = (doc.get("device") or {}).get("name", "GPU")
    ax1.set_title(f"teaal-loops SpMV vs cuSPARSE on {title} ({doc.get('date', '')[:10]})")
    ax2.bar([x - w / 2 for x in xs], best_gbps, w, label="best generated")
    ax2.bar([x + w / 2 for x in xs], cs_gbps, w, label="cuSPARSE")
    if copy:
        ax2.axhline(copy, color="red", lw=1, ls="--", label=f"copy {copy:,.0f} GB/s")
        ax2.axhline(0.8 * copy, color="red", lw=0.6, ls=":", label="80% of copy")
    ax2.set_ylabel("achieved GB/s (compulsory bytes / device time)")
    ax2.set_xticks(list(xs))
    ax2.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax2.legend(fontsize=8)
    return fig
