"""teaal-loops: TeAAL specs to load-balanced, verified CUDA kernels.

``teaal_loops.compile(spec, ...)`` is the Python API (:mod:`teaal_loops.pipeline`); CuPy itself
is imported only when a kernel first runs.
"""

from teaal_loops._version import __version__
from teaal_loops.pipeline import compile, compile_for  # noqa: A004 - the API's promised name
from teaal_loops.runtime.split import split_heavy

__all__ = ["__version__", "compile", "compile_for", "split_heavy"]
