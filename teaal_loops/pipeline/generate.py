"""The ``generate`` stage of the pipeline: spec files -> named CUDA sources.

``generated/`` in the repository holds :func:`expected_files` for every spec under ``specs/``
(``specs/layouts/<layout>/`` holds the other layouts' specs, each selecting its layout through
its ``format`` section) and both dtypes; ``tests/codegen/test_generated.py`` fails when it
differs from what the generator writes now. Regenerate with
:data:`~teaal_loops.codegen.render.REGENERATE_COMMAND`. Writing the files is
:func:`teaal_loops.codegen.files.write_files`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from teaal_loops.codegen import make_config, render
from teaal_loops.codegen.files import ALL_DTYPES, output_collision, output_name
from teaal_loops.codegen.render import REGENERATE_COMMAND
from teaal_loops.pipeline.stages import load_schedule


def render_spec(
    spec_path: str | Path,
    *,
    dtype: str,
    layout: str | None = None,
    params: Mapping[str, int] | None = None,
    index_bits: int = 32,
    regenerate: str | None = None,
) -> tuple[str, str]:
    """(file name, CUDA source) for one spec and dtype; ``regenerate`` is the command the
    header names (None: the generic advice, for a one-off file)."""
    schedule = load_schedule(spec_path, params=params, layout=layout)
    cfg = make_config(schedule, dtype=dtype, layout=layout, index_bits=index_bits)
    name = output_name(Path(spec_path).stem, cfg.layout, cfg.dtype, index_bits)
    return name, render(cfg, regenerate)


def spec_library(specs_dir: str | Path) -> list[Path]:
    """Every ``*.yaml`` spec under ``specs_dir``, subfolders included (``specs/layouts/<layout>/``
    holds the other layouts' specs): the folder's own first, then by path."""
    root = Path(specs_dir)
    return sorted(root.rglob("*.yaml"), key=lambda p: (len(p.relative_to(root).parts), str(p)))


def expected_files(
    specs_dir: str | Path, dtypes: Iterable[str] = ALL_DTYPES
) -> dict[str, str]:
    """File name -> source for every spec in ``specs_dir`` and every dtype (``--all``).

    Two specs that would write one file (the same name and layout) are a
    :class:`~teaal_loops.errors.TeaalLoopsError` naming both.
    """
    files: dict[str, str] = {}
    writer: dict[str, Path] = {}
    for spec_path in spec_library(specs_dir):
        for dtype in dtypes:
            name, source = render_spec(spec_path, dtype=dtype, regenerate=REGENERATE_COMMAND)
            if name in writer and writer[name] != spec_path:
                raise output_collision(name, writer[name], spec_path)
            files[name], writer[name] = source, spec_path
    return files


