"""Launch chosen variants (and cuSPARSE) on one matrix a few times, for a profiler to observe.

    ncu --clock-control none -k regex:teaal_spmv --launch-skip 2 --launch-count 1 \\
        --metrics dram__bytes_read.sum,gpu__time_duration.sum \\
        teaal-loops profile --bench-matrix banded --variant 'group_mapped[BLOCK_SIZE=8]'

Nothing is timed here: the profiler measures (bytes moved, occupancy, atomics). The matrix is
an entry of the benchmark suites by name (the ``large`` classes, built on the GPU, or a corpus
matrix), a Matrix Market file or a synthetic one. Variants are named as in the benchmark's
tables (:mod:`teaal_loops.bench.variants`): ``group_mapped[BLOCK_SIZE=32]``, ``merge_path@t256``
(another block size); the name is a library spec or a spec file. Each kernel runs ``launches``
times (zeroing ``y`` first where it accumulates; the first launch also compiles, outside the
kernel), so ``--launch-skip`` of one less profiles a warm launch; its result is compared with
cuSPARSE's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from teaal_loops.bench.loading import load_entry
from teaal_loops.bench.suite import MatrixEntry, build_suite, default_corpus_dir
from teaal_loops.bench.variants import (
    DEFAULT_LAYOUT,
    Variant,
    compile_variant,
    prepare_variant,
)
from teaal_loops.errors import TeaalLoopsError
from teaal_loops.layouts import canonical_layout
from teaal_loops.runtime import backend

_BLOCK_SUFFIX = re.compile(r"@t([0-9]+)$")
# a layout other than CSR (@panels:3), after the block size if there is one
_LAYOUT_SUFFIX = re.compile(r"@(?!t[0-9]+$)([a-z][a-z0-9_]*(?::[0-9a-z]+)?)$", re.IGNORECASE)


def parse_label(label: str) -> tuple[str, dict[str, int]]:
    """``group_mapped[BLOCK_SIZE=32,X=1]`` -> ``("group_mapped", {"BLOCK_SIZE": 32, "X": 1})``."""
    name, _, rest = label.partition("[")
    params: dict[str, int] = {}
    if rest:
        if not rest.endswith("]"):
            raise TeaalLoopsError(f"variant label {label!r}: expected spec[NAME=VALUE,...]")
        for item in filter(None, rest[:-1].split(",")):
            key, sep, value = item.partition("=")
            if not sep or not key.strip().isidentifier() or not value.strip().isdigit():
                raise TeaalLoopsError(f"variant label {label!r}: {item!r} is not NAME=INTEGER")
            params[key.strip()] = int(value)
    if not name.strip():
        raise TeaalLoopsError(f"variant label {label!r}: no spec name")
    return name.strip(), params


def variant_from_label(label: str, library: Path) -> Variant:
    """The variant a table label names: a library spec (or a spec file), parameters, and an
    optional ``@tN`` block size and an optional layout (``@panels:3``), as the bench labels them."""
    layout_match = _LAYOUT_SUFFIX.search(label)
    layout = DEFAULT_LAYOUT
    if layout_match:
        layout = canonical_layout(layout_match.group(1))  # an unknown layout: one line
        label = label[: layout_match.start()]
    block = _BLOCK_SUFFIX.search(label)
    base = label[: block.start()] if block else label
    name, params = parse_label(base)
    path = Path(name) if name.endswith((".yaml", ".yml")) else library / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in library.glob("*.yaml")))
        raise TeaalLoopsError(f"--variant {label}: no spec {path} (library specs: {known})")
    threads = int(block.group(1)) if block else None
    if threads is not None and (not 32 <= threads <= 1024 or threads % 32):
        raise TeaalLoopsError(f"--variant {label}: @t{threads} is not a multiple of 32 from 32 "
                              "to 1024")
    return Variant(path, params, layout, block_threads=threads)


def find_entry(
    *,
    name: str | None = None,
    file: str | None = None,
    synthetic: str | None = None,
    corpus_dir: Path | None = None,
    large_scale: float = 1.0,
) -> MatrixEntry:
    """The one matrix to profile: a suite entry by ``name``, a ``file`` or a ``synthetic`` one."""
    if sum(x is not None for x in (name, file, synthetic)) != 1:
        raise TeaalLoopsError("give one matrix: --bench-matrix NAME, -m FILE or --synthetic ...")
    if file is not None or synthetic is not None:
        return build_suite(files=[file] if file else [],
                           synthetic=[synthetic] if synthetic else [])[0]
    has_corpus = corpus_dir is not None or default_corpus_dir() is not None
    suites = ["large"] + (["corpus"] if has_corpus else [])
    entries = build_suite(suites, corpus_dir=corpus_dir, large_scale=large_scale)
    # the large classes by their full-size names too (banded, rmat-s23), whatever the scale
    full_size = [e.name for e in build_suite(["large"])]
    for i, entry in enumerate(entries):
        if entry.name == name or (entry.group == "large" and full_size[i] == name):
            return entry
    large = ", ".join(full_size)
    where = "" if has_corpus else " (no corpus folder found: --corpus-dir)"
    raise TeaalLoopsError(f"--bench-matrix {name}: not a large class ({large}) or a corpus "
                          f"matrix{where}")


def run_profile(
    entry: MatrixEntry,
    variants: Sequence[Variant],
    *,
    dtype: str = "float32",
    launches: int = 3,
    cusparse: bool = False,
    say: Callable[[str], None] = print,
) -> None:
    """Launch every variant ``launches`` times on ``entry`` (GPU; module docstring)."""

    if launches < 1:
        raise TeaalLoopsError(f"--launches {launches}: must be at least 1")
    cp = backend.cupy_module()  # a one-line error without a GPU, before cupyx is imported
    import cupyx.scipy.sparse as csp

    indptr, indices, data, shape, stats = load_entry(cp, entry, seed=1)
    values = data.astype(dtype, copy=False)
    A = csp.csr_matrix((values, indices, indptr), shape=shape, copy=False)
    x = (cp.random.RandomState(7).random_sample(shape[1]) * 2 - 1).astype(dtype)
    ref = (A @ x).astype(cp.float64)
    say(f"{entry.name}: {shape[0]} rows, {int(indices.size)} nonzeros, longest row {stats.max}")
    for variant in variants:
        kernel = compile_variant(variant, dtype)
        prepared = prepare_variant(kernel, variant, [A])[0]
        y = kernel.new_output(prepared)
        for _ in range(launches):
            kernel.zero_output(prepared, y)
            kernel.launch(prepared, x, y)
        cp.cuda.Device().synchronize()
        err = float(cp.abs(y.astype(cp.float64) - ref).max()) if y.size else 0.0
        say(f"{variant.label}: {prepared.grid[0]} blocks x {prepared.block[0]} threads, "
            f"max |y - cuSPARSE| = {err:.3g}")
    if cusparse:
        for _ in range(launches):
            A @ x
        cp.cuda.Device().synchronize()
        say(f"cuSPARSE (A @ x): {launches} launches")
