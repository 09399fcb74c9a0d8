"""The ``teaal-loops`` command line.

Each subcommand lives in its own module ``teaal_loops/cli/cmd_<name>.py`` that defines
``ORDER`` (its place in ``--help``), ``register(subparsers)`` and ``run(args) -> int``; this
module discovers them, so adding a command touches no other file.

User errors (:class:`~teaal_loops.errors.TeaalLoopsError`) are printed as one line,
``FILE:LINE:COL: error: MESSAGE``, with exit status 2: never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType

from teaal_loops import __version__
from teaal_loops.errors import TeaalLoopsError

EXIT_USER_ERROR = 2


def _command_modules() -> list[ModuleType]:
    import teaal_loops.cli as pkg

    mods = [
        importlib.import_module(f"{pkg.__name__}.{info.name}")
        for info in pkgutil.iter_modules(pkg.__path__)
        if info.name.startswith("cmd_")
    ]
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 100), m.__name__))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
        print(str(err), file=sys.stderr)
        return EXIT_USER_ERROR
    except FileNotFoundError as err:
        print(f"{err.filename}: error: no such file", file=sys.stderr)
        return EXIT_USER_ERROR
    except IsADirectoryError as err:
        print(f"{err.filename}: error: is a directory, expected a file", file=sys.stderr)
        return EXIT_USER_ERROR
    except PermissionError as err:
        print(f"{err.filename}: error: permission denied", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
