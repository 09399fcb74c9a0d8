"""Write notebooks/spmm.ipynb and notebooks/sddmm.ipynb: the dense forms through the pipeline.

Each notebook shows the library spec (and, when the shared corpus is beside the checkout, a
corpus spec placing the dense rank elsewhere), its schedule IR and bound sizes (the dense rank's
DS and DT), the HiFiber program the reference ran and its result, the CUDA source, the three
views agreeing (HiFiber reference, CPU simulation, NumPy: values and the owner of every
(nonzero, dense index)), a picture of who owns what, and the GPU kernel's values and trace where
CuPy and a GPU are present. The committed .ipynb files carry no outputs (CI executes them); edit
this generator, not the notebooks.

    python -m scripts.make_dense_notebooks            # (re)write notebooks/{spmm,sddmm}.ipynb
    python -m scripts.make_dense_notebooks --check    # exit 1 when a committed file is stale

(from the repository root: the generator's cells live in sibling modules of the ``scripts``
package)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from scripts.dense_notebook_cells import NOTEBOOKS, Notebook
from scripts.notebook_files import write_or_check

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO / "notebooks"
# The line the verdict cell prints; tests/notebooks/test_dense_notebooks.py parses it.
VERDICT_MARKER = "AGREEMENT_JSON "
GPU_SKIP_LINE = "skipped: no CUDA GPU / CuPy"
CORPUS_SKIP_WORDS = "not found (the shared corpus lives beside the checkout"

VERDICT = '''\
for what, ok in AGREEMENT.items():
    print(f"{'ok  ' if ok else 'FAIL'}  {what}")
REQUIRED = @REQUIRED@
missing = [what for what in REQUIRED if what not in AGREEMENT]
assert not missing, f"comparisons that did not run: {missing}"
failed = [what for what, ok in AGREEMENT.items() if not ok]
assert not failed, f"views disagree: {failed}"
print("@MARKER@" + json.dumps(AGREEMENT, sort_keys=True))
'''


def required_checks(nb: Notebook) -> tuple[str, ...]:
    """Comparisons the notebook must have made (and passed) on every machine: those of its
    library spec on the small matrix (the corpus specs are absent in CI)."""
    return tuple(f"{nb.library}: {what}" for what in nb.checks)


def gpu_checks(nb: Notebook) -> tuple[str, ...]:
    """... and, on a machine with a GPU, those of the library spec's kernel."""
    return tuple(f"gpu: {nb.library}: {what}" for what in nb.gpu_checks)


def _list_literal(items: tuple[str, ...]) -> str:
    return "[\n" + "".join(f"    {json.dumps(item)},\n" for item in items) + "]"


def build_notebook(nb: Notebook) -> NotebookNode:
    """One notebook (no outputs; deterministic cell ids)."""
    verdict = VERDICT.replace("@REQUIRED@", _list_literal(required_checks(nb))).replace(
        "@MARKER@", VERDICT_MARKER
    )
    cells = [
        *nb.cells,
        ("md", "## Verdict\n\nEvery comparison above must have run and agreed."),
        ("code", verdict),
    ]
    out = nbformat.v4.new_notebook()
    out.metadata = NotebookNode(
        {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        }
    )
    for i, (kind, source) in enumerate(cells):
        source = source.replace("@GPU_SKIP@", GPU_SKIP_LINE)
        source = source.replace("@CORPUS_SKIP@", CORPUS_SKIP_WORDS).rstrip("\n")
        cell_id = f"{nb.name}-{i:02d}"
        if kind == "md":
            out.cells.append(nbformat.v4.new_markdown_cell(source, id=cell_id))
        else:
            out.cells.append(nbformat.v4.new_code_cell(source, id=cell_id))
    nbformat.validate(out)
    return out


def expected_files() -> dict[Path, str]:
    """Notebook path -> its JSON text."""
    return {
        NOTEBOOK_DIR / f"{nb.name}.ipynb": nbformat.writes(build_notebook(nb)) for nb in NOTEBOOKS
    }


def main(argv: list[str] | None = None) -> int:
    return write_or_check(expected_files(), argv, description=__doc__.splitlines()[0],
                          command="python -m scripts.make_dense_notebooks")


if __name__ == "__main__":
    sys.exit(main())
