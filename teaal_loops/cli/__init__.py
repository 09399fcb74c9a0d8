"""The ``teaal-loops`` command line.

Each subcommand lives in its own module ``teaal_loops/cli/cmd_<name>.py`` that defines
``ORDER`` (its place in ``--help``), ``register(subparsers)`` and ``run(args) -> int``; this
module discovers them, so adding a command touches no other file.

User errors (:class:`~teaal_loops.errors.TeaalLoopsError`) are printed as one line,
``FILE:LINE:COL: error: MESSAGE``, with exit status 2: never a traceback.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from teaal_loops import __version__
from teaal_loops.errors import TeaalLoopsError, printable
from teaal_loops.spec import load_spec

EXIT_USER_ERROR = 2


def _command_modules() -> list[ModuleType]:
    mods = [
        importlib.import_module(f"{__name__}.{info.name}")
        for info in pkgutil.iter_modules(__path__)
        if info.name.startswith("cmd_")
    ]
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 100), m.__name__))


class OneLineParser(argparse.ArgumentParser):
    """A bad flag is one line on stderr and exit status 2, like every other user error (the
    usage stays one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {printable(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="teaal-loops",
        description=(
            "Turn a TeAAL sparse tensor algebra spec into a load-balanced CUDA kernel, "
            "run it through CuPy and check it against a HiFiber reference of the same spec."
        ),
    )
    parser.add_argument("--version", action="version", version=f"teaal-loops {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in _command_modules():
        mod.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except TeaalLoopsError as err:
        print(_located(err, args).cli_line(), file=sys.stderr)
        return EXIT_USER_ERROR
    except BrokenPipeError:  # `teaal-loops ... | head` closed our output: not an error
        _silence_stdout()
        return 0
    except OSError as err:  # a file we were asked to read or write cannot be
        print(_os_error_line(err), file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        return 130


def _located(err: TeaalLoopsError, args: argparse.Namespace) -> TeaalLoopsError:
    """Give an error that names a spec value (``key_path``) but no line the value's position:
    from the spec a command attached (``with spec_errors(spec):``, see teaal_loops.errors),
    else, as a fallback, from the one spec file the command line names."""
    err.located()
    if not err.key_path or err.locator is not None:
        return err
    if err.location is not None and err.location.line is not None:
        return err
    path = _single_spec_path(args)
    if path is None or (err.location is not None and err.location.file not in (None, path)):
        return err

    try:
        err.located(load_spec(path))
    except TeaalLoopsError:
        pass  # the spec no longer loads: keep the error as it is
    return err


def _single_spec_path(args: argparse.Namespace) -> str | None:
    spec = getattr(args, "spec", None)
    specs = getattr(args, "specs", None)
    if spec is None and isinstance(specs, list) and len(specs) == 1:
        spec = specs[0]
    return spec if isinstance(spec, str) and os.path.isfile(spec) else None


_OS_REASONS = {
    errno.ENOENT: "no such file",
    errno.EISDIR: "is a directory, expected a file",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOTDIR: "a component of the path is not a directory",
    errno.ELOOP: "too many levels of symbolic links",
    errno.ENAMETOOLONG: "the file name is too long",
    errno.ENOSPC: "no space left on the device",
}


def _os_error_line(err: OSError) -> str:
    """``FILE: error: REASON``, one line whatever the file name holds."""
    reason = _OS_REASONS.get(err.errno or 0) or (err.strerror or str(err) or "input/output error")
    if err.filename is None:
        return f"error: {printable(reason)}"
    return f"{printable(os.fsdecode(err.filename))}: error: {printable(reason)}"


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
