"""The distributed package's user error: one line, exit status 2 on the command line."""

from __future__ import annotations

from teaal_loops.errors import TeaalLoopsError


class DistributedError(TeaalLoopsError):
    """A distributed run that cannot go ahead: a bad rank count, a form that is not
    distributed, a missing launcher or library, a peer that did not answer in time."""
