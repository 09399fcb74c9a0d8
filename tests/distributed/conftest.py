"""Distributed tests: CPU planning and protocol tests run everywhere; ``gpu``-marked tests skip
with a reason without CuPy and a device; the MPI tests skip with a reason without ``mpiexec``
(the test extra installs it: the ``mpich`` wheel)."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from teaal_loops.runtime.backend import unavailable_reason


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords and "tests/distributed" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)


def find_mpiexec() -> str | None:
    """``mpiexec`` beside this Python (a virtual environment's mpich wheel), else on PATH."""
    here = os.path.dirname(sys.executable)
    return shutil.which("mpiexec", path=here) or shutil.which("mpiexec")
