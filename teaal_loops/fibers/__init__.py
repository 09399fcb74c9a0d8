"""A small built-in implementation of the fibertree API subset that HiFiber programs use.

fibertree (https://github.com/Fibertree-Project/fibertree) is not on PyPI; when it is importable
the HiFiber reference runs on it, otherwise on this package. The names, signatures and semantics
follow fibertree so that one program text runs on both: :class:`Tensor` (``fromFiber``,
``getRoot``, ``setRankIds``, ``splitUniform``, ``splitNonUniform``, ``splitEqual``,
``splitUnEqual``, ``swizzleRanks``, ``flattenRanks``, ``mergeRanks``), :class:`Fiber`
(iteration over ``(coord, payload)``, ``&``, ``|``, ``<<``, ``getPayload``, ``getPayloadRef``)
and :class:`Payload` (the boxed leaf value behind ``z_ref += ...`` and ``z_ref <<= ...``).
"""

from teaal_loops.fibers.fiber import Fiber, LazyFiber
from teaal_loops.fibers.payload import Payload
from teaal_loops.fibers.tensor import Tensor

__all__ = ["Fiber", "LazyFiber", "Payload", "Tensor"]
