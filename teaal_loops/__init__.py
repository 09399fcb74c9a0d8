"""teaal-loops: TeAAL specs to load-balanced, verified CUDA kernels."""

from teaal_loops._version import __version__

__all__ = ["__version__", "compile", "compile_for"]


def __getattr__(name: str) -> object:
    """``teaal_loops.compile`` loads the CuPy runtime only when asked for."""
    if name in ("compile", "compile_for"):
        from teaal_loops import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'teaal_loops' has no attribute {name!r}")
