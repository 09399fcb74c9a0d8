"""GPU tests: skipped with a reason where CuPy or a CUDA device is missing.

The corpus is found through ``tests.conftest.corpus_dir`` (``../shared/corpus`` beside the
checkout, or ``$TEAAL_LOOPS_CORPUS``, e.g. ``TEAAL_LOOPS_CORPUS=corpus_carry`` on the GPU
machine where a copy travels with the working tree).
"""

from __future__ import annotations

import pytest

from teaal_loops.runtime.backend import unavailable_reason


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
