"""What a benchmark runs on: matrix entries grouped into named suites.

Suites (``--suite``, repeatable):

``corpus``
    Every ``.mtx`` / ``.mtx.gz`` file of the corpus folder (``--corpus-dir``; by default
    ``$TEAAL_LOOPS_CORPUS/matrices``, ``corpus_carry/matrices`` or ``corpus_carry/`` in the
    working directory or the checkout, or the shared corpus beside the checkout: the first one
    that holds matrix files).
``large``
    Six synthetic structure classes, each over a gigabyte of float32 CSR so that no cache
    holds it, generated on the GPU (:mod:`teaal_loops.bench.generate`):
    banded (2**23 rows x 32 a row, 268M nonzeros), uniform (2**23 rows, 134M), rmat (scale 23,
    160M edges before merging duplicates), longrows (2**22 rows, 134M; 128 rows of ~1M),
    powerlaw (2**23 rows, 134M; the project's power-law graph, ``matrix.rowwise.PowerLaw``:
    Pareto row lengths, hot low-numbered columns) and emptyrows (2**23 rows, half of them
    empty, 134M).
    ``--large-scale F`` shrinks rows and nonzeros by F (for smoke runs).
``smoke``
    The large classes at 1/256 of their size plus three small corpus matrices, for a quick
    check that everything runs.
``spmm``, ``sddmm``
    The dense-operand kernels (SpMM ``Z = A B``, SDDMM ``Z = C * (A B)``) on four synthetic
    classes sized for them and then on every corpus matrix (:func:`dense_large_classes`: 2**20
    rows, about 16M nonzeros, so that the dense operands of N = K = 128 still fit beside the
    matrix and a launch takes milliseconds, not seconds), at each dense width
    (:mod:`teaal_loops.bench.plan`).

The first three suites run SpMV. Single matrices run the kernels of the suites named with them
(SpMV when none is, or the forms of the specs given): :func:`build_plan` pairs every matrix
with its kernels, each matrix loaded once for all of them.

Single matrices: ``-m FILE`` (Matrix Market) and ``--synthetic KIND:key=value,...`` (the CPU
generators of :mod:`teaal_loops.matrix.synthetic`), both repeatable.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teaal_loops.errors import TeaalLoopsError

SUITES = ("corpus", "large", "smoke", "spmm", "sddmm")
KERNEL_OF_SUITE = {"corpus": "spmv", "large": "spmv", "smoke": "spmv", "spmm": "spmm",
                   "sddmm": "sddmm"}
KERNELS = ("spmv", "spmm", "sddmm")
DENSE_LOG2_ROWS = 20  # rows of the dense suites' synthetic classes: 2**20
DENSE_NNZ = 2**24  # their nonzeros (banded: 16 a row)
MATRIX_SUFFIXES = (".mtx", ".mtx.gz")
SMOKE_SCALE = 1 / 256
SMOKE_CORPUS = ("west0067", "cage8", "as-caida20071105")


@dataclass(frozen=True)
class MatrixEntry:
    """One matrix of a suite: where it comes from and which group it is reported in.

    ``origin`` is ``"file"`` (``path`` set), ``"synthetic"`` (CPU generator, ``text`` holds the
    ``KIND:key=value,...`` string) or ``"gpu"`` (``generator`` and ``options`` name a function of
    :mod:`teaal_loops.bench.generate` and its keyword arguments).
    """

    name: str
    group: str  # "corpus", "large", "custom"
    origin: str
    path: Path | None = None
    text: str | None = None
    generator: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """A one-line description for JSON and tables."""
        if self.origin == "file":
            return f"file:{self.path}"
        if self.origin == "synthetic":
            return f"synthetic:{self.text}"
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"gpu:{self.generator}:{opts}"


def _large_classes(scale: float) -> list[MatrixEntry]:
    def rows_of(log2: int) -> int:
        return max(1024, 1 << max(0, round(log2 + math.log2(scale))))

    def nnz_of(n: float) -> int:
        return max(1024, int(n * scale))

    scale23 = max(10, round(23 + math.log2(scale)))
    label = "" if scale == 1 else f"@{scale:g}"
    return [
        MatrixEntry(
            f"banded{label}", "large", "gpu", generator="banded",
            options={"rows": rows_of(23), "width": 32},
        ),
        MatrixEntry(
            f"uniform{label}", "large", "gpu", generator="uniform",
            options={"rows": rows_of(23), "nnz": nnz_of(2**27)},
        ),
        MatrixEntry(
            f"rmat-s{scale23}", "large", "gpu", generator="rmat",
            options={"scale": scale23, "nnz": nnz_of(160e6)},
        ),
        MatrixEntry(
            f"longrows{label}", "large", "gpu", generator="longrows",
            options={"rows": rows_of(22), "nnz": nnz_of(2**27), "long_rows": 128, "fraction": 0.9},
        ),
        MatrixEntry(
            f"powerlaw{label}", "large", "gpu", generator="powerlaw",
            options={"rows": rows_of(23), "nnz": nnz_of(2**27)},
        ),
        MatrixEntry(
            f"emptyrows{label}", "large", "gpu", generator="emptyrows",
            options={"rows": rows_of(23), "nnz": nnz_of(2**27), "empty_fraction": 0.5},
        ),
    ]


def dense_large_classes(scale: float) -> list[MatrixEntry]:
    """The synthetic classes of the ``spmm`` and ``sddmm`` suites (module docstring), shrunk
    by ``scale`` like the large ones; named ``banded-r20`` and so on (``-r<log2 rows>``) so
    that they never clash with the SpMV classes."""
    log2 = max(10, round(DENSE_LOG2_ROWS + math.log2(scale)))
    rows = 1 << log2
    nnz = max(1024, int(DENSE_NNZ * scale))
    label = "" if scale == 1 else f"@{scale:g}"
    return [
        MatrixEntry(f"banded-r{log2}{label}", "large", "gpu", generator="banded",
                    options={"rows": rows, "width": 16}),
        MatrixEntry(f"uniform-r{log2}{label}", "large", "gpu", generator="uniform",
                    options={"rows": rows, "nnz": nnz}),
        MatrixEntry(f"rmat-s{log2}{label}", "large", "gpu", generator="rmat",
                    options={"scale": log2, "nnz": nnz}),
        MatrixEntry(f"longrows-r{log2}{label}", "large", "gpu", generator="longrows",
                    options={"rows": rows, "nnz": nnz, "long_rows": 128, "fraction": 0.9}),
    ]


def default_corpus_dir(repo_root: Path | None = None) -> Path | None:
    """The first existing corpus matrix folder (module docstring order), or None."""
    candidates: list[Path] = []
    env = os.environ.get("TEAAL_LOOPS_CORPUS")
    if env:
        candidates.append(Path(env) / "matrices")
        candidates.append(Path(env))
    root = repo_root or Path(__file__).resolve().parents[2]
    for base in (Path.cwd(), root):  # a copy carried to the device, flat or as corpus/
        candidates += [base / "corpus_carry" / "matrices", base / "corpus_carry"]
    candidates.append(root.parent / "shared" / "corpus" / "matrices")
    for folder in candidates:
        if folder.is_dir() and any(_is_matrix_file(p) for p in folder.iterdir()):
            return folder
    return None


def _is_matrix_file(path: Path) -> bool:
    return path.is_file() and path.name.endswith(MATRIX_SUFFIXES)


def matrix_name(path: Path) -> str:
    """``.../west0067.mtx.gz`` -> ``west0067``."""
    name = path.name
    for suffix in sorted(MATRIX_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def corpus_entries(folder: Path, only: Iterable[str] | None = None) -> list[MatrixEntry]:
    """Every matrix file of ``folder`` (sorted by name), or only those named in ``only``."""
    files = sorted((p for p in folder.iterdir() if _is_matrix_file(p)), key=matrix_name)
    if only is not None:
        wanted = set(only)
        files = [p for p in files if matrix_name(p) in wanted]
    return [MatrixEntry(matrix_name(p), "corpus", "file", path=p) for p in files]


@dataclass(frozen=True)
class PlanItem:
    """One matrix and the kernels (``spmv``, ``spmm``, ``sddmm``) a benchmark runs on it."""

    entry: MatrixEntry
    kernels: tuple[str, ...]


def _suite_entries(suite: str, corpus_dir: Path | None, large_scale: float) -> list[MatrixEntry]:
    if suite not in SUITES:
        raise TeaalLoopsError(f"--suite {suite!r}: unknown suite (known: {', '.join(SUITES)})")
    if suite == "large":
        return _large_classes(large_scale)
    folder = corpus_dir or default_corpus_dir()
    if folder is None or not folder.is_dir():
        where = str(corpus_dir) if corpus_dir else "$TEAAL_LOOPS_CORPUS, ./corpus_carry"
        raise TeaalLoopsError(
            f"--suite {suite}: no corpus matrix folder found ({where}); pass --corpus-dir"
        )
    if suite == "corpus":
        return corpus_entries(folder)
    if suite == "smoke":
        return corpus_entries(folder, SMOKE_CORPUS) + _large_classes(large_scale * SMOKE_SCALE)
    # spmm, sddmm: the synthetic classes first, since they carry the bandwidth and the
    # random-access targets and a --time-budget stops a run at its end
    return dense_large_classes(large_scale) + corpus_entries(folder)


def build_plan(
    suites: Sequence[str] = (),
    *,
    files: Sequence[str] = (),
    synthetic: Sequence[str] = (),
    corpus_dir: Path | None = None,
    large_scale: float = 1.0,
    only: Sequence[str] = (),
    custom_kernels: Sequence[str] = (),
) -> list[PlanItem]:
    """The matrices of the named suites plus single files and synthetic strings, in order,
    each with the kernels to run on it (module docstring).

    Single matrices run ``custom_kernels``, by default the kernels of ``suites`` (SpMV when
    there are none). ``only`` keeps the entries whose name is listed (applied last). An unknown
    suite, a missing corpus folder or file, a matrix listed twice for one kernel and two
    matrices of one name are each a :class:`TeaalLoopsError`.
    """
    if not 0 < large_scale <= 1:
        raise TeaalLoopsError(f"--large-scale {large_scale}: must lie in (0, 1]")
    found: dict[str, tuple[MatrixEntry, list[str]]] = {}
    twice: list[str] = []

    def add(entry: MatrixEntry, kernel: str) -> None:
        if entry.name not in found:
            found[entry.name] = (entry, [kernel])
            return
        known, kernels = found[entry.name]
        if known != entry or kernel in kernels:
            twice.append(entry.name)
        else:
            kernels.append(kernel)

    for suite in suites:
        for entry in _suite_entries(suite, corpus_dir, large_scale):
            add(entry, KERNEL_OF_SUITE[suite])
    custom = tuple(custom_kernels) or tuple(
        dict.fromkeys(KERNEL_OF_SUITE[s] for s in suites)) or ("spmv",)
    for kernel in custom:
        if kernel not in KERNELS:
            raise TeaalLoopsError(f"kernel {kernel!r}: expected one of {', '.join(KERNELS)}")
    singles: list[MatrixEntry] = []
    for item in files:
        path = Path(item)
        if not path.is_file():
            raise TeaalLoopsError(f"-m {item}: no such file")
        singles.append(MatrixEntry(matrix_name(path), "custom", "file", path=path))
    for text in synthetic:
        kind = text.partition(":")[0].strip()
        singles.append(MatrixEntry(f"{kind}:{text.partition(':')[2]}", "custom", "synthetic",
                                   text=text))
    for entry in singles:
        for kernel in custom:
            add(entry, kernel)
    if twice:
        raise TeaalLoopsError(
            f"matrix names appear twice in the suite: {', '.join(sorted(set(twice)))}")
    items = [PlanItem(entry, tuple(kernels)) for entry, kernels in found.values()]
    if only:
        wanted = set(only)
        items = [item for item in items if item.entry.name in wanted]
    if not items:
        raise TeaalLoopsError("the benchmark suite is empty: give --suite, -m or --synthetic")
    return items


def build_suite(
    suites: Sequence[str] = (),
    *,
    files: Sequence[str] = (),
    synthetic: Sequence[str] = (),
    corpus_dir: Path | None = None,
    large_scale: float = 1.0,
    only: Sequence[str] = (),
) -> list[MatrixEntry]:
    """The matrices of :func:`build_plan`, without their kernels."""
    plan = build_plan(suites, files=files, synthetic=synthetic, corpus_dir=corpus_dir,
                      large_scale=large_scale, only=only)
    return [item.entry for item in plan]
