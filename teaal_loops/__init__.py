"""teaal-loops: TeAAL specs to load-balanced, verified CUDA kernels."""

__version__ = "0.1.0"

