"""Dotted key paths (``mapping.spacetime.Z.space[1]``) and where each spec value was written.

Every error about a spec value names it by its key path: mapping keys joined with dots, list
items as ``[i]``. :func:`value_locations` records, for each path of a parsed YAML document, the
position of the value there; :func:`lookup` answers for any path with the position of its
longest recorded prefix, so that code which only knows the path (lowering, binding) can still
point into the file.
"""

from __future__ import annotations

from collections.abc import Mapping

from teaal_loops.errors import Location
from teaal_loops.spec.yaml_positions import YMap, YNode, YSeq

# Paths longer than this are not recorded (they fall back to a recorded prefix): no spec key
# path comes near it, and it bounds the map's memory for hostile documents.
MAX_PATH_CHARS = 512


def join(path: str, key: str) -> str:
    """The path of ``key`` inside the mapping at ``path`` (``""`` is the document)."""
    return f"{path}.{key}" if path else key


def item(path: str, index: int) -> str:
    """The path of item ``index`` of the list at ``path``."""
    return f"{path}[{index}]"


def parent(path: str) -> str | None:
    """``a.b[1]`` -> ``a.b`` -> ``a`` -> ``""`` -> None."""
    if not path:
        return None
    if path.endswith("]") and (bracket := path.rfind("[")) > 0:
        return path[:bracket]
    dot = path.rfind(".")
    return path[:dot] if dot >= 0 else ""


def value_locations(root: YNode | None) -> dict[str, Location]:
    """Every key path of the document mapped to the position of its value; ``""`` is the
    document itself. Aliased values are recorded under each path that reaches them."""
    out: dict[str, Location] = {}
    if root is None:
        return out
    stack: list[tuple[str, YNode]] = [("", root)]
    while stack:
        path, node = stack.pop()
        if len(path) > MAX_PATH_CHARS or path in out:
            continue
        out[path] = node.location
        if isinstance(node, YMap):
            stack.extend((join(path, e.key), e.value) for e in node.entries)
        elif isinstance(node, YSeq):
            stack.extend((item(path, i), n) for i, n in enumerate(node.items))
    return out


def lookup(locations: Mapping[str, Location], key_path: str) -> Location | None:
    """The location recorded for ``key_path`` or, failing that, for its longest recorded
    prefix (at worst the document's start); None when nothing is recorded."""
    path: str | None = key_path[: MAX_PATH_CHARS * 2]
    while path is not None:
        if path in locations:
            return locations[path]
        path = parent(path)
    return None
