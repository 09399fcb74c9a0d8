"""Sparse layouts: one module per layout, each a complete :class:`LayoutDefinition`.

A layout is defined once, in its own module (``csr.py``, ``csc.py``, ``coo.py``, ``ell.py``,
``dia.py``, ``bcsr.py``, ``panels.py``, ``heavy.py``, ``pieces.py``): its semantics (what its
tiles are, whether they scatter or stack, which schedules it supports, which TeAAL formats describe
it), its option (``bcsr:4x4``), its host builder (and, where it has one, its device builder),
its packer into kernel arguments, its entries for the CPU simulation and its Jinja2 macro
file. The contract
every layout keeps is stated in :mod:`teaal_loops.layouts.contract`.

Built-in layouts register through the same :func:`register` that users call, from their own
code or from an installed package's ``teaal_loops.layouts`` entry point; docs/layouts.md walks
through an example.
"""

from __future__ import annotations

# The built-in layouts register themselves on import, in this order (csr first: the default).
# isort: off
from teaal_loops.layouts import csr  # noqa: F401
from teaal_loops.layouts import csc  # noqa: F401
from teaal_loops.layouts import coo  # noqa: F401
from teaal_loops.layouts import ell  # noqa: F401
from teaal_loops.layouts import bcsr  # noqa: F401
from teaal_loops.layouts import dia  # noqa: F401
from teaal_loops.layouts import panels  # noqa: F401
from teaal_loops.layouts import heavy  # noqa: F401
from teaal_loops.layouts import pieces  # noqa: F401
# isort: on
from teaal_loops.layouts.contract import (
    DEVICE_BUILD_BYTES_PER_NONZERO,
    Entries,
    LayoutDefinition,
    Packed,
    TileView,
    tile_shape,
)
from teaal_loops.layouts.formats import (
    layout_for_rank_order,
    layout_from_format,
    supported_formats_text,
)
from teaal_loops.layouts.host import (
    PADDING_LIMIT,
    HostLayout,
    check_fits_device,
    check_padding,
    convert,
    host_layout,
    tile_view,
)
from teaal_loops.layouts.registry import (
    ENTRY_POINT_GROUP,
    available,
    build_options,
    canonical_layout,
    check_schedule_fits,
    get_layout,
    known_layouts,
    load_plugins,
    mark_builtin,
    register,
    split_name,
    template_dirs,
    template_options,
)
from teaal_loops.types import KernelParam

mark_builtin()

__all__ = [
    "DEVICE_BUILD_BYTES_PER_NONZERO",
    "ENTRY_POINT_GROUP",
    "PADDING_LIMIT",
    "Entries",
    "HostLayout",
    "KernelParam",
    "LayoutDefinition",
    "Packed",
    "TileView",
    "available",
    "build_options",
    "canonical_layout",
    "check_fits_device",
    "check_padding",
    "check_schedule_fits",
    "convert",
    "get_layout",
    "host_layout",
    "known_layouts",
    "layout_for_rank_order",
    "layout_from_format",
    "load_plugins",
    "register",
    "split_name",
    "supported_formats_text",
    "template_dirs",
    "template_options",
    "tile_shape",
    "tile_view",
]
