"""The strongest cuSPARSE baselines a CuPy user can reach, for SpMV, SpMM and SDDMM.

cupyx's one-line ``A @ x`` builds cuSPARSE descriptors and a work buffer on every call and
always uses the default algorithm. These baselines do what a careful user would: descriptors,
buffers and (where nvmath-python is installed) cuSPARSE's preprocessing made once per
(matrix, dtype, dense width); every applicable algorithm timed and the fastest kept; a launch
that is the compute call alone, on CuPy's current stream; and a CUDA-graph replay of it.

    from teaal_loops.bench.cusparse import SpMV, SpMM, make_sddmm, measure_baselines
    base = SpMV(A)                       # A: cupyx csr_matrix, float32 or float64
    choice = base.choose(timer)          # times every algorithm (queued and per-call)
    base.launch(x, y)                    # y = A @ x with the winner
    print(base.describe())               # "cuSPARSE SpMV CSR_ALG2 (descriptors once)"
    doc = measure_baselines(A_host, "float32", (8, 32, 128), timer)   # JSON-ready records

:mod:`.descriptors` says which binding provides what (CuPy's ``cupy_backends.cuda.libs.cusparse``
for SpMV/SpMM; nvmath-python's ``nvmath.bindings.cusparse`` for preprocessing and SDDMM),
:mod:`.choice` how algorithms are timed and chosen, :mod:`.sddmm` which SDDMM backend runs,
:mod:`.checks` the rounding bounds and compulsory bytes, :mod:`.measure` the records.
"""

from __future__ import annotations

from teaal_loops.bench.cusparse.choice import AlgorithmTime, Choice, GraphError
from teaal_loops.bench.cusparse.descriptors import (
    Algorithm,
    Availability,
    CusparseBaselineError,
    cupy_binding_available,
    nvmath_available,
)
from teaal_loops.bench.cusparse.measure import measure_baselines
from teaal_loops.bench.cusparse.sddmm import SDDMM, make_sddmm
from teaal_loops.bench.cusparse.spmm import SpMM
from teaal_loops.bench.cusparse.spmv import SpMV
from teaal_loops.bench.cusparse.torch_sddmm import TorchSDDMM, torch_available

__all__ = [
    "SDDMM",
    "Algorithm",
    "AlgorithmTime",
    "Availability",
    "Choice",
    "CusparseBaselineError",
    "GraphError",
    "SpMM",
    "SpMV",
    "TorchSDDMM",
    "cupy_binding_available",
    "make_sddmm",
    "measure_baselines",
    "nvmath_available",
    "torch_available",
]
