"""A case's best variant and the ``auto`` choice beside it: one rule for every schema version.

``best`` is the fastest timed result by device median among the generator's own kernels (a
variant launching another source file or a patched text, marked ``experiment``, is compared
in the tables but is not "ours"; it is best only where nothing else was timed); ``auto`` is
the result the chooser
picked, with its rule and reason and how far it is from the best (1.0: it is the best). The
schemas differ only in what a summary of a result holds and what counts as timed, so both
are passed in.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

Result = dict[str, Any]


def best_and_auto(
    case: Result,
    summarize: Callable[[Result], Result],
    is_timed: Callable[[Result], bool],
    median: Callable[[Any], float | None],
) -> Result:
    """``{"best": {...}, "auto": {...}}`` for one case (module docstring)."""
    results = [r for r in case.get("results", []) if is_timed(r)]
    results = [r for r in results if not r.get("experiment")] or results
    out: Result = {"best": None, "auto": None}
    if results:
        best = min(results, key=lambda r: median(r["kernel"]) or math.inf)
        out["best"] = summarize(best)
    auto = next((r for r in case.get("results", []) if r.get("auto")), None)
    if auto is not None:
        entry = summarize(auto) if "kernel" in auto else {"label": auto.get("label")}
        choice = case.get("auto_choice") or {}
        entry["rule"] = choice.get("rule")
        entry["reason"] = choice.get("reason")
        entry["valid"] = bool(auto.get("valid"))
        over = None
        if out["best"] and is_timed(auto):
            over = (median(auto["kernel"]) or math.inf) / out["best"]["kernel_ms"]
        entry["over_best"] = over
        out["auto"] = entry
    return out
