"""Size parameters of a lowered schedule: which exist, which the user bound.

A spec names sizes either as literals (``uniform_shape(4)``) or as parameters
(``uniform_shape(NUM_THREADS)``). Lowering records each parameter's *role* (``row_tile``,
``group_size``, ``atoms_per_thread``, ...); :func:`bind_params` checks ``--param`` bindings and the
spec's own ``x-teaal-loops.params`` against those roles. A parameter left unbound is ``None`` in
:attr:`~teaal_loops.ir.model.Schedule.params` and defaults from the matrix and the device when
the schedule is bound (the defaults are documented with each schedule definition).
"""

from __future__ import annotations

from collections.abc import Mapping

from teaal_loops.errors import ParameterError
from teaal_loops.spec.model import Spec


def bind_params(
    spec: Spec,
    roles: Mapping[str, str],
    given: Mapping[str, int],
    spec_defaults: Mapping[str, int],
) -> dict[str, int | None]:
    """Check ``--param`` names against the spec; unbound ones default at launch (None)."""
    used = set(spec.parameters) | set(roles)
    for name in given:
        if name not in used:
            listing = ", ".join(sorted(used)) or "none"
            raise ParameterError(
                f"--param {name}: the spec {spec.name} has no parameter {name} "
                f"(its parameters: {listing})"
            )
    for name in roles:
        if name not in used:  # pragma: no cover - roles come from the spec
            raise ParameterError(f"parameter {name} is not used by the spec")
    unused = [p for p in spec.parameters if p not in roles]
    if unused and any(p in given for p in unused):
        raise ParameterError(f"parameters {unused} are not used by the SpMV mapping")
    bound: dict[str, int | None] = {}
    for name in roles:
        value = given.get(name, spec_defaults.get(name))
        if value is not None and (not isinstance(value, int) or value <= 0):
            raise ParameterError(
                f"parameter {name} must be a positive integer, got {value!r}",
                key_path=None if name in given else f"x-teaal-loops.params.{name}",
            )
        bound[name] = value
    return bound
