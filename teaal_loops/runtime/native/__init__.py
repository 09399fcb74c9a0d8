"""The one native piece of the runtime: ``vector_call.c``, C twins of
:class:`teaal_loops.runtime.vector_call.VectorCall` (``kernel(prepared, x)`` in one step) and
of the :class:`~teaal_loops.runtime.vector_call.OutputVectors` it takes its outputs from.

It is compiled the first time a process asks for it, with the host's C compiler and Python's
own headers (``sysconfig``), into ``$TEAAL_LOOPS_CACHE_DIR`` (default ``~/.cache/teaal-loops``,
made private to the user), one file per source, compiler and Python build, so that later
processes only load it. A cached file that another user owns, or that others may write, is
never loaded. Where there is no compiler, no headers, no GIL, or ``TEAAL_LOOPS_NATIVE=0``,
:func:`load` returns None and the runtime keeps the Python classes, which do the same in
15 to 23% more a call on an H100 machine (BENCHMARKS.md, the Python API section).
Nothing in the compile command comes from input: the source and the flags are fixed, and the
paths are the package's and the cache's.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).with_name("vector_call.c")
MODULE = "teaal_loops_vector_call"  # the name PyInit_ in the source carries
FLAGS = ("-O2", "-shared", "-fPIC", "-std=c11")
# the tests compile it warning-free with these too (tests/runtime/test_native_vector_call.py)
STRICT_FLAGS = ("-Wall", "-Wextra", "-Werror")
SWITCH = "TEAAL_LOOPS_NATIVE"  # "0": never compile or load it


def cache_dir() -> Path:
    """Where compiled modules live: ``$TEAAL_LOOPS_CACHE_DIR``, else ``~/.cache/teaal-loops``."""
    chosen = os.environ.get("TEAAL_LOOPS_CACHE_DIR")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "teaal-loops"


def compiler() -> list[str] | None:
    """The C compiler as an argument list: ``$CC``, else the one Python was built with, else
    ``cc``, where it is on the path."""
    for candidate in (os.environ.get("CC"), sysconfig.get_config_var("CC"), "cc"):
        if not candidate:
            continue
        words = candidate.split()
        if words and shutil.which(words[0]):
            return words
    return None


def module_path(cc: list[str]) -> Path:
    """The compiled file for this source, compiler, flags and Python build."""
    h = hashlib.sha256(SOURCE.read_bytes())
    for part in (*cc, *FLAGS, sys.version, str(sysconfig.get_config_var("EXT_SUFFIX"))):
        h.update(b"\0" + part.encode())
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return cache_dir() / f"{MODULE}-{h.hexdigest()[:16]}{suffix}"


def build(target: Path, cc: list[str]) -> str | None:
    """Compile the source into ``target`` (written beside it, then renamed, so that processes
    racing here never load half a file); None on success, else why not, in one line."""
    include = sysconfig.get_paths().get("include")
    if not include or not (Path(include) / "Python.h").is_file():
        return f"no Python.h under {include}"
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(suffix=target.suffix, dir=target.parent)
        os.close(handle)
    except OSError as exc:
        return f"cannot write {target.parent}: {exc.strerror}"
    command = [*cc, *FLAGS, f"-I{include}", str(SOURCE), "-o", partial]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            return f"{cc[0]} failed: {lines[0] if lines else done.returncode}"
        os.chmod(partial, 0o755)  # mkstemp's 0600 would not execute-map on every system
        os.replace(partial, target)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{cc[0]} could not run: {exc}"
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return None


def untrusted(path: Path) -> str | None:
    """Why a cached module must not be loaded: a file another user owns, or that others may
    write (anyone who could replace it would run code in this process); None when it is
    ours alone."""
    info = path.stat()
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"{path} belongs to another user"
    if info.st_mode & 0o022:
        return f"{path} is writable by others"
    return None


def _import(path: Path) -> Any:
    loader = importlib.machinery.ExtensionFileLoader(MODULE, str(path))
    spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
    if spec is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=1)
def _load() -> tuple[Any, str | None]:
    if os.environ.get(SWITCH, "1") == "0":
        return None, f"{SWITCH}=0"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):  # the source claims slots under the GIL
        return None, "a Python without the GIL"
    cc = compiler()
    if cc is None:
        return None, "no C compiler on the path"
    try:
        path = module_path(cc)
    except (OSError, RuntimeError) as exc:  # no home folder, or the source not installed
        return None, f"no place for the compiled module: {exc}"
    if not path.is_file():
        reason = build(path, cc)
        if reason is not None:
            return None, reason
    try:
        refused = untrusted(path)
        if refused is not None:
            return None, refused
        return _import(path), None
    except (ImportError, OSError) as exc:
        return None, f"cannot load {path.name}: {exc}"


def load() -> Any:
    """The compiled module (``module.VectorCall``, ``module.OutputVectors``), or None where it
    cannot be had."""
    return _load()[0]


def unavailable_reason() -> str | None:
    """Why :func:`load` returns None (one line), or None when the module is loaded."""
    return _load()[1]
