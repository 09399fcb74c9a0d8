"""Checking that a file is a results document of ``teaal-loops bench`` before reading it.

``--report`` and ``--fit-auto`` read a JSON document that may come from anywhere. Every field
they read is checked here first, so that a wrong file gives one line naming the first missing
or mistyped field (``cases[3].results[2].kernel.median_ms: expected a number``) instead of a
traceback or a report full of question marks. Fields the readers do not use are not checked;
fields they use only when present may be absent.

Versions (``schema``: ``teaal-loops-bench/<version>``):

1. SpMV against cupyx's ``A @ x`` (``cusparse`` held cupyx's times; results ``launch``,
   ``kernel``, ``call``; ``speedup_called``, ``speedup_kernel``). Still read: reports of it
   are drawn as they were (:mod:`teaal_loops.bench.report_v1`).
2. Cases of SpMV, SpMM and SDDMM (``kernel``, ``width``); ``cusparse`` is the best cuSPARSE
   (``winner``, ``library``, ``preprocess``, ``kernel`` / ``throughput`` / ``latency``,
   ``graph``), ``second`` the one-line second column; results ``kernel``, ``throughput``,
   ``latency``, ``graph`` (and SpMV's ``call``), ``speedup`` and ``second_speedup`` by way.

A later version is refused in one line naming the versions this code reads.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teaal_loops.errors import Location, TeaalLoopsError

SCHEMA_PREFIX = "teaal-loops-bench/"
VERSION = 2
SCHEMA = f"{SCHEMA_PREFIX}{VERSION}"
SCHEMA_V1 = f"{SCHEMA_PREFIX}1"
READS = (1, 2)
KERNELS = ("spmv", "spmm", "sddmm")
WAYS = ("kernel", "throughput", "latency")
TIMING_BLOCKS = ("call", "kernel", "launch")
OPTIONAL_NUMBERS = ("speedup_called", "speedup_kernel", "gbps", "copy_fraction", "over_best",
                    "kernel_ms", "launch_ms", "call_ms")
STATS_NUMBERS = ("rows", "nnz", "mean", "max", "cv")


class BenchResultsError(TeaalLoopsError):
    """A file that is not a readable results document of ``teaal-loops bench``."""


def _error(where: str | Path, message: str) -> BenchResultsError:
    return BenchResultsError(message, location=Location(str(where)))


class _Field(Exception):
    """A field that is missing or has the wrong type (the path and what was expected)."""


def read_document(path: str | Path) -> dict[str, Any]:
    """The JSON object in ``path`` (``.json`` or gzip ``.json.gz``), not yet checked."""
    p = Path(path)
    try:
        raw = p.read_bytes()
        if p.name.endswith(".gz"):
            raw = gzip.decompress(raw)
        doc = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise _error(p, "no such file") from None
    except IsADirectoryError:
        raise _error(p, "is a directory, expected a results JSON") from None
    except OSError as err:  # permissions, a bad gzip stream (gzip.BadGzipFile), ...
        raise _error(p, f"cannot read: {err.strerror or err}") from None
    except (EOFError, UnicodeDecodeError, ValueError) as err:
        raise _error(p, f"not JSON: {_first_line(err)}") from None
    if not isinstance(doc, dict):
        raise _error(p, "not a teaal-loops bench results document: expected a JSON object, "
                     f"got {type(doc).__name__}")
    return doc


def version(doc: Any) -> int:
    """The version of a document's ``schema`` (1 for anything unreadable: the checks say why)."""
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if isinstance(schema, str) and schema.startswith(SCHEMA_PREFIX):
        tail = schema[len(SCHEMA_PREFIX):]
        if tail.isdigit():
            return int(tail)
    return 1


def check_document(doc: Any, where: str, *, need_stats: bool = False) -> None:
    """Raise :class:`BenchResultsError` naming the first field of ``doc`` that is wrong.

    ``need_stats`` also requires every case's row statistics (what the auto fit reads).
    """
    try:
        _check(doc, need_stats)
    except _Field as err:
        raise _error(where, f"not a teaal-loops bench results document: {err}") from None


# --------------------------------------------------------------------------------------------


def _check(doc: Any, need_stats: bool) -> None:
    _require(doc, "", dict, "an object")
    schema = _get(doc, "schema", "", str, "a string")
    if not schema.startswith(SCHEMA_PREFIX):
        raise _Field(f"schema: expected '{SCHEMA_PREFIX}<version>', got {schema!r}")
    number = version(doc)
    if schema != f"{SCHEMA_PREFIX}{number}" or number not in READS:
        raise _Field(f"schema {schema!r}: this teaal-loops reads versions "
                     f"{', '.join(map(str, READS))} (a newer teaal-loops wrote it?)")
    device = _get(doc, "device", "", dict, "an object")
    _get(device, "name", "device.", str, "a string")
    for key in ("date", "command"):
        _optional(doc, key, "", str, "a string")
    copy = _optional(doc, "copy", "", dict, "an object")
    if copy is not None:
        _optional_number(copy, "gbps", "copy.")
    _optional(doc, "settings", "", dict, "an object")
    cases = _get(doc, "cases", "", list, "a list")
    check = _check_case if number == 1 else _check_case_v2
    for i, case in enumerate(cases):
        check(case, f"cases[{i}]", need_stats)


def _check_case(case: Any, at: str, need_stats: bool) -> None:
    _require(case, at, dict, "an object")
    _get(case, "matrix", at + ".", str, "a string")
    if "error" in case:
        _get(case, "error", at + ".", str, "a string")
        return
    for key in ("dtype", "group"):
        _get(case, key, at + ".", str, "a string")
    for key in ("rows", "cols", "nnz"):
        _get(case, key, at + ".", int, "an integer")
    cusparse = _get(case, "cusparse", at + ".", dict, "an object")
    for key in ("call", "kernel"):
        _timing(_get(cusparse, key, f"{at}.cusparse.", dict, "an object"), f"{at}.cusparse.{key}")
    stats = _optional(case, "stats", at + ".", dict, "an object")
    if need_stats and stats is None:
        raise _Field(f"{at}.stats: missing (the auto fit needs each case's row statistics)")
    if stats is not None:
        for key in STATS_NUMBERS:
            (_number if need_stats else _optional_number)(stats, key, f"{at}.stats.")
    for key in ("best", "auto"):
        block = _optional(case, key, at + ".", dict, "an object or null")
        if block is not None:
            _optional(block, "label", f"{at}.{key}.", str, "a string")
            for number in OPTIONAL_NUMBERS:
                _optional_number(block, number, f"{at}.{key}.")
    results = _get(case, "results", at + ".", list, "a list")
    for j, result in enumerate(results):
        _check_result(result, f"{at}.results[{j}]")


def _check_result_fields(result: Any, at: str) -> None:
    """What a result holds in every schema: its label, texts, flags and integer maps."""
    _require(result, at, dict, "an object")
    _get(result, "label", at + ".", str, "a string")
    for key in ("error", "skipped", "spec", "layout", "schedule"):
        _optional(result, key, at + ".", str, "a string")
    for key in ("valid", "auto", "capped"):
        _optional(result, key, at + ".", bool, "true or false")
    for key in ("params", "bound"):
        mapping = _optional(result, key, at + ".", dict, "an object")
        for name, value in (mapping or {}).items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise _Field(f"{at}.{key}.{name}: expected an integer, got {value!r}")


def _check_result(result: Any, at: str) -> None:
    _check_result_fields(result, at)
    for key in TIMING_BLOCKS:
        block = _optional(result, key, at + ".", dict, "an object")
        if block is not None:
            _timing(block, f"{at}.{key}")
    if "kernel" not in result and "error" not in result and "skipped" not in result:
        raise _Field(f"{at}: neither timed (kernel) nor an error nor skipped")
    for key in OPTIONAL_NUMBERS:
        _optional_number(result, key, at + ".")


def _check_case_v2(case: Any, at: str, need_stats: bool) -> None:
    _require(case, at, dict, "an object")
    _get(case, "matrix", at + ".", str, "a string")
    if "error" in case:
        _get(case, "error", at + ".", str, "a string")
        return
    kernel = _get(case, "kernel", at + ".", str, "a string")
    if kernel not in KERNELS:
        raise _Field(f"{at}.kernel: expected one of {', '.join(KERNELS)}, got {kernel!r}")
    width = case.get("width")
    if kernel == "spmv" and width is not None:
        raise _Field(f"{at}.width: expected null for spmv, got {_show(width)}")
    if kernel != "spmv" and (isinstance(width, bool) or not isinstance(width, int)
                             or width < 1):
        raise _Field(f"{at}.width: expected a positive integer, got {_show(width)}")
    for key in ("dtype", "group"):
        _get(case, key, at + ".", str, "a string")
    for key in ("rows", "cols", "nnz"):
        _get(case, key, at + ".", int, "an integer")
    for side in ("cusparse", "second"):
        _side(_optional(case, side, at + ".", dict, "an object"), f"{at}.{side}")
    stats = _optional(case, "stats", at + ".", dict, "an object")
    if need_stats and stats is None:
        raise _Field(f"{at}.stats: missing (the auto fit needs each case's row statistics)")
    if stats is not None:
        for key in STATS_NUMBERS:
            (_number if need_stats else _optional_number)(stats, key, f"{at}.stats.")
    for key in ("best", "auto"):
        block = _optional(case, key, at + ".", dict, "an object or null")
        if block is not None:
            _optional(block, "label", f"{at}.{key}.", str, "a string")
            for number in (*OPTIONAL_NUMBERS, "throughput_ms", "latency_ms", "graph_ms"):
                _optional_number(block, number, f"{at}.{key}.")
            _speedups(block, f"{at}.{key}")
    results = _get(case, "results", at + ".", list, "a list")
    for j, result in enumerate(results):
        _check_result_v2(result, f"{at}.results[{j}]")


def _side(block: dict[str, Any] | None, at: str) -> None:
    """A baseline's record: its error, or its three timings (and its graph, if any)."""
    if block is None:
        return
    if "error" in block:
        _get(block, "error", at + ".", str, "a string")
        return
    for way in WAYS:
        _timing(_get(block, way, at + ".", dict, "an object"), f"{at}.{way}")
    for key in ("winner", "library", "baseline", "what"):
        _optional(block, key, at + ".", str, "a string")
    preprocess = _optional(block, "preprocess", at + ".", dict, "an object")
    if preprocess is not None:
        _get(preprocess, "ran", f"{at}.preprocess.", bool, "true or false")
    _graph(block, at)
    for key in ("gbps", "copy_fraction"):
        _optional_number(block, key, at + ".")


def _graph(block: dict[str, Any], at: str) -> None:
    graph = _optional(block, "graph", at + ".", dict, "an object")
    if graph is None or "reason" in graph:
        if graph is not None:
            _get(graph, "reason", f"{at}.graph.", str, "a string")
        return
    for way in ("throughput", "latency"):
        _timing(_get(graph, way, f"{at}.graph.", dict, "an object"), f"{at}.graph.{way}")


def _speedups(block: dict[str, Any], at: str) -> None:
    for key in ("speedup", "second_speedup"):
        ways = _optional(block, key, at + ".", dict, "an object")
        for way in ways or {}:
            _optional_number(ways, way, f"{at}.{key}.")


def _check_result_v2(result: Any, at: str) -> None:
    _check_result_fields(result, at)
    for key in (*WAYS, "call"):
        block = _optional(result, key, at + ".", dict, "an object")
        if block is not None:
            _timing(block, f"{at}.{key}")
    if "kernel" not in result and "error" not in result and "skipped" not in result:
        raise _Field(f"{at}: neither timed (kernel) nor an error nor skipped")
    _graph(result, at)
    _speedups(result, at)
    for key in ("gbps", "copy_fraction"):
        _optional_number(result, key, at + ".")


def _timing(block: dict[str, Any], at: str) -> None:
    if "median_ms" not in block:
        raise _Field(f"{at}.median_ms: missing")
    _optional_number(block, "median_ms", at + ".")
    _optional(block, "queued", at + ".", bool, "true or false")


# -- small checks ----------------------------------------------------------------------------

Check = Callable[[Any], bool]


def _is(kind: type) -> Check:
    if kind is int:
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    return lambda v: isinstance(v, kind)


def _require(value: Any, at: str, kind: type, what: str) -> None:
    if not _is(kind)(value):
        raise _Field(f"{at or 'document'}: expected {what}, got {_show(value)}")


def _get(obj: dict[str, Any], key: str, prefix: str, kind: type, what: str) -> Any:
    if key not in obj:
        raise _Field(f"{prefix}{key}: missing")
    _require(obj[key], prefix + key, kind, what)
    return obj[key]


def _optional(obj: dict[str, Any], key: str, prefix: str, kind: type, what: str) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    _require(value, prefix + key, kind, what)
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not (
        isinstance(value, float) and math.isinf(value)
    )


def _number(obj: dict[str, Any], key: str, prefix: str) -> None:
    if key not in obj:
        raise _Field(f"{prefix}{key}: missing")
    if not _is_number(obj[key]):
        raise _Field(f"{prefix}{key}: expected a number, got {_show(obj[key])}")


def _optional_number(obj: dict[str, Any], key: str, prefix: str) -> None:
    value = obj.get(key)
    if value is not None and not _is_number(value):
        raise _Field(f"{prefix}{key}: expected a number or null, got {_show(value)}")


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__
