"""``teaal-loops profile``: launch chosen kernels on one matrix for a profiler (Nsight Compute)."""

from __future__ import annotations

import argparse
from pathlib import Path

from teaal_loops.auto import library_dir
from teaal_loops.bench.profile import find_entry, run_profile, variant_from_label
from teaal_loops.cli.common import DTYPES
from teaal_loops.errors import TeaalLoopsError

ORDER = 70


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "profile",
        help="launch chosen kernels on one matrix, for a profiler (needs a GPU)",
        description=(
            "Launch each --variant (and cuSPARSE with --cusparse) --launches times on one "
            "matrix, timing nothing, so that a profiler observes warm launches, e.g. ncu -k "
            "regex:teaal_spmv --launch-skip 2 --launch-count 1 teaal-loops profile "
            "--bench-matrix banded --variant 'group_mapped[BLOCK_SIZE=8]'. Each result is "
            "compared with cuSPARSE's."
        ),
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--bench-matrix", metavar="NAME",
                       help="a matrix of the bench suites: banded, uniform, rmat-s23, longrows "
                       "(built on the GPU) or a corpus matrix's name")
    where.add_argument("-m", "--matrix", metavar="FILE", help="a Matrix Market file")
    where.add_argument("--synthetic", metavar="KIND:key=value,...",
                       help="a seeded synthetic matrix (as in teaal-loops run)")
    p.add_argument("--variant", action="append", default=[], metavar="LABEL",
                   help="a bench label, e.g. 'merge_path[ITEMS_PER_THREAD=16]' or "
                   "'merge_path@t256' (another block size); the name is a library spec or a "
                   "spec file (repeatable)")
    p.add_argument("--cusparse", action="store_true", help="launch cuSPARSE (A @ x) as well")
    p.add_argument("--launches", type=int, default=3, help="launches of each (default 3)")
    p.add_argument("--dtype", choices=["f32", "f64"], default="f32", help="default f32")
    p.add_argument("--corpus-dir", type=Path, help="folder of .mtx/.mtx.gz corpus matrices")
    p.add_argument("--large-scale", type=float, default=1.0, metavar="F",
                   help="shrink the large classes by F in (0, 1] (default 1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.variant and not args.cusparse:
        raise TeaalLoopsError("nothing to launch: give --variant LABEL and/or --cusparse")
    if args.launches < 1:
        raise TeaalLoopsError(f"--launches {args.launches}: must be at least 1")
    variants = [variant_from_label(label, library_dir()) for label in args.variant]
    entry = find_entry(name=args.bench_matrix, file=args.matrix, synthetic=args.synthetic,
                       corpus_dir=args.corpus_dir, large_scale=args.large_scale)
    run_profile(entry, variants, dtype=DTYPES[args.dtype], launches=args.launches,
                cusparse=args.cusparse)
    return 0
