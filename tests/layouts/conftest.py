"""The layout registry restored after every test, so a test that registers a layout leaves
none behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def clean_registries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from teaal_loops.codegen import clear_caches
    from teaal_loops.layouts import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    yield
    clear_caches()
