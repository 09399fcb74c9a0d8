"""Shared test helpers: where the shared corpus is, and a skip when it is absent."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import teaal_loops.runtime.kernel as kernel_module

REPO = Path(__file__).resolve().parents[1]
CORPUS_SKIP_HINT = "it lives beside the checkout, or set TEAAL_LOOPS_CORPUS to its folder"


def corpus_dir() -> Path:
    """The shared corpus beside the checkout (or $TEAAL_LOOPS_CORPUS, e.g. a carried copy)."""
    env = os.environ.get("TEAAL_LOOPS_CORPUS")
    if env:
        return Path(env).resolve()
    return (REPO / ".." / "shared" / "corpus").resolve()


def require_corpus(*parts: str) -> Path:
    path = corpus_dir().joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared corpus not found at {path} ({CORPUS_SKIP_HINT})")
    return path


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every matrix the kernels convert (upload), in order: a matrix recognised again is not
    in it twice."""
    seen: list[Any] = []
    real = kernel_module.converter

    def counting(layout: str, build: Any = None) -> Any:
        convert = real(layout, build)

        def run(A: Any, *args: Any) -> Any:
            seen.append(A)
            return convert(A, *args)

        return run

    monkeypatch.setattr(kernel_module, "converter", counting)
    return seen
