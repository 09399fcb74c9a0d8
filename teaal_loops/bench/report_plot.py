"""The PNG of a schema-2 results document: per case (kernel, width, matrix), the best variant's
speedup over the best cuSPARSE (device time and throughput) and over the second column, and
the achieved GB/s of the best variant and of the best cuSPARSE against the measured copy
bandwidth (matplotlib with the Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teaal_loops.bench.report_format import minor_tick_label, tick_label

WIDTH_NAMES = {"spmm": "N", "sddmm": "K"}


def case_name(case: dict[str, Any]) -> str:
    """``uniform-r20 spmm N=32`` (SpMV: the matrix alone), `` (f64)`` for float64."""
    kernel = str(case.get("kernel", "spmv"))
    name = str(case.get("matrix"))
    if kernel in WIDTH_NAMES:
        name += f" {kernel} {WIDTH_NAMES[kernel]}={case.get('width')}"
    return name + ("" if case.get("dtype") == "float32" else " (f64)")


def plot(doc: dict[str, Any], path: str | Path) -> Path:
    """Write :func:`figure` as a PNG at ``path``."""
    return save(figure(doc), path)


def save(fig: Any, path: str | Path) -> Path:
    """A matplotlib figure as a PNG at ``path`` (folders made; the figure closed after)."""
    import matplotlib.pyplot as plt

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.savefig(out, dpi=110)
    finally:
        plt.close(fig)
    return out


def figure(doc: dict[str, Any]) -> Any:
    """The matplotlib figure :func:`plot` saves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    cases = [c for c in doc.get("cases", []) if c.get("best")]
    names = [case_name(c) for c in cases]

    def best(c: dict[str, Any], key: str, way: str) -> float:
        return float((c["best"].get(key) or {}).get(way) or 0.0)

    device = [best(c, "speedup", "kernel") for c in cases]
    throughput = [best(c, "speedup", "throughput") for c in cases]
    second = [best(c, "second_speedup", "kernel") for c in cases]
    best_gbps = [c["best"].get("gbps") or 0.0 for c in cases]
    cs_gbps = [(c.get("cusparse") or {}).get("gbps") or 0.0 for c in cases]
    copy = float((doc.get("copy") or {}).get("gbps") or 0.0)

    width = max(8.0, 0.42 * len(cases) + 2)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(width, 9), constrained_layout=True)
    xs = list(range(len(cases)))
    w = 0.27
    ax1.bar([x - w for x in xs], device, w, label="best, device time, over the best cuSPARSE")
    ax1.bar(xs, throughput, w, label="best, throughput, over the best cuSPARSE")
    ax1.bar([x + w for x in xs], second, w, label="best, device time, over the second column")
    ax1.axhline(1.0, color="black", lw=0.8)
    ax1.axhline(2.0, color="gray", lw=0.8, ls="--")
    if any(v > 0 for v in device + throughput + second):
        ax1.set_yscale("log")
        ax1.yaxis.set_major_formatter(FuncFormatter(lambda value, _: tick_label(value)))
        ax1.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: minor_tick_label(value)))
    ax1.set_ylabel("speedup (x)")
    ax1.set_xticks(xs)
    ax1.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax1.legend(fontsize=8)
    title = (doc.get("device") or {}).get("name", "GPU")
    ax1.set_title(f"teaal-loops against the best cuSPARSE on {title} "
                  f"({str(doc.get('date', ''))[:10]})")
    ax2.bar([x - w / 2 for x in xs], best_gbps, w, label="best generated")
    ax2.bar([x + w / 2 for x in xs], cs_gbps, w, label="best cuSPARSE")
    if copy:
        ax2.axhline(copy, color="red", lw=1, ls="--", label=f"copy {copy:,.0f} GB/s")
        ax2.axhline(0.8 * copy, color="red", lw=0.6, ls=":", label="80% of copy")
    ax2.set_ylabel("achieved GB/s (compulsory bytes / device time)")
    ax2.set_xticks(xs)
    ax2.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax2.legend(fontsize=8)
    return fig
