"""Launch chosen variants (and cuSPARSE) on one matrix a few times, for a profiler to observe.

    ncu --clock-control none -k 'regex:teaal_spmv|csrmv|spmv' --metrics ... \\
        python3 -m teaal_loops.bench.profile --matrix banded --variant merge_path --cusparse

Nothing is timed here: the profiler measures (bytes moved, occupancy, atomics). ``--matrix``
names an entry of the ``large`` suite (``banded``, ``uniform``, ``rmat-s23``, ``longrows``) or a
corpus matrix; ``--variant`` takes benchmark labels such as ``group_mapped[BLOCK_SIZE=32]``.
Each kernel runs ``--launches`` times (the first one also compiles, outside the kernel).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from teaal_loops.errors import TeaalLoopsError


def parse_label(label: str) -> tuple[str, dict[str, int]]:
    """``group_mapped[BLOCK_SIZE=32,X=1]`` -> ``("group_mapped", {"BLOCK_SIZE": 32, "X": 1})``."""
    name, _, rest = label.partition("[")
    params: dict[str, int] = {}
    if rest:
        if not rest.endswith("]"):
            raise TeaalLoopsError(f"variant label {label!r}: expected spec[NAME=VALUE,...]")
        for item in filter(None, rest[:-1].split(",")):
            key, sep, value = item.partition("=")
            if not sep or not value.strip().isdigit():
                raise TeaalLoopsError(f"variant label {label!r}: {item!r} is not NAME=INTEGER")
            params[key.strip()] = int(value)
    if not name.strip():
        raise TeaalLoopsError(f"variant label {label!r}: no spec name")
    return name.strip(), params


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m teaal_loops.bench.profile", description=__doc__)
    p.add_argument("--matrix", required=True)
    p.add_argument("--variant", action="append", default=[])
    p.add_argument("--cusparse", action="store_true")
    p.add_argument("--launches", type=int, default=2)
    p.add_argument("--corpus-dir", type=Path)
    p.add_argument("--dtype", default="float32")
    args = p.parse_args(argv)
    try:
        run(args)
    except TeaalLoopsError as err:
        print(str(err), file=sys.stderr)
        return 2
    return 0


def run(args: argparse.Namespace) -> None:
    import cupyx.scipy.sparse as csp

    from teaal_loops.auto import library_dir
    from teaal_loops.bench.harness import BenchOptions, _Runner
    from teaal_loops.bench.suite import build_suite
    from teaal_loops.pipeline import compile_for
    from teaal_loops.runtime import backend

    cp = backend.cupy_module()
    suites = ["large"] + (["corpus"] if args.corpus_dir else [])
    entries = [e for e in build_suite(suites, corpus_dir=args.corpus_dir) if e.name == args.matrix]
    if not entries:
        raise TeaalLoopsError(f"--matrix {args.matrix}: not in the large suite or the corpus")
    loader = _Runner(cp, None, backend.device_info(), BenchOptions([], []), 0.0, None)
    indptr, indices, data, shape, stats = loader._load(entries[0])
    values = data.astype(args.dtype, copy=False)
    A = csp.csr_matrix((values, indices, indptr), shape=shape, copy=False)
    x = cp.random.RandomState(1).random_sample(shape[1]).astype(args.dtype)
    print(f"{args.matrix}: {shape[0]} rows, {int(indices.size)} nonzeros; max row {stats.max}",
          file=sys.stderr)
    for label in args.variant:
        name, params = parse_label(label)
        kernel = compile_for(library_dir() / f"{name}.yaml", A, dtype=args.dtype, params=params)
        prepared = kernel.prepare(A)
        y = kernel.new_output(prepared)
        for _ in range(args.launches):
            kernel.zero_output(prepared, y)
            kernel.launch(prepared, x, y)
        cp.cuda.Device().synchronize()
        print(f"{label}: {prepared.grid[0]} blocks x {prepared.block[0]}", file=sys.stderr)
    if args.cusparse:
        for _ in range(args.launches):
            A @ x
        cp.cuda.Device().synchronize()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
