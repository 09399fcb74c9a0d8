"""``teaal-loops bench``: time generated schedules against cuSPARSE; JSON, markdown and a plot."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from teaal_loops import auto, bench
from teaal_loops.bench import SCHEDULE_CHOICES, fit_auto
from teaal_loops.cli.common import DTYPES, parse_params
from teaal_loops.errors import Location, TeaalLoopsError

ORDER = 60


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "bench",
        help="benchmark generated schedules against cuSPARSE (needs a GPU but for --report and "
        "--fit-auto)",
        description=(
            "Run specs x layouts x dtypes over suites of matrices against the strongest cuSPARSE "
            "a CuPy user can reach (descriptors and buffers made once, every algorithm tried, "
            "the best kept; preprocessing and SDDMM through nvmath-python where installed) and a "
            "one-line second column (cupyx's A @ x / A @ B), in the same process: every result "
            "checked within a rounding bound before it is timed, CUDA events, medians of device "
            "time, throughput, latency and graph replays, inputs rotated when they fit in L2, a "
            "device-to-device copy measured for the roofline. Writes JSON, and optionally a "
            "markdown table and a PNG plot. Without SPEC, the spec library runs (SpMV with a "
            "sweep of group sizes and work per thread, plus the auto choice; specs/spmm and "
            "specs/sddmm for the dense suites)."
        ),
    )
    p.add_argument("specs", nargs="*", metavar="SPEC", help="spec files (default: specs/*.yaml)")
    p.add_argument(
        "--suite",
        action="append",
        choices=list(bench.SUITES),
        help="suite (repeatable; default corpus unless -m/--synthetic are given): SpMV on "
        "corpus, large (six classes over a GB) or smoke (small copies); spmm and sddmm: that "
        "kernel on the corpus and four synthetic classes of 2**20 rows, at every --widths",
    )
    p.add_argument("--widths", action="append", default=[], metavar="[spmm:|sddmm:]W,...",
                   help="dense widths: SpMM's N (default 8,32,128) and SDDMM's K (default "
                   "32,128); W,... sets both, spmm:W,... or sddmm:W,... one (repeatable)")
    p.add_argument("-m", "--matrix", action="append", default=[], metavar="FILE",
                   help="a Matrix Market file (repeatable); single matrices run the kernels of "
                   "the suites given, else of the specs given, else SpMV")
    p.add_argument("--synthetic", action="append", default=[], metavar="KIND:key=value,...",
                   help="a CPU-generated synthetic matrix (repeatable)")
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="keep only the matrices of this name (repeatable)")
    p.add_argument("--corpus-dir", type=Path, help="folder of .mtx/.mtx.gz corpus matrices")
    p.add_argument("--large-scale", type=float, default=1.0, metavar="F",
                   help="shrink the large synthetic matrices by F in (0, 1] (default 1)")
    p.add_argument("--dtype", action="append", choices=sorted(DTYPES),
                   help="value type (repeatable; default f32)")
    p.add_argument("--layout", action="append",
                   help="SpMV layouts (repeatable; default csr); the dense suites run CSR")
    p.add_argument("--split", action="append", default=[], metavar="W[:MIN]",
                   help="also time every SpMV and SpMM case split at its heavy rows "
                   "(repeatable): rows of at least MIN nonzeros (default 4096) heavy, the "
                   "light rows in CSR and the heavy rows in pieces:W, each under the fastest "
                   "of the run's variants, then the two as one timed pair "
                   "(teaal_loops.split_heavy; label split:W[...], split:W:MIN[...])")
    p.add_argument("--param", "-p", action="append", default=[], metavar="NAME=VALUE",
                   help="bind a parameter in every spec that has it (repeatable)")
    p.add_argument("--sweep", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="time each value of a parameter ('default' = unbound); repeatable")
    p.add_argument("--no-sweep", action="store_true", help="library specs with default parameters")
    p.add_argument(
        "--schedule",
        default="all",
        choices=list(SCHEDULE_CHOICES),
        help="time every variant (all, default), only one schedule kind, or only the auto choice",
    )
    p.add_argument("--no-auto", action="store_true", help="do not time the auto choice")
    p.add_argument("--reps", type=int, default=25, help="timed repetitions (median; default 25)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up launches (default 5)")
    p.add_argument("--max-copies", type=int, default=32,
                   help="most input copies rotated to defeat the L2 cache (default 32)")
    p.add_argument("--time-budget", type=float, metavar="SECONDS",
                   help="start no new case after this long (the JSON says what was skipped)")
    p.add_argument("--block-threads", action="append", default=[], metavar="N[,N...]",
                   help="also time every variant at these thread-block sizes (label @tN)")
    p.add_argument("--source", action="append", default=[], metavar="LABEL=FILE",
                   help="also time variant LABEL launching FILE's CUDA (e.g. the same spec "
                   "generated at an earlier commit) with the same arguments (repeatable)")
    p.add_argument("--l2-persist", action="store_true",
                   help="also time every SpMV variant with x held persisting in L2 (an "
                   "access-policy window on the launch stream; label +l2persist)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE",
                   help="results JSON (default bench-results.json); with --fit-auto the "
                   "constants file (default: the one auto reads, teaal_loops/auto_constants.json)")
    p.add_argument("--markdown", type=Path, metavar="FILE", help="also write a markdown report")
    p.add_argument("--plot", type=Path, metavar="FILE", help="also write a PNG plot")
    p.add_argument("--report", type=Path, metavar="JSON",
                   help="no GPU: regenerate --markdown / --plot from an existing results JSON")
    p.add_argument("--fit-auto", type=Path, nargs="+", metavar="JSON",
                   help="no GPU: refit auto's constants to the measured times of results JSONs "
                   "(pooled; each dtype they hold fitted on its own) and write the constants "
                   "file (see teaal_loops.bench.fit_auto)")
    p.add_argument("--per-device", action="store_true",
                   help="with --fit-auto: fit each GPU model the results name on its own cases "
                   "and write sections used on that model alone")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.per_device and not args.fit_auto:
        raise TeaalLoopsError("--per-device goes with --fit-auto")
    if args.fit_auto:
        return _fit_auto(args)
    for path in (args.output, args.markdown, args.plot):
        if path is not None:
            bench.check_output_path(path)
    if args.report:
        doc = bench.load(args.report)
    else:
        if args.reps < 1 or args.warmup < 0 or args.max_copies < 1:
            raise TeaalLoopsError("--reps and --max-copies must be positive, --warmup >= 0")
        sweeps = bench.parse_sweep(args.sweep) if args.sweep else None
        if args.no_sweep:
            sweeps = {}
        suites = args.suite or ([] if args.matrix or args.synthetic else ["corpus"])
        progress = bench.Progress(enabled=not args.quiet)
        output = args.output or Path("bench-results.json")
        doc = bench.bench(
            args.specs,
            suites=suites,
            files=args.matrix,
            synthetic=args.synthetic,
            only=args.only,
            corpus_dir=args.corpus_dir,
            large_scale=args.large_scale,
            dtypes=args.dtype or ["f32"],
            layouts=args.layout or ["csr"],
            sweeps=sweeps,
            params=parse_params(args.param),
            schedule=args.schedule,
            auto=not args.no_auto,
            block_threads=bench.parse_block_threads(args.block_threads),
            sources=bench.parse_sources(args.source),
            l2_persist=args.l2_persist,
            widths=bench.parse_widths(args.widths),
            splits=args.split,
            reps=args.reps,
            warmup=args.warmup,
            max_copies=args.max_copies,
            time_budget_s=args.time_budget,
            json_path=output,
            command="teaal-loops " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
            progress=progress,
        )
        print(f"results: {output}", file=sys.stderr)
    plot_name = None
    if args.plot:
        _writing(args.plot, lambda: bench.plot(doc, args.plot))
        plot_name = args.plot.name
        print(f"plot: {args.plot}", file=sys.stderr)
    text = bench.markdown(doc, plot_name=plot_name)
    if args.markdown:
        _writing(args.markdown, lambda: _write_text(args.markdown, text))
        print(f"markdown: {args.markdown}", file=sys.stderr)
    else:
        print(text)
    return 0


def _fit_auto(args: argparse.Namespace) -> int:
    """``--fit-auto JSON...``: refit auto's constants, write them, say what moved."""

    if args.report or args.markdown or args.plot:
        raise TeaalLoopsError("--fit-auto writes only the constants file: drop --report, "
                              "--markdown and --plot")
    output = args.output or auto.CONSTANTS_FILE
    bench.check_output_path(output)
    docs = [(bench.load(path, need_stats=True), str(path)) for path in args.fit_auto]
    fits = fit_auto.fit_documents(docs, per_device=args.per_device)
    _writing(output, lambda: fit_auto.write_constants(fits, output))
    for f in fits:
        before, after = f.result.before, f.result.after
        section = f.dtype if f.device is None else f"{f.device}, {f.dtype}"
        print(f"{section}: auto within {fit_auto.FIT_SLACK:.2f}x of the best: "
              f"{before.within}/{before.of} -> {after.within}/{after.of} (geomean over best "
              f"{before.geomean_ratio:.3f} -> {after.geomean_ratio:.3f}), {f.result.rounds} rounds")
        for name, (old, new) in f.result.changed(f.start).items():
            print(f"  {name}: {old} -> {new}")
    print(f"constants: {output}")
    return 0


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _writing(path: Path, write: Callable[[], object]) -> None:
    """Run ``write``; an OS error (a full disk, a parent that is a file) is one line."""

    try:
        write()
    except OSError as err:
        raise TeaalLoopsError(f"cannot write: {err.strerror or err}",
                              location=Location(str(path))) from None
