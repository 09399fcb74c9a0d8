"""Benchmarks: generated schedules against cuSPARSE, with a compulsory-bytes roofline.

    from teaal_loops import bench
    doc = bench.bench(suites=["corpus", "large"], json_path="out/results.json")
    print(bench.markdown(doc, plot_name="results.png"))
    bench.plot(doc, "out/results.png")

:func:`bench` runs chosen specs x layouts x dtypes (default: our spec library with
:data:`~teaal_loops.bench.variants.DEFAULT_SWEEPS`) on a suite of matrices, against cuSPARSE
through CuPy in the same process, and returns the results document (also written as JSON).
:mod:`teaal_loops.bench.harness` says how every number is measured,
:mod:`teaal_loops.bench.results` how targets are judged, :mod:`teaal_loops.bench.roofline` what
the bandwidth is relative to. Only running needs a GPU; reports are regenerated from the JSON
anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from teaal_loops import auto
from teaal_loops.auto import library_dir
from teaal_loops.bench.harness import BenchOptions, run_bench
from teaal_loops.bench.progress import Progress
from teaal_loops.bench.records import check_output_path, write_json
from teaal_loops.bench.report import markdown, plot
from teaal_loops.bench.results import load, summarize
from teaal_loops.bench.roofline import compulsory_bytes, gbps, roofline
from teaal_loops.bench.suite import SUITES, MatrixEntry, build_suite
from teaal_loops.bench.variants import (
    DEFAULT_SWEEPS,
    Variant,
    expand,
    parse_block_threads,
    parse_sources,
    parse_sweep,
    with_experiments,
)
from teaal_loops.codegen.config import normalize_dtype
from teaal_loops.errors import TeaalLoopsError
from teaal_loops.lowering import lower
from teaal_loops.schedules import schedule_kinds
from teaal_loops.spec import load_spec

SCHEDULE_CHOICES = ("all", "auto", *schedule_kinds())


def library_specs() -> list[Path]:
    """Every spec of our library (``specs/*.yaml``), sorted by name."""

    return sorted(library_dir().glob("*.yaml"))


def variants_for(
    specs: Sequence[str | Path] = (),
    *,
    sweeps: Mapping[str, Sequence[int | str]] | None = None,
    params: Mapping[str, int] | None = None,
    layouts: Sequence[str] = ("csr",),
    schedule: str = "all",
) -> tuple[list[Variant], bool]:
    """The variants to time and whether ``auto`` was asked for (by ``schedule`` or a spec).

    Without ``specs`` the library is used, with :data:`DEFAULT_SWEEPS` unless ``sweeps`` is
    given. ``schedule`` keeps only the variants of one schedule kind (``auto``: none, the auto
    choice alone is timed). A spec saying ``x-teaal-loops: {schedule: auto}`` asks for the auto
    choice instead of being timed itself.
    """

    if schedule not in SCHEDULE_CHOICES:
        raise TeaalLoopsError(
            f"--schedule {schedule!r}: expected one of {', '.join(SCHEDULE_CHOICES)}"
        )
    paths = [Path(s) for s in specs] or library_specs()
    if sweeps is None:
        sweeps = DEFAULT_SWEEPS if not specs else {}
    wants_auto = schedule == "auto"
    described: list[tuple[Path, Sequence[str]]] = []
    for path in paths:
        spec = load_spec(path)
        if auto.is_auto(spec):
            wants_auto = True
            continue
        if schedule not in ("all", "auto") and lower(spec).kind != schedule:
            continue
        described.append((path, tuple(spec.parameters)))
    if schedule == "auto":
        return [], True
    variants = expand(described, sweeps=sweeps, fixed=params, layouts=layouts)
    if not variants and not wants_auto:
        raise TeaalLoopsError(f"no spec left to benchmark for --schedule {schedule}")
    return variants, wants_auto


def bench(
    specs: Sequence[str | Path] = (),
    *,
    suites: Sequence[str] = ("corpus",),
    files: Sequence[str] = (),
    synthetic: Sequence[str] = (),
    only: Sequence[str] = (),
    corpus_dir: str | Path | None = None,
    large_scale: float = 1.0,
    dtypes: Sequence[str] = ("float32",),
    layouts: Sequence[str] = ("csr",),
    sweeps: Mapping[str, Sequence[int | str]] | None = None,
    params: Mapping[str, int] | None = None,
    schedule: str = "all",
    auto: bool = True,
    block_threads: Sequence[int] = (),
    sources: Sequence[tuple[str, Path]] = (),
    reps: int = 25,
    warmup: int = 5,
    max_copies: int = 32,
    time_budget_s: float | None = None,
    json_path: str | Path | None = None,
    command: str = "",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Build the suite and the variants, run them (GPU), return the results document.

    ``block_threads`` times every variant at those block sizes too; ``sources`` adds, per
    ``(label, file)``, the variant ``label`` launching ``file`` (:mod:`.variants`)."""

    entries = build_suite(
        suites,
        files=files,
        synthetic=synthetic,
        corpus_dir=Path(corpus_dir) if corpus_dir else None,
        large_scale=large_scale,
        only=only,
    )
    variants, wants_auto = variants_for(
        specs, sweeps=sweeps, params=params, layouts=layouts, schedule=schedule
    )
    variants = with_experiments(variants, block_threads=block_threads, sources=sources)
    options = BenchOptions(
        entries=entries,
        variants=variants,
        dtypes=tuple(normalize_dtype(d) for d in dtypes),
        reps=reps,
        warmup=warmup,
        auto=auto or wants_auto,
        only_auto=schedule == "auto",
        max_copies=max_copies,
        command=command,
        time_budget_s=time_budget_s,
        json_path=Path(json_path) if json_path else None,
    )
    return run_bench(options, progress)


__all__ = [
    "DEFAULT_SWEEPS",
    "SCHEDULE_CHOICES",
    "SUITES",
    "BenchOptions",
    "MatrixEntry",
    "Progress",
    "Variant",
    "bench",
    "build_suite",
    "check_output_path",
    "compulsory_bytes",
    "expand",
    "gbps",
    "library_specs",
    "load",
    "markdown",
    "parse_block_threads",
    "parse_sources",
    "parse_sweep",
    "plot",
    "roofline",
    "run_bench",
    "summarize",
    "variants_for",
    "with_experiments",
    "write_json",
]
