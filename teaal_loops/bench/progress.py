"""A progress line on stderr: redrawn in place on a terminal, one line per note otherwise.

No dependency: a bar of ``#`` and ``.``, the fraction done, elapsed time and what runs now.
When stderr is not a terminal (a log, a CI job, a remote run whose output is captured) only
:meth:`Progress.note` lines are printed, so logs stay readable.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 28


class Progress:
    def __init__(self, stream: TextIO | None = None, *, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.interactive = enabled and bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = 0
        self.done = 0
        self.label = ""
        self.t0 = time.perf_counter()

    def start(self, total: int) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.t0 = time.perf_counter()
        self._draw()

    def update(self, label: str) -> None:
        self.label = label
        self._draw()

    def advance(self, steps: int = 1) -> None:
        self.done = min(self.total, self.done + steps)
        self._draw()

    def note(self, line: str) -> None:
        """A line that stays (a finished case), printed above the bar."""
        if not self.enabled:
            return
        if self.interactive:
            self.stream.write("\r\x1b[2K")
        self.stream.write(f"[{self.elapsed():6.0f}s] {line}\n")
        self.stream.flush()
        self._draw()

    def detail(self, line: str) -> None:
        """A line for logs only (non-interactive runs); a terminal shows the bar instead."""
        if self.enabled and not self.interactive:
            self.stream.write(f"[{self.elapsed():6.0f}s] {line}\n")
            self.stream.flush()

    def finish(self) -> None:
        if self.interactive:
            self.done = self.total
            self.label = "done"
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def bar(self) -> str:
        filled = int(WIDTH * self.done / self.total) if self.total else 0
        percent = 100.0 * self.done / self.total if self.total else 0.0
        return (
            f"[{'#' * filled}{'.' * (WIDTH - filled)}] {percent:5.1f}% "
            f"{self.done}/{self.total} {self.elapsed():5.0f}s {self.label}"
        )

    def _draw(self) -> None:
        if not self.interactive:
            return
        self.stream.write("\r\x1b[2K" + self.bar()[:160])
        self.stream.flush()
