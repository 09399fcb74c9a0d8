"""The registered layouts, and the one place a layout name (``name`` or ``name:option``) is read.

Built-in layouts (one module each in this package) and user layouts register through the same
:func:`register`. Installed packages can provide layouts through the entry-point group
``teaal_loops.layouts`` (each entry point is a callable that registers its layouts); they are
loaded the first time an unknown layout name is asked for, so the command line finds them too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from teaal_loops.errors import LayoutError
from teaal_loops.layouts.contract import (
    Builder,
    DeviceBuilder,
    EntryLister,
    FormatMatcher,
    LayoutDefinition,
    Packer,
)
from teaal_loops.schedules import schedule_kinds
from teaal_loops.types import KernelParam

ENTRY_POINT_GROUP = "teaal_loops.layouts"
_CTYPES = ("index_t", "offset_t", "value_t", "int")
# Kernel arguments the schedules and the vectors own (and the row-tiled schedules' S<j>, E<j>):
# a layout may not take these names.
RESERVED_ARGUMENTS = frozenset(
    {"x", "y", "owner", "workers", "work_per_thread", "items_per_thread"}
)

_REGISTRY: dict[str, LayoutDefinition] = {}
_BUILTIN: set[str] = set()
_plugins_loaded = False


def split_name(name: str) -> tuple[str, str | None]:
    """``"BCSR:4x4"`` -> ``("bcsr", "4x4")``; ``"csr"`` -> ``("csr", None)``."""
    base, colon, option = name.strip().partition(":")
    text = option.strip() if colon else ""
    return base.strip().lower(), (text or None)


def register(
    name: str,
    *,
    macro_file: str,
    params: Sequence[KernelParam],
    build: Builder,
    pack: Packer,
    entries: EntryLister,
    template_dir: str | Path | None = None,
    schedules: Iterable[str] = ("thread_mapped", "work_oriented"),
    forms: Iterable[str] = ("spmv",),
    tiles: str = "rows",
    scatters: bool = False,
    stacked: bool = False,
    adding_from: Callable[[Any], int] | None = None,
    column_stores: bool = False,
    atoms_are_nonzeros: bool | None = None,
    description: str = "",
    teaal_format: str | None = None,
    option: Callable[[str | None], str] | None = None,
    template_options: Callable[[str | None], Mapping[str, object]] | None = None,
    build_options: Callable[[str | None], dict[str, Any]] | None = None,
    matches_format: FormatMatcher | None = None,
    direct_csr: bool = False,
    device_build: DeviceBuilder | None = None,
    replace: bool = False,
) -> LayoutDefinition:
    """Add layout ``name`` to lowering, code generation, host conversion, the runtime and the
    CPU simulation, after checking every part (nothing is registered unless all is valid).

    ``macro_file`` (under ``template_dir``, else the package's templates) defines the
    ``definitions()`` and ``construct(name)`` macros of the device contract
    (:mod:`teaal_loops.layouts.contract`); ``params`` are its kernel arguments in signature
    order; ``build(csr, **options)`` makes the host layout object (``shape``, ``nnz``,
    ``nbytes``, ``tile_ptr()``, ``arrays()``, ``to_csr()``: subclass
    :class:`teaal_loops.layouts.HostLayout`); ``pack(host, option)`` its kernel arguments;
    ``entries(host, option)`` the values each atom adds. ``scatters``: tiles are not output
    rows, every update is atomic (like CSC). ``stacked``: tiles share output rows (the rows of
    each column panel; the pieces of heavy rows): store_tile adds atomically where its row is
    shared, the output is zeroed first; ``adding_from(host)`` is then the first tile that adds
    (None: every tile). ``column_stores``: its struct also defines ``store_columns`` and
    ``add_columns`` (SpMM: a tile's TB outputs at once, as ``teaal_store_columns`` and
    ``teaal_add_columns`` take them).
    ``atoms_are_nonzeros``: atoms are nonzeros in their tile's row (None: the SDDMM layouts).
    ``forms``: the einsum forms its macros serve
    (:class:`teaal_loops.layouts.contract.LayoutDefinition`). ``device_build(xp, indptr,
    indices, values, shape, option)``: the kernel arrays from CSR arrays where they are, so
    that device inputs stay on the GPU. ``option``, ``template_options`` and
    ``build_options`` give the layout an option after a colon (``name:...``): its canonical
    text, its template constants and its builder options.
    """
    key = name.strip().lower()
    if not key.isidentifier() or not key.isascii():
        raise LayoutError(f"layout name {name!r} must be an identifier (letters, digits, _)")
    if key in _BUILTIN:
        raise LayoutError(f"layout {key!r} is built in; choose another name")
    if key in _REGISTRY and not replace:
        raise LayoutError(f"layout {key!r} is already registered (pass replace=True)")
    for label, fn in (("build", build), ("pack", pack), ("entries", entries)):
        if not callable(fn):
            raise LayoutError(f"layout {key}: {label}={fn!r} is not callable")
    kinds = _schedule_kinds(key, schedules)
    form_set = frozenset(forms)
    if "spmv" not in form_set or not form_set <= {"spmv", "spmm", "sddmm"}:
        raise LayoutError(
            f"layout {key}: forms={sorted(form_set)}; expected spmv plus any of spmm, sddmm"
        )
    if stacked and (scatters or "sddmm" in form_set):
        raise LayoutError(  # SDDMM stores one value an atom; a scatter's atomics ignore stacking
            f"layout {key}: a stacked layout serves SpMV and SpMM and does not scatter"
        )
    if adding_from is not None and not (stacked and callable(adding_from)):
        raise LayoutError(f"layout {key}: adding_from belongs to a stacked layout, as a callable")
    _check_params(key, params, kinds)
    folder = Path(template_dir).resolve() if template_dir is not None else None
    if folder is not None and not (folder / macro_file).is_file():
        raise LayoutError(f"layout {key}: macro file {macro_file!r} not found under {folder}")
    definition = LayoutDefinition(
        name=key,
        macro_file=macro_file,
        params=tuple(params),
        build=build,
        pack=pack,
        entries=entries,
        schedules=kinds,
        forms=form_set,
        tiles=tiles,
        scatters=scatters,
        stacked=stacked,
        adding_from=adding_from,
        column_stores=column_stores,
        atoms_are_nonzeros=(
            "sddmm" in form_set if atoms_are_nonzeros is None else atoms_are_nonzeros
        ),
        description=description or f"user-defined layout {key}",
        teaal_format=teaal_format or f"a format named {key}",
        option=option,
        template_options=template_options,
        build_options=build_options,
        matches_format=matches_format,
        template_dir=folder,
        direct_csr=direct_csr,
        device_build=device_build,
    )
    _REGISTRY[key] = definition
    return definition


def mark_builtin() -> None:
    """Everything registered so far is built in (called once the package's layouts are in)."""
    _BUILTIN.update(_REGISTRY)


def get_layout(name: str) -> LayoutDefinition:
    """The definition of a layout name; an option after a colon is ignored here."""
    base, _ = split_name(name)
    if base not in _REGISTRY:
        load_plugins()  # installed packages may provide it (entry points, loaded once)
    try:
        return _REGISTRY[base]
    except KeyError:
        raise LayoutError(
            f"unknown layout {name!r}; supported layouts: {', '.join(sorted(known_layouts()))}"
        ) from None


def known_layouts() -> tuple[str, ...]:
    """Built-in layouts first (in registration order), then user layouts, sorted."""
    builtin = [n for n in _REGISTRY if n in _BUILTIN]
    return tuple(builtin + sorted(set(_REGISTRY) - _BUILTIN))


def canonical_layout(name: str) -> str:
    """The one spelling of a layout name: lower case, option canonical (``BCSR:4`` ->
    ``bcsr:4x4``, ``bcsr`` -> ``bcsr:2x2``). Unknown names and bad options raise LayoutError."""
    base, option = split_name(name)
    definition = get_layout(base)
    if definition.option is None:
        if option is not None:
            raise LayoutError(f"layout {base} takes no option (got {name!r})")
        return base
    return f"{base}:{definition.option(option)}"


def template_options(name: str) -> dict[str, object]:
    """The ``layout_options`` a macro file sees for ``name`` (``"bcsr:4x4"`` -> R, C)."""
    base, option = split_name(name)
    definition = get_layout(base)
    if definition.template_options is None:
        if option is not None:
            raise LayoutError(f"layout {base} takes no option (got {name!r})")
        return {}
    return dict(definition.template_options(option))


def build_options(name: str) -> dict[str, Any]:
    """The options of the host builder that a layout name carries (bcsr's block)."""
    base, option = split_name(name)
    definition = get_layout(base)
    return dict(definition.build_options(option)) if definition.build_options else {}


def check_schedule_fits(layout: str, kind: str, combine_atomic: bool) -> None:
    """Refuse a schedule kind the layout does not support, or a non-atomic combine on a
    scattering layout (a schedule lowered for another layout)."""
    definition = get_layout(layout)
    if kind not in definition.schedules:
        raise LayoutError(
            f"layout {layout} ({definition.tiles}) supports "
            f"{', '.join(sorted(definition.schedules))}; not {kind}"
        )
    if definition.scatters and not combine_atomic:
        raise LayoutError(
            f"layout {layout} scatters every update atomically, but this schedule was lowered "
            f"for a layout that stores whole tiles: lower the spec with layout="
            f"{definition.name!r}"
        )


def template_dirs() -> list[Path]:
    """Folders searched for macro files after the package's templates (user layouts)."""
    seen: list[Path] = []
    for definition in _REGISTRY.values():
        if definition.template_dir is not None and definition.template_dir not in seen:
            seen.append(definition.template_dir)
    return seen


def available() -> dict[str, tuple[str, ...]]:
    """Every registered layout and the schedules it supports."""
    return {name: tuple(sorted(get_layout(name).schedules)) for name in known_layouts()}


def load_plugins() -> list[str]:
    """Run every ``teaal_loops.layouts`` entry point once (each registers its layouts);
    returns their names. A plugin that fails to load is reported as a LayoutError."""
    global _plugins_loaded
    if _plugins_loaded:
        return []
    _plugins_loaded = True
    from importlib.metadata import entry_points

    loaded = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            hook = ep.load()
            if callable(hook):
                hook()
        except Exception as err:  # a third-party plugin: name it instead of a traceback
            raise LayoutError(
                f"layout plugin {ep.name} ({ep.value}) failed to load: {err}"
            ) from err
        loaded.append(ep.name)
    return loaded


def _schedule_kinds(key: str, schedules: Iterable[str]) -> frozenset[str]:
    kinds = {str(getattr(s, "value", s)) for s in schedules}
    unknown = sorted(kinds - set(schedule_kinds()))
    if unknown:
        raise LayoutError(
            f"layout {key}: unknown schedule {unknown[0]!r} "
            f"(valid: {', '.join(schedule_kinds())})"
        )
    if not kinds:
        raise LayoutError(f"layout {key}: give at least one schedule it supports")
    return frozenset(kinds)


def _check_params(key: str, params: Sequence[KernelParam], kinds: frozenset[str]) -> None:
    names = [getattr(p, "name", None) for p in params]
    if len(set(names)) != len(names):
        raise LayoutError(f"layout {key}: kernel argument names repeat: {names}")
    clash = sorted(
        n for n in names if n and (n in RESERVED_ARGUMENTS or re.fullmatch(r"[SE]\d+", n))
    )
    if clash:
        raise LayoutError(f"layout {key}: kernel argument names {clash} are taken by schedules")
    for p in params:
        if (
            not isinstance(p, KernelParam)
            or p.scalar_type not in _CTYPES
            or not p.name.isidentifier()
            or not p.name.isascii()
        ):
            raise LayoutError(
                f"layout {key}: argument {p!r} must be a KernelParam of {', '.join(_CTYPES)} "
                "with an identifier for a name"
            )
    if "merge_path" in kinds:  # its template reads the counts as kernel arguments
        for required in ("rows", "nnz"):
            if required not in names:
                raise LayoutError(
                    f"layout {key}: merge-path needs kernel arguments 'rows' (tiles) and "
                    "'nnz' (atoms)"
                )
