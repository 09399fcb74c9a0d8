"""teaal-loops: TeAAL specs to load-balanced, verified CUDA kernels."""

__version__ = "0.1.0"



def __getattr__(name: str) -> object:
    """``teaal_loops.compile`` loads the CuPy runtime only when asked for."""
    if name == "compile":
        from teaal_loops.runtime import compile

        return compile
    raise AttributeError(f"module 'teaal_loops' has no attribute {name!r}")
