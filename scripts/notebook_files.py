"""The one step every notebook generator ends with: write the notebooks whose text changed, or,
with ``--check``, write nothing and fail naming the stale ones."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def write_or_check(files: Mapping[Path, str], argv: Sequence[str] | None, *,
                   description: str, command: str) -> int:
    """``files``: notebook path -> its JSON text; ``command`` regenerates them (named in the
    ``--check`` failure). Returns the exit status."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="fail when a notebook is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, text in files.items():
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(REPO)}")
    if stale:
        names = ", ".join(str(p.relative_to(REPO)) for p in stale)
        print(f"stale: {names} (run {command})", file=sys.stderr)
        return 1
    return 0
