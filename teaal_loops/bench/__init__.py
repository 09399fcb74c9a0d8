"""Benchmarks: generated SpMV, SpMM and SDDMM kernels against the best cuSPARSE, with a
compulsory-bytes roofline.

    from teaal_loops import bench
    doc = bench.bench(suites=["corpus", "large", "spmm"], json_path="out/results.json")
    print(bench.markdown(doc, plot_name="results.png"))
    bench.plot(doc, "out/results.png")

:func:`bench` runs chosen specs x layouts x dtypes (default: our spec library with
:data:`~teaal_loops.bench.variants.DEFAULT_SWEEPS`, and :mod:`teaal_loops.bench.plan`'s for the
dense kernels) on suites of matrices, against the strongest cuSPARSE a CuPy user can reach
(:mod:`teaal_loops.bench.baselines`) and a one-line second column in the same process, and
returns the results document (also written as JSON). :mod:`teaal_loops.bench.harness` says how
a run goes, :mod:`teaal_loops.bench.sides` how every number is measured,
:mod:`teaal_loops.bench.results` how targets are judged, :mod:`teaal_loops.bench.roofline` what
the bandwidth is relative to. Only running needs a GPU; reports are regenerated from the JSON
anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from teaal_loops.bench import plan
from teaal_loops.bench.case_split import parse_split
from teaal_loops.bench.context import BenchOptions, SplitAt
from teaal_loops.bench.harness import run_bench
from teaal_loops.bench.plan import (
    DEFAULT_WIDTHS,
    SCHEDULE_CHOICES,
    kernel_variants,
    library_specs,
    parse_widths,
    variants_for,
)
from teaal_loops.bench.progress import Progress
from teaal_loops.bench.records import check_output_path, write_json
from teaal_loops.bench.report import markdown, plot
from teaal_loops.bench.results import load, summarize
from teaal_loops.bench.roofline import compulsory_bytes, gbps, roofline
from teaal_loops.bench.suite import KERNEL_OF_SUITE, SUITES, MatrixEntry, build_plan, build_suite
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
    l2_persist: bool = False,
    widths: Mapping[str, Sequence[int]] | None = None,
    splits: Sequence[int | str | SplitAt] = (),
    kernels: Sequence[str] = (),
    reps: int = 25,
    warmup: int = 5,
    max_copies: int = 32,
    time_budget_s: float | None = None,
    json_path: str | Path | None = None,
    command: str = "",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Build the suite and the variants, run them (GPU), return the results document.

    ``kernels`` are those the single matrices (``files``, ``synthetic``) run (default: the
    suites' kernels, or the forms of ``specs``, or SpMV); ``widths`` SpMM's N and SDDMM's K
    (default :data:`DEFAULT_WIDTHS`). ``block_threads`` times every SpMV variant at those
    block sizes too; ``sources`` adds, per ``(label, file)``, the variant ``label`` launching
    ``file`` (:mod:`.variants`); ``l2_persist`` times every SpMV variant also with x held
    persisting in L2 (label ``+l2persist``); ``splits`` times every SpMV and SpMM case also
    split at its heavy rows, at each of these panel widths, ``W`` or ``W:MIN`` (heavy from MIN
    nonzeros; :mod:`.case_split`)."""

    check_splits(splits)  # a bad width is refused before any matrix is read
    if not kernels and not suites and specs:
        from_specs = [plan.spec_kernel(Path(s)) for s in specs]
        kernels = tuple(dict.fromkeys(from_specs))
    items = build_plan(
        suites,
        files=files,
        synthetic=synthetic,
        corpus_dir=Path(corpus_dir) if corpus_dir else None,
        large_scale=large_scale,
        only=only,
        custom_kernels=kernels,
    )
    wanted = tuple(dict.fromkeys(k for item in items for k in item.kernels))
    splits = check_splits(splits, wanted)
    by_kernel, wants_auto = kernel_variants(
        specs, wanted, sweeps=sweeps, params=params, layouts=layouts, schedule=schedule
    )
    by_kernel = _with_experiments(by_kernel, block_threads, sources, l2_persist)
    options = BenchOptions(
        entries=[item.entry for item in items],
        variants=by_kernel.get("spmv", []),
        dtypes=tuple(normalize_dtype(d) for d in dtypes),
        reps=reps,
        warmup=warmup,
        auto=auto or wants_auto,
        only_auto=schedule == "auto",
        max_copies=max_copies,
        command=command,
        time_budget_s=time_budget_s,
        json_path=Path(json_path) if json_path else None,
        plan=items,
        kernel_variants=by_kernel,
        widths=dict(widths) if widths is not None else dict(DEFAULT_WIDTHS),
        splits=splits,
    )
    return run_bench(options, progress)


def check_splits(splits: Sequence[int | str | SplitAt],
                 kernels: Sequence[str] | None = None) -> tuple[SplitAt, ...]:
    """The splits of ``--split`` (``W`` or ``W:MIN``, :func:`.case_split.parse_split`);
    refused where ``kernels`` (the run's, when known) hold neither SpMV nor SpMM (what a split
    times)."""
    wanted = tuple(dict.fromkeys(parse_split(s) for s in splits))
    if wanted and kernels is not None and not {"spmv", "spmm"} & set(kernels):
        raise TeaalLoopsError(f"--split {wanted[0].name.removeprefix('split:')}: a split times "
                              "SpMV and SpMM; add a suite or specs of either to the run")
    return wanted


def _with_experiments(
    by_kernel: dict[str, list[Variant]],
    block_threads: Sequence[int],
    sources: Sequence[tuple[str, Path]],
    l2_persist: bool = False,
) -> dict[str, list[Variant]]:
    """Every kernel's variants also at ``block_threads``; each source file beside the variant
    it names, in whichever kernel times it (one line when none does)."""
    out: dict[str, list[Variant]] = {}
    used: set[str] = set()
    for kernel, variants in by_kernel.items():
        labels = {v.label for v in with_experiments(variants, block_threads=block_threads)}
        mine = [(label, path) for label, path in sources if label in labels]
        used.update(label for label, _ in mine)
        out[kernel] = with_experiments(variants, block_threads=block_threads, sources=mine,
                                       l2_persist=l2_persist and kernel == "spmv")
    unused = [(label, path) for label, path in sources if label not in used]
    if unused:  # with_experiments says which label is not timed, and lists those that are
        with_experiments([v for vs in by_kernel.values() for v in vs], sources=unused)
    return out


__all__ = [
    "DEFAULT_SWEEPS",
    "DEFAULT_WIDTHS",
    "KERNEL_OF_SUITE",
    "SCHEDULE_CHOICES",
    "SUITES",
    "BenchOptions",
    "MatrixEntry",
    "Progress",
    "Variant",
    "bench",
    "build_plan",
    "build_suite",
    "check_output_path",
    "compulsory_bytes",
    "expand",
    "gbps",
    "kernel_variants",
    "library_specs",
    "load",
    "markdown",
    "parse_block_threads",
    "parse_sources",
    "parse_sweep",
    "parse_widths",
    "plot",
    "roofline",
    "run_bench",
    "summarize",
    "variants_for",
    "with_experiments",
    "write_json",
]
