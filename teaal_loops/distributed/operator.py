"""The distributed product ``y_own = A[rows] @ x`` on one rank: SpMV and SpMM alike.

One call (PETSc's MPIAIJ order):

1. post the exchange of ``x`` (:class:`~teaal_loops.distributed.exchange.Exchange`);
2. ``y_own = diag @ x_own`` while it is in flight;
3. wait for it;
4. ``tmp = offd @ operand`` (the ghost buffer, or the gathered ``x``) and
   ``y_own[offd_rows] += tmp``.

Step 4 **adds on the protocol's side**, not in the kernel: a generated kernel either stores
each output row once (STORE, GROUP_REDUCE) or zeroes ``y`` and adds atomically where a row is
split across threads (ATOMIC) while still storing whole rows; neither adds into a ``y``
already holding the diagonal block's result. So the off-diagonal block's kernel writes a
separate output of only the rows holding ghosts, and one element-wise add (a gather-add-scatter
over ``len(offd_rows)`` rows, unique indices) folds it into ``y``. Both blocks run the very
kernel the spec generates (:class:`~teaal_loops.distributed.device.KernelBlocks`); on the host
a SciPy stand-in (:class:`ScipyBlocks`) runs the same protocol, which is what the CI's MPI
tests check. SpMM is the same call with ``x`` and ``y`` of ``D`` columns.
"""

from __future__ import annotations

from typing import Any, Protocol

import scipy.sparse as sp

from teaal_loops.distributed.exchange import Exchange
from teaal_loops.distributed.shard import ShardExtent
from teaal_loops.matrix.csr_arrays import CsrArrays


class Blocks(Protocol):
    """The two local products of one rank (the generated kernel, or a stand-in)."""

    has_offd: bool

    def diag(self, x_own: Any, y_own: Any) -> None:
        """``y_own = diag @ x_own`` (overwrites every row)."""
        ...

    def offd_add(self, operand: Any, y_own: Any) -> None:
        """``y_own[offd_rows] += offd @ operand``."""
        ...


class ScipyBlocks:
    """SciPy's products on the host: the CPU stand-in for the generated kernel."""

    def __init__(self, shard: ShardExtent, offd: Any) -> None:
        self.diag_block = _scipy(shard.diag)
        self.offd_block = _scipy(offd)
        self.offd_rows = shard.offd_rows
        self.has_offd = offd.nnz > 0

    def diag(self, x_own: Any, y_own: Any) -> None:
        y_own[...] = self.diag_block @ x_own

    def offd_add(self, operand: Any, y_own: Any) -> None:
        y_own[self.offd_rows] += self.offd_block @ operand


def _scipy(block: Any) -> sp.csr_matrix:
    """A block as SciPy multiplies it (a generated shard's blocks are CSR arrays)."""
    return block.to_scipy() if isinstance(block, CsrArrays) else block


class DistributedProduct:
    """One rank's share of ``y = A @ x`` (module docstring); ``shard`` a
    :class:`~teaal_loops.distributed.shard.Shard` or a shard made on the device
    (:class:`~teaal_loops.distributed.generated.GeneratedShard`)."""

    def __init__(self, shard: ShardExtent, exchange: Exchange, blocks: Blocks) -> None:
        self.shard = shard
        self.exchange = exchange
        self.blocks = blocks

    def __call__(self, x_own: Any, y_own: Any) -> Any:
        """Fill ``y_own`` (this rank's rows of ``y``) from ``x_own`` (its block of ``x``);
        every rank calls it together (the exchange is collective)."""
        pending = self.exchange.start(x_own)
        self.blocks.diag(x_own, y_own)
        pending.wait()
        if self.blocks.has_offd:
            self.blocks.offd_add(self.exchange.operand, y_own)
        return y_own

    def new_output(self) -> Any:
        xp = self.exchange.transport.xp
        width = self.exchange.width
        shape = (self.shard.local_rows,) if width is None else (self.shard.local_rows, width)
        return xp.empty(shape, dtype=self.exchange.operand.dtype)


def host_product(shard: ShardExtent, exchange: Exchange, offd: Any) -> DistributedProduct:
    """The protocol on the host with SciPy's products (the MPI tests' rank program)."""
    return DistributedProduct(shard, exchange, ScipyBlocks(shard, offd))


__all__ = ["Blocks", "DistributedProduct", "ScipyBlocks", "host_product"]
