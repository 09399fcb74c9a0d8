"""What a benchmark runs on: matrix entries grouped into named suites.

Suites (``--suite``, repeatable):

``corpus``
    Every ``.mtx`` / ``.mtx.gz`` file of the corpus folder (``--corpus-dir``; by default
    ``$TEAAL_LOOPS_CORPUS/matrices``, ``corpus_carry/matrices`` or ``corpus_carry/`` in the
    working directory or the checkout, or the shared corpus beside the checkout: the first one
    that holds matrix files).
``large``
    Four synthetic structure classes, each over a gigabyte of float32 CSR so that no cache
    holds it, generated on the GPU (:mod:`teaal_loops.bench.generate`):
    banded (2**23 rows x 32 a row, 268M nonzeros), uniform (2**23 rows, 134M), rmat (scale 23,
    160M edges before merging duplicates) and longrows (2**22 rows, 134M; 128 rows of ~1M).
    ``--large-scale F`` shrinks rows and nonzeros by F (for smoke runs).
``smoke``
    The large classes at 1/256 of their size plus three small corpus matrices, for a quick
    check that everything runs.

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

SUITES = ("corpus", "large", "smoke")
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


def build_suite(
    suites: Sequence[str] = (),
    *,
    files: Sequence[str] = (),
    synthetic: Sequence[str] = (),
    corpus_dir: Path | None = None,
    large_scale: float = 1.0,
    only: Sequence[str] = (),
) -> list[MatrixEntry]:
    """The matrices of the named suites plus single files and synthetic strings, in order.

    ``only`` keeps the entries whose name is listed (applied last). A suite name that is not
    known, a missing corpus folder or a missing file is a :class:`TeaalLoopsError`.
    """
    if not 0 < large_scale <= 1:
        raise TeaalLoopsError(f"--large-scale {large_scale}: must lie in (0, 1]")
    entries: list[MatrixEntry] = []
    for suite in suites:
        if suite not in SUITES:
            raise TeaalLoopsError(f"--suite {suite!r}: unknown suite (known: {', '.join(SUITES)})")
        if suite == "large":
            entries += _large_classes(large_scale)
            continue
        folder = corpus_dir or default_corpus_dir()
        if folder is None or not folder.is_dir():
            where = str(corpus_dir) if corpus_dir else "$TEAAL_LOOPS_CORPUS, ./corpus_carry"
            raise TeaalLoopsError(
                f"--suite {suite}: no corpus matrix folder found ({where}); pass --corpus-dir"
            )
        if suite == "corpus":
            entries += corpus_entries(folder)
        else:  # smoke
            entries += corpus_entries(folder, SMOKE_CORPUS)
            entries += _large_classes(large_scale * SMOKE_SCALE)
    for item in files:
        path = Path(item)
        if not path.is_file():
            raise TeaalLoopsError(f"-m {item}: no such file")
        entries.append(MatrixEntry(matrix_name(path), "custom", "file", path=path))
    for text in synthetic:
        kind = text.partition(":")[0].strip()
        entries.append(MatrixEntry(f"{kind}:{text.partition(':')[2]}", "custom", "synthetic",
                                   text=text))
    if only:
        wanted = set(only)
        entries = [e for e in entries if e.name in wanted]
    names = [e.name for e in entries]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise TeaalLoopsError(f"matrix names appear twice in the suite: {', '.join(duplicated)}")
    if not entries:
        raise TeaalLoopsError("the benchmark suite is empty: give --suite, -m or --synthetic")
    return entries
