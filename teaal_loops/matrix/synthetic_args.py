"""Arguments of the synthetic matrix generators: the ``--synthetic`` text and every bound.

``KIND:key=value,...`` is parsed here and every value is checked before anything is generated:
integers are read from their digits (at most 2**62, so ``rows=9^99999999`` is refused at once
instead of computed), fractions must be finite and lie in [0, 1], ``dtype`` must be one of
``VALID_DTYPES``, the seed must lie in 0..2**62, and the matrix plus the generator's working
arrays must fit in the memory the host has available.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from teaal_loops.errors import MatrixError
from teaal_loops.matrix.limits import (
    MAX_INT,
    NotAnInteger,
    TooLarge,
    check_memory,
    parse_count,
    shown,
)

SYNTHETIC_KINDS = ("uniform", "banded", "rmat", "longrows", "emptyrows")
COMMON_KEYS = ("rows", "cols", "nnz", "seed", "dtype")
KIND_KEYS: Mapping[str, tuple[str, ...]] = {
    "uniform": (),
    "banded": ("bandwidth",),
    "rmat": ("scale", "a", "b", "c", "d", "permute"),
    "longrows": ("long_rows", "fraction"),
    "emptyrows": ("empty_fraction",),
}
DTYPE_NAMES = {"float32": "float32", "f32": "float32", "float64": "float64", "f64": "float64"}
VALID_DTYPES = "float32 (f32) or float64 (f64)"
MAX_SEED = MAX_INT
MAX_RMAT_SCALE = 31  # R-MAT keys row * rows + col must fit int64
# key -> kind of value ("int", "float", "bool", "dtype")
KEY_TYPES = {
    "rows": "int",
    "cols": "int",
    "nnz": "int",
    "seed": "int",
    "dtype": "dtype",
    "bandwidth": "int",
    "scale": "int",
    "a": "float",
    "b": "float",
    "c": "float",
    "d": "float",
    "permute": "bool",
    "long_rows": "int",
    "fraction": "float",
    "empty_fraction": "float",
}
_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_POWER = re.compile(r"([0-9]+)\s*(?:\^|\*\*)\s*([0-9]+)")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_spec(text: str) -> tuple[str, dict[str, Any]]:
    """``"rmat:rows=1024,nnz=8000"`` -> ``("rmat", {"rows": 1024, "nnz": 8000})``."""
    where = f"--synthetic {shown(text, 80)}"
    kind, _, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    if kind not in SYNTHETIC_KINDS:
        raise MatrixError(
            f"{where}: unknown kind {shown(kind)} (valid kinds: {', '.join(SYNTHETIC_KINDS)}; "
            "e.g. rmat:rows=1048576,nnz=10000000)"
        )
    valid = COMMON_KEYS + KIND_KEYS[kind]
    values: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, raw = (s.strip() for s in item.partition("="))
        if not sep or not raw:
            raise MatrixError(f"{where}: {shown(item)} is not key=value")
        if key not in valid:
            raise MatrixError(
                f"{where}: unknown key {shown(key)} for {kind} (valid keys: {', '.join(valid)})"
            )
        if key in values:
            raise MatrixError(f"{where}: key {key!r} given twice")
        values[key] = _parse_value(key, raw, where)
    if "nnz" not in values:
        raise MatrixError(f"{where}: nnz=... is required (approximate nonzeros)")
    if "rows" not in values:
        if kind == "rmat" and "scale" in values:
            values["rows"] = 2 ** check_int(kind, "scale", values["scale"], 0, MAX_RMAT_SCALE)
        else:
            raise MatrixError(f"{where}: rows=... is required")
    return kind, values


def _parse_value(key: str, raw: str, where: str) -> Any:
    kind = KEY_TYPES[key]
    if kind == "dtype":
        return raw
    if kind == "bool":
        lowered = raw.lower()
        if lowered in ("1", "true", "yes"):
            return True
        if lowered in ("0", "false", "no"):
            return False
        raise MatrixError(f"{where}: {key}={shown(raw)} is not a boolean (0/1)")
    try:
        number = parse_number(raw)
    except NotAnInteger:
        raise MatrixError(f"{where}: {key}={shown(raw)} is not a number") from None
    except TooLarge:
        raise MatrixError(f"{where}: {key}={shown(raw)} is too large (at most 2^62)") from None
    if kind == "int":
        if not float(number).is_integer():
            raise MatrixError(f"{where}: {key}={shown(raw)} is not an integer")
        return int(number)
    return float(number)


def parse_number(raw: str) -> int | float:
    """``1000``, ``-3``, ``1e6``, ``1.5e6``, ``10M`` / ``4k`` / ``2G`` / ``1T`` (powers of 1000),
    ``2^20`` or ``2**20``; NotAnInteger ("not a number") or TooLarge (beyond 2**62)."""
    text = raw.strip().replace("_", "")
    sign = -1 if text.startswith("-") else 1
    magnitude = text[1:] if text[:1] in "+-" and len(text) > 1 else text
    power = _POWER.fullmatch(magnitude)
    if power:
        base, exponent = parse_count(power.group(1)), parse_count(power.group(2))
        if base > 1 and exponent * (base.bit_length() - 1) > MAX_INT.bit_length():
            raise TooLarge(raw)  # decided from the bit lengths: 9^99999999 is never computed
        return _bounded(sign * base**exponent, raw)
    scale = 1
    if magnitude and magnitude[-1].lower() in _SUFFIX:
        scale, magnitude = _SUFFIX[magnitude[-1].lower()], magnitude[:-1]
    if magnitude.isascii() and magnitude.isdigit():
        return _bounded(sign * parse_count(magnitude) * scale, raw)
    if not _DECIMAL.fullmatch(magnitude) or magnitude[:1] in "+-":
        raise NotAnInteger(raw)
    value = sign * float(magnitude) * scale
    if not math.isfinite(value) or abs(value) > MAX_INT:
        raise TooLarge(raw)
    return int(value) if value.is_integer() else value


def _bounded(value: int, raw: str) -> int:
    if abs(value) > MAX_INT:
        raise TooLarge(raw)
    return value


def value_dtype(raw: Any, kind: str) -> np.dtype[Any]:
    """``float32`` / ``f32`` / ``float64`` / ``f64`` (or a NumPy float32 / float64 dtype)."""
    if isinstance(raw, str):
        name = DTYPE_NAMES.get(raw.strip().lower())
        if name is not None:
            return np.dtype(name)
    elif raw is np.float32 or raw is np.float64:
        return np.dtype(raw)
    elif isinstance(raw, np.dtype) and raw.name in ("float32", "float64"):
        return raw
    raise MatrixError(
        f"synthetic {kind}: dtype {shown(str(raw))} is not valid (valid dtypes: {VALID_DTYPES})"
    )


def check_int(kind: str, name: str, value: Any, minimum: int, maximum: int = MAX_INT) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise MatrixError(f"synthetic {kind}: {name}={shown(str(value))} is not an integer")
    if value < minimum:
        raise MatrixError(f"synthetic {kind}: {name}={value} must be at least {minimum}")
    if value > maximum:
        limit = "2^62" if maximum == MAX_INT else str(maximum)
        raise MatrixError(f"synthetic {kind}: {name}={value} must be at most {limit}")
    return int(value)


def check_fraction(kind: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise MatrixError(f"synthetic {kind}: {name}={shown(str(value))} is not a number")
    if not 0.0 <= float(value) <= 1.0:  # NaN fails too
        raise MatrixError(f"synthetic {kind}: {name}={value} must lie in [0, 1]")
    return float(value)


def check_shape(
    kind: str, rows: Any, cols: Any, nnz: Any, seed: Any, options: dict[str, Any]
) -> tuple[int, int]:
    """Checked ``(rows, cols)``; refuses sizes the host cannot hold before anything is drawn."""
    rows = check_int(kind, "rows", rows, 1)
    nnz = check_int(kind, "nnz", nnz, 0)
    check_int(kind, "seed", seed, 0, MAX_SEED)
    if kind == "rmat":
        if "scale" in options:
            scale = check_int(kind, "scale", options["scale"], 0, MAX_RMAT_SCALE)
            if rows != 2**scale:
                raise MatrixError(f"synthetic rmat: rows={rows} contradicts scale={scale}")
        check_int(kind, "rows", rows, 1, 2**MAX_RMAT_SCALE)
        if cols is not None and cols != rows:
            raise MatrixError(
                f"synthetic rmat: R-MAT matrices are square ({rows}x{rows}); drop cols={cols}"
            )
        cols = rows
    cols = rows if cols is None else check_int(kind, "cols", cols, 1)
    if nnz > rows * cols:
        raise MatrixError(
            f"synthetic {kind}: nnz={nnz} exceeds the {rows}x{cols} = {rows * cols} cells"
        )
    stored = nnz
    if kind == "banded" and "bandwidth" in options:
        stored = rows * min(check_int(kind, "bandwidth", options["bandwidth"], 1), cols)
    # CSR (int64 offsets, indices and values), the per-row counts, R-MAT's sort keys, the
    # dense x and y a kernel will need
    need = 24 * (rows + 1) + 8 * cols + stored * (40 if kind == "rmat" else 24)
    check_memory(need, f"synthetic {kind}: a {rows}x{cols} matrix with {stored} nonzeros")
    return rows, cols
