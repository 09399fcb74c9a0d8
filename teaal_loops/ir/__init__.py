"""The schedule IR: what a GPU kernel does, independent of YAML and of CUDA text.

:mod:`~teaal_loops.ir.model` holds the IR's types, :mod:`~teaal_loops.ir.einsum` recognises
the einsum a spec computes, :mod:`~teaal_loops.ir.mapping` reads its mapping the way every
schedule definition does, and :mod:`~teaal_loops.ir.params` checks its size parameters.
Lowering, binding and simulation live with the schedule definitions
(:mod:`teaal_loops.schedules`) and the pipeline's lowering layer (:mod:`teaal_loops.lowering`).
"""

from teaal_loops.ir.einsum import SUPPORTED_FORMS, EinsumShape, recognise_einsum
from teaal_loops.ir.model import (
    BoundSchedule,
    Combine,
    DenseRank,
    Form,
    GpuLevel,
    RankBinding,
    RowTiling,
    ScalarEpilogue,
    Schedule,
)
from teaal_loops.types import DeviceInfo, Launch, MatrixShape, index_bits

__all__ = [
    "BoundSchedule",
    "Combine",
    "DenseRank",
    "DeviceInfo",
    "Form",
    "SUPPORTED_FORMS",
    "GpuLevel",
    "Launch",
    "MatrixShape",
    "RankBinding",
    "RowTiling",
    "ScalarEpilogue",
    "Schedule",
    "EinsumShape",
    "index_bits",
    "recognise_einsum",
]
