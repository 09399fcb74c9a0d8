"""Layout registries restored after every test, so a test that registers a layout leaves none
behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def clean_registries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from teaal_loops.codegen import registry
    from teaal_loops.ir import layouts as semantics
    from teaal_loops.ir import views
    from teaal_loops.matrix import layouts as host
    from teaal_loops.runtime import layouts as runtime

    monkeypatch.setattr(semantics, "_REGISTRY", dict(semantics._REGISTRY))
    monkeypatch.setattr(registry, "LAYOUTS", dict(registry.LAYOUTS))
    monkeypatch.setattr(registry, "USER_TEMPLATE_DIRS", list(registry.USER_TEMPLATE_DIRS))
    monkeypatch.setattr(views, "_BUILDERS", dict(views._BUILDERS))
    monkeypatch.setattr(runtime, "_PACKERS", dict(runtime._PACKERS))
    monkeypatch.setattr(host, "_REGISTRY", dict(host._REGISTRY))
    yield
