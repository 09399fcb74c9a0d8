"""The HiFiber reference: a spec's einsums as a fibertree program, executed.

    from teaal_loops.reference import hifiber_source, run_reference
    text = hifiber_source(spec, params={"NUM_TILES": 64, "NUM_THREADS": 16})
    result = run_reference(spec, {"A": csr, "B": x}, params=..., engine="auto")
    result.outputs["Z"], result.engine, result.stamps[0].space

The program is TeAAL's HiFiber (loops over fibers with ``<<``, ``&``, ``|``, ``splitUniform``,
``splitEqual``, ``splitNonUniform``, ``flattenRanks``, ``mergeRanks``, ``swizzleRanks``,
``getPayloadRef``, ``Tensor.fromFiber``) plus one ``record(...)`` per multiply. It runs on
fibertree when that is importable and otherwise on :mod:`teaal_loops.fibers`; the text is the
same. Unsupported einsums or mappings raise :class:`UnsupportedMappingError` naming what.
"""

from teaal_loops.reference.compare import Comparison, compare_arrays
from teaal_loops.reference.execute import (
    ReferenceResult,
    fibertree_available,
    run_reference,
)
from teaal_loops.reference.hifiber import hifiber_source
from teaal_loops.reference.stamps import RankStamp, Stamp

__all__ = [
    "Comparison",
    "RankStamp",
    "ReferenceResult",
    "Stamp",
    "compare_arrays",
    "fibertree_available",
    "hifiber_source",
    "run_reference",
]
