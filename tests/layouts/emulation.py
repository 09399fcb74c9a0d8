"""Run a generated kernel of any layout on the CPU (g++ + tests/codegen/cuda_emulation.h).

Reuses the builder of tests/codegen/host_emulation.py; the arguments are the ones the runtime
uploads (``teaal_loops.runtime.device_matrix.host_arguments``), so the emulated kernel sees exactly
the GPU's inputs. ``y`` is poisoned with NaN for storing schedules (zero for atomic ones) and
``owner`` filled with -1, one entry per atom.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from teaal_loops.codegen.config import KernelConfig
from teaal_loops.codegen.render import render
from teaal_loops.ir.model import BoundSchedule
from teaal_loops.runtime.device_matrix import HostArguments
from tests.codegen import host_emulation as emu

CXX = emu.CXX
_sanitized: dict[str, Path] = {}


def build(cfg: KernelConfig, *, sanitize: bool = False) -> Path:
    """The emulation executable of ``cfg``; ``sanitize`` builds it with AddressSanitizer, so
    that any read or write outside an argument array (x at a padding column, y past the last
    row of a partial block) aborts the run."""
    if not sanitize:
        return emu.build(cfg)
    source = render(cfg) + "\n#include <vector>\n" + emu._driver(cfg)
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    if key not in _sanitized:
        assert CXX is not None
        src = emu._BUILD_DIR / f"{key}.asan.cpp"
        exe = emu._BUILD_DIR / f"{key}.asan.exe"
        src.write_text(source)
        flags = [f for f in emu.CXXFLAGS if f != "-O0"] + ["-O1", "-g", "-fsanitize=address"]
        subprocess.run(
            [CXX, *flags, "-include", str(emu.SHIM), "-o", str(exe), str(src)],
            check=True, capture_output=True, text=True,
        )
        _sanitized[key] = exe
    return _sanitized[key]


def run(
    cfg: KernelConfig, bound: BoundSchedule, args: HostArguments, x: np.ndarray[Any, Any],
    *, timeout: float = 60.0, sanitize: bool = False, start: np.ndarray[Any, Any] | None = None,
) -> emu.EmulationResult:
    """``start``: y's values before the launch (a split's second launch adding into the
    first's output); None: zeros where the runtime zeroes y, else NaN (every row must be
    written)."""
    from teaal_loops.runtime.kernel import schedule_arguments

    exe = build(cfg, sanitize=sanitize)
    value = np.dtype(cfg.dtype)
    rows = args.shape.rows
    atoms = bound.matrix.nnz
    arrays = dict(args.arrays)
    arrays["x"] = x.astype(value)
    if start is not None:
        arrays["y"] = np.array(start, dtype=value)
    else:
        arrays["y"] = np.zeros(rows, value) if emu.zeroes_output(cfg, bound) else np.full(
            rows, np.nan, value)
    arrays["owner"] = np.full(atoms, -1, np.int32)
    scalars = {"rows": args.shape.rows, "cols": args.shape.cols, "nnz": args.shape.nnz}
    scalars.update(args.scalars)
    scalars.update(schedule_arguments(bound))
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")  # the shim keeps its barriers
    return emu.execute(
        exe, cfg, bound, arrays, scalars, rows=rows, atoms=atoms, timeout=timeout, env=env
    )
