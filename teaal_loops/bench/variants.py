"""The schedules a benchmark times: specs x parameter sweeps x layouts.

A :class:`Variant` is one spec with some of its size parameters bound; parameters left unbound
take the defaults :func:`teaal_loops.schedules.bind` documents (from the matrix and the device). Its
``label`` (``group_mapped[BLOCK_SIZE=8]``) is how tables, JSON and the ``auto`` chooser name it:
the spec file's stem plus the bound parameters, sorted, and a layout other than CSR
(``merge_path@panels:3``). Tuning experiments add to it:

* ``block_threads``: another thread-block size (``--block-threads``), label suffix ``@t256``;
* ``source``: a CUDA file launched with the generated kernel's arguments instead of the
  generated source, e.g. the same spec generated at an earlier commit (``--source``), label
  suffix ``+<file name>``;
* ``patch``: ``(old, new)`` text replacements in the generated source, each ``old`` required to
  occur (Python API only), label suffix ``+<tag>``.

Sweeps (``--sweep NAME=V1,V2,...``) apply to every spec that has a parameter ``NAME``; the value
``default`` stands for "leave it unbound". Without ``--sweep`` and without explicit specs, the
bench runs the library with :data:`DEFAULT_SWEEPS`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from teaal_loops import pipeline
from teaal_loops.errors import Location, ParameterError
from teaal_loops.lowering import lower
from teaal_loops.spec import load_spec

DEFAULT = "default"
DEFAULT_LAYOUT = "csr"  # a label names any other layout: merge_path@panels:3

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
    block_threads: int | None = None  # None: the spec's (x-teaal-loops) or the default
    source: Path | None = None  # CUDA launched instead of the generated source
    patch: tuple[tuple[str, str], ...] = ()  # (old, new) replacements in the generated source
    tag: str = ""  # names a patch (or a source) in the label
    # SpMV experiment: x held persisting in L2 by an access-policy window on the launch stream
    # (teaal_loops.runtime.l2_persist) while the matrix streams; label suffix +l2persist
    persist_x: bool = False

    @property
    def spec_name(self) -> str:
        return self.spec.name.removesuffix(".yaml").removesuffix(".yml")

    @property
    def label(self) -> str:
        label = variant_label(self.spec_name, self.params)
        if self.block_threads:
            label += f"@t{self.block_threads}"
        if self.layout != DEFAULT_LAYOUT:  # the same spec timed in several layouts
            label += f"@{self.layout}"
        tag = self.tag or (self.source.name if self.source else ("patched" if self.patch else ""))
        label = f"{label}+{tag}" if tag else label
        return f"{label}+l2persist" if self.persist_x else label

    @property
    def generated(self) -> bool:
        """True when the kernel is the generator's own source (no source file, no patch)."""
        return self.source is None and not self.patch

    def kernel_source(self, generated: str, kernel_name: str) -> str:
        """The CUDA source to launch: ``generated``, or the variant's file or patched text.

        A file must define ``kernel_name`` (the generated kernel's entry point: it is launched
        with the generated kernel's arguments); a patch's ``old`` text must occur.
        """
        if self.source is not None:
            try:
                text = self.source.read_text()
            except (OSError, UnicodeDecodeError) as err:
                raise ParameterError(f"cannot read the source: {err}",
                                     location=Location(str(self.source))) from None
            if f"{kernel_name}(" not in text:
                raise ParameterError(
                    f"defines no kernel {kernel_name}, the entry point of {self.spec_name} "
                    "(generate it with teaal-loops generate)",
                    location=Location(str(self.source)),
                )
            return text
        for old, new in self.patch:
            if old not in generated:
                raise ParameterError(f"{self.label}: patch target {old[:60]!r} is not in the "
                                     "generated source")
            generated = generated.replace(old, new)
        return generated


def variant_label(spec_name: str, params: Mapping[str, int]) -> str:
    """``spec[A=1,B=2]`` (sorted), or the bare spec name without bound parameters."""
    if not params:
        return spec_name
    return f"{spec_name}[{','.join(f'{k}={v}' for k, v in sorted(params.items()))}]"


def compile_variant(variant: Variant, dtype: str) -> Any:
    """The runtime kernel of ``variant`` (its block size applied; its source replaced only
    when prepared, by :func:`prepare_variant`)."""

    if variant.block_threads is None:
        return pipeline.compile(
            variant.spec, layout=variant.layout, dtype=dtype, params=dict(variant.params)
        )
    # another block size: lower with it, then compile the schedule

    schedule = lower(load_spec(variant.spec), params=dict(variant.params), layout=variant.layout,
                     block_threads=variant.block_threads)
    return pipeline.compile(schedule, layout=variant.layout, dtype=dtype)


def prepare_variant(kernel: Any, variant: Variant, matrices: Sequence[Any]) -> list[Any]:
    """``kernel`` prepared on every matrix; a variant's source file or patch replaces the
    generated source (fresh function caches, so nothing compiled from the original is reused)."""
    prepared = [kernel.prepare(m) for m in matrices]
    if variant.generated or not prepared:
        return prepared
    p0 = prepared[0]
    source = variant.kernel_source(p0.source, p0.config.kernel_name)
    return [dataclasses.replace(p, source=source, _functions={}, _raw={}) for p in prepared]


def parse_block_threads(items: Sequence[str]) -> tuple[int, ...]:
    """``["128,256", "512"]`` -> ``(128, 256, 512)``: thread-block sizes to time every variant
    with (multiples of 32 up to 1024)."""
    sizes: list[int] = []
    for item in items:
        for raw in item.split(","):
            try:
                n = int(raw.strip())
            except ValueError:
                raise ParameterError(f"--block-threads: {raw.strip()!r} is not an integer"
                                     ) from None
            if not 32 <= n <= 1024 or n % 32:
                raise ParameterError(f"--block-threads {n}: expected a multiple of 32 from 32 "
                                     "to 1024")
            sizes.append(n)
    return tuple(dict.fromkeys(sizes))


def parse_sources(items: Sequence[str]) -> list[tuple[str, Path]]:
    """``["merge_path[ITEMS_PER_THREAD=16]=old/merge_path.csr.f32.cu"]`` -> (label, file) pairs;
    the label's spec must be timed too (the file is launched with its arguments)."""
    out: list[tuple[str, Path]] = []
    for item in items:
        label, sep, file = item.rpartition("=")
        if not sep or not label.strip() or not file.strip():
            raise ParameterError(f"--source {item!r}: expected LABEL=FILE, e.g. "
                                 "'merge_path=old/merge_path.csr.f32.cu'")
        path = Path(file.strip())
        if not path.is_file():
            raise ParameterError(f"--source {item!r}: {path}: no such file")
        out.append((label.strip(), path))
    return out


def with_experiments(
    variants: Sequence[Variant],
    *,
    block_threads: Sequence[int] = (),
    sources: Sequence[tuple[str, Path]] = (),
    l2_persist: bool = False,
) -> list[Variant]:
    """``variants``, each also at every ``block_threads`` size (and, with ``l2_persist``, with
    x persisting in L2), plus one variant per source file: a copy of the variant whose label
    is the source's label, launching that file."""
    out = list(variants)
    for v in variants:
        out += [replace(v, block_threads=n) for n in block_threads if n != v.block_threads]
    if l2_persist:
        out += [replace(v, persist_x=True) for v in list(out)]
    by_label = {v.label: v for v in out}
    for label, path in sources:
        if label not in by_label:
            known = ", ".join(sorted(by_label)[:6])
            raise ParameterError(f"--source {label}={path}: no variant {label!r} is timed "
                                 f"(timed: {known}{', ...' if len(by_label) > 6 else ''})")
        out.append(replace(by_label[label], source=path))
    return out


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
