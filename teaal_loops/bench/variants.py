"""The schedules a benchmark times: specs x parameter sweeps x layouts.

A :class:`Variant` is one spec with some of its size parameters bound; parameters left unbound
take the defaults :func:`teaal_loops.schedules.bind` documents (from the matrix and the device). Its
``label`` (``group_mapped[BLOCK_SIZE=8]``) is how tables, JSON and the ``auto`` chooser name it:
the spec file's stem plus the bound parameters, sorted.

Sweeps (``--sweep NAME=V1,V2,...``) apply to every spec that has a parameter ``NAME``; the value
``default`` stands for "leave it unbound". Without ``--sweep`` and without explicit specs, the
bench runs the library with :data:`DEFAULT_SWEEPS`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from teaal_loops.errors import ParameterError

DEFAULT = "default"

# Group sizes (compile-time) and work per thread (a kernel argument) worth comparing.
DEFAULT_SWEEPS: Mapping[str, tuple[int | str, ...]] = {
    "BLOCK_SIZE": (2, 4, 8, 16, 32),
    "GROUP": (128, 256, 512),
    "WORK_PER_THREAD": (DEFAULT, 32),  # default: 8
    # default: 8, or 16 past 2M merge items; past 32 (f32) / 16 (f64) the staged tile overflows
    "ITEMS_PER_THREAD": (DEFAULT, 4, 16, 32),
}


@dataclass(frozen=True)
class Variant:
    spec: Path
    params: Mapping[str, int] = field(default_factory=dict)
    layout: str = "csr"

    @property
    def spec_name(self) -> str:
        return self.spec.name.removesuffix(".yaml").removesuffix(".yml")

    @property
    def label(self) -> str:
        return variant_label(self.spec_name, self.params)


def variant_label(spec_name: str, params: Mapping[str, int]) -> str:
    """``spec[A=1,B=2]`` (sorted), or the bare spec name without bound parameters."""
    if not params:
        return spec_name
    return f"{spec_name}[{','.join(f'{k}={v}' for k, v in sorted(params.items()))}]"


def parse_sweep(items: Sequence[str]) -> dict[str, tuple[int | str, ...]]:
    """``["BLOCK_SIZE=4,8", "WORK_PER_THREAD=default,16"]`` -> a sweep mapping."""
    sweeps: dict[str, tuple[int | str, ...]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier() or not values.strip():
            raise ParameterError(f"--sweep {item!r}: expected NAME=V1,V2,... e.g. BLOCK_SIZE=4,8")
        parsed: list[int | str] = []
        for raw in values.split(","):
            raw = raw.strip()
            if raw == DEFAULT:
                parsed.append(DEFAULT)
                continue
            try:
                number = int(raw, 0)
            except ValueError:
                raise ParameterError(
                    f"--sweep {name}: {raw!r} is not a positive integer or 'default'"
                ) from None
            if number <= 0:
                raise ParameterError(f"--sweep {name}: {number} is not positive")
            parsed.append(number)
        if name in sweeps:
            raise ParameterError(f"--sweep {name} given twice")
        sweeps[name] = tuple(dict.fromkeys(parsed))  # keep order, drop repeats
    return sweeps


def expand(
    specs: Sequence[tuple[Path, Sequence[str]]],
    *,
    sweeps: Mapping[str, Sequence[int | str]],
    fixed: Mapping[str, int] | None = None,
    layouts: Sequence[str] = ("csr",),
) -> list[Variant]:
    """Every (spec, sweep point, layout), in spec order.

    ``specs`` pairs each spec file with the names of its parameters (so that this function
    needs no spec parser); ``fixed`` binds parameters in every spec that has them.
    """
    fixed = dict(fixed or {})
    variants: list[Variant] = []
    for path, parameters in specs:
        names = [n for n in sweeps if n in parameters and n not in fixed]
        base = {k: v for k, v in fixed.items() if k in parameters}
        for point in itertools.product(*(sweeps[n] for n in names)):
            params = dict(base)
            params.update({n: int(v) for n, v in zip(names, point, strict=True) if v != DEFAULT})
            for layout in layouts:
                variants.append(Variant(path, params, layout))
    seen: set[tuple[str, str]] = set()
    unique = []
    for v in variants:
        key = (v.label, v.layout)
        if key not in seen:
            seen.add(key)
            unique.append(v)
    return unique
