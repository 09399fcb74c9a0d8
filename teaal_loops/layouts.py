"""Sparse layouts: what exists, and one call to add your own without editing the package.

A layout has five parts, each kept by the part of teaal-loops that uses it:

1. *semantics* (:class:`~teaal_loops.ir.layouts.LayoutSemantics`): what its tiles are, which
   schedules it supports, whether its tiles scatter into many output rows (lowering);
2. a *code generator* entry (:class:`~teaal_loops.codegen.registry.LayoutEntry`): its kernel
   arguments and a Jinja2 macro file defining the device ``Layout`` struct (codegen);
3. a *host builder*: SciPy CSR -> a host layout object (``teaal_loops.matrix.layouts``);
4. a *packer*: host layout -> kernel arguments by name (``teaal_loops.runtime.layouts``);
5. a *tile-view builder*: matrix -> :class:`~teaal_loops.ir.views.TileView` for the CPU
   simulation, whose ownership must equal the kernel's trace (``teaal_loops.ir.views``).

:func:`register` installs all five at once, from user code, and checks them first: nothing is
registered unless everything is valid. Installed packages can also provide layouts through the
entry-point group ``teaal_loops.layouts`` (each entry point is a callable that registers its
layouts); they are loaded the first time an unknown layout name is asked for, so the command
line finds them too. docs/layouts.md walks through an example.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from teaal_loops.codegen.registry import KernelParam, LayoutEntry
from teaal_loops.errors import LayoutError
from teaal_loops.ir.layouts import LayoutSemantics
from teaal_loops.ir.model import ScheduleKind
from teaal_loops.ir.views import TileView
from teaal_loops.runtime.layouts import Packed

ENTRY_POINT_GROUP = "teaal_loops.layouts"
_CTYPES = ("index_t", "offset_t", "value_t", "int")
_plugins_loaded = False


def register(
    name: str,
    *,
    macro_file: str,
    params: Sequence[KernelParam],
    build: Callable[..., Any],
    pack: Callable[[Any, str | None], Packed],
    tile_view: Callable[[Any, str | None], TileView],
    template_dir: str | Path | None = None,
    schedules: Iterable[str | ScheduleKind] = ("thread_mapped", "work_oriented"),
    tiles: str = "rows",
    scatters: bool = False,
    description: str = "",
    teaal_format: str | None = None,
    option: Callable[[str | None], str] | None = None,
    template_options: Callable[[str | None], Mapping[str, object]] | None = None,
    replace: bool = False,
) -> None:
    """Add layout ``name`` to lowering, code generation, the host converters, the runtime and
    the CPU simulation.

    ``macro_file`` (under ``template_dir``) defines ``definitions()`` and ``construct(name)``
    macros implementing the layout contract (docs/layouts.md); ``params`` are its kernel
    arguments in signature order; ``build(csr, **options)`` makes the host layout object (with
    ``shape``, ``nnz``, ``nbytes``, ``to_csr()`` and ``arrays()``); ``pack(host, option)`` its
    kernel arguments; ``tile_view(A, option)`` its tiles and atoms for the simulation.
    ``scatters``: tiles are not output rows, every update is atomic (like CSC). ``option`` and
    ``template_options`` give the layout an option after a colon (``name:...``), canonicalised
    and turned into template constants (``layout_options``) respectively.
    """
    from teaal_loops.codegen import registry as codegen
    from teaal_loops.ir import layouts as semantics_registry
    from teaal_loops.ir import views
    from teaal_loops.matrix import layouts as host
    from teaal_loops.runtime import layouts as runtime

    key = name.strip().lower()
    if not key.isidentifier():
        raise LayoutError(f"layout name {name!r} must be an identifier (letters, digits, _)")
    builtin = set(host.LAYOUT_NAMES)
    if key in builtin:
        raise LayoutError(f"layout {key!r} is built in; choose another name")
    known = key in codegen.LAYOUTS or key in semantics_registry.known_layouts()
    if known and not replace:
        raise LayoutError(f"layout {key!r} is already registered (pass replace=True)")
    for label, fn in (("build", build), ("pack", pack), ("tile_view", tile_view)):
        if not callable(fn):
            raise LayoutError(f"layout {key}: {label}={fn!r} is not callable")
    kinds = _schedule_kinds(key, schedules)
    _check_params(key, params, kinds)
    folder = Path(template_dir).resolve() if template_dir is not None else None
    if folder is not None and not (folder / macro_file).is_file():
        raise LayoutError(f"layout {key}: macro file {macro_file!r} not found under {folder}")

    semantics = LayoutSemantics(
        name=key,
        tiles=tiles,
        column_major=scatters,
        schedules=kinds,
        teaal_format=teaal_format or f"a format named {key}",
        option=option,
    )
    entry = LayoutEntry(
        name=key,
        macro_file=macro_file,
        description=description or f"user-defined layout {key}",
        params=tuple(params),
        template_options=template_options,
    )
    semantics_registry.register_layout_semantics(semantics, replace=True)
    codegen.register_layout_entry(entry, template_dir=folder, replace=True)
    host.register_layout(key, build, replace=True)
    runtime.register_packer(key, pack, replace=True)
    views.register_tile_view(key, tile_view)


def available() -> dict[str, tuple[str, ...]]:
    """Every layout lowering knows and the schedules it supports."""
    from teaal_loops.ir.layouts import known_layouts, layout_semantics

    return {
        name: tuple(sorted(k.value for k in layout_semantics(name).schedules))
        for name in known_layouts()
    }


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


def _schedule_kinds(key: str, schedules: Iterable[str | ScheduleKind]) -> frozenset[ScheduleKind]:
    kinds = set()
    for s in schedules:
        try:
            kinds.add(ScheduleKind(s))
        except ValueError:
            valid = ", ".join(k.value for k in ScheduleKind)
            raise LayoutError(f"layout {key}: unknown schedule {s!r} (valid: {valid})") from None
    if not kinds:
        raise LayoutError(f"layout {key}: give at least one schedule it supports")
    return frozenset(kinds)


def _check_params(
    key: str, params: Sequence[KernelParam], kinds: frozenset[ScheduleKind]
) -> None:
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise LayoutError(f"layout {key}: kernel argument names repeat: {names}")
    reserved = {"x", "y", "owner", "workers", "work_per_thread", "items_per_thread"}
    clash = sorted(set(names) & reserved)
    if clash:
        raise LayoutError(f"layout {key}: kernel argument names {clash} are taken by schedules")
    for p in params:
        if not isinstance(p, KernelParam) or p.scalar_type not in _CTYPES:
            raise LayoutError(
                f"layout {key}: argument {p!r} must be a KernelParam of {', '.join(_CTYPES)}"
            )
    if ScheduleKind.MERGE_PATH in kinds:  # its template reads the counts as kernel arguments
        for required in ("rows", "nnz"):
            if required not in names:
                raise LayoutError(
                    f"layout {key}: merge-path needs kernel arguments 'rows' (tiles) and "
                    "'nnz' (atoms)"
                )


__all__ = [
    "ENTRY_POINT_GROUP",
    "KernelParam",
    "LayoutEntry",
    "LayoutSemantics",
    "Packed",
    "TileView",
    "available",
    "load_plugins",
    "register",
]
