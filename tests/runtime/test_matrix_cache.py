"""The matrix cache on its own: what a fingerprint detects, what it cannot, and its bounds."""

from __future__ import annotations

import gc
import sys
import types
import weakref
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from teaal_loops.runtime.matrix_cache import MatrixCache, content_arrays


def _csr(seed: int = 0) -> sp.csr_matrix:
    return sp.random(20, 10, density=0.2, format="csr", random_state=seed)


class DeviceArray:
    """What the fingerprint reads of a CuPy array: a device pointer, shape, strides, dtype."""

    def __init__(self, ptr: int, n: int = 8) -> None:
        self.data = types.SimpleNamespace(ptr=ptr)
        self.shape = (n,)
        self.strides = (8,)
        self.dtype = np.dtype(np.float64)


class DeviceCsr:
    format = "csr"

    def __init__(self) -> None:
        self.shape = (4, 4)
        self.indptr, self.indices, self.data = DeviceArray(1, 5), DeviceArray(2), DeviceArray(3)


def test_hit_then_miss_when_an_array_is_replaced() -> None:
    cache: MatrixCache[str] = MatrixCache()
    A = _csr()
    assert cache.store(A, "prepared")
    assert cache.lookup(A) == "prepared"
    A.data = A.data.copy()
    assert cache.lookup(A) is None
    assert len(cache) == 0, "a stale entry must be dropped, not kept"


@pytest.mark.parametrize(
    "edit",
    [
        lambda A: setattr(A, "indices", A.indices.astype(np.int64)),  # dtype
        lambda A: A.resize((25, 10)),  # shape (scipy edits indptr)
        lambda A: setattr(A, "indptr", A.indptr.copy()),  # identity
    ],
)
def test_changes_the_fingerprint_sees(edit: Any) -> None:
    cache: MatrixCache[int] = MatrixCache()
    A = _csr()
    cache.store(A, 1)
    edit(A)
    assert cache.lookup(A) is None


def test_in_place_value_edits_are_not_seen() -> None:
    """Documented: writing into the same arrays keeps the entry (the kernel sees the edit only
    where the prepared matrix aliases those arrays)."""
    cache: MatrixCache[int] = MatrixCache()
    A = _csr()
    cache.store(A, 1)
    A.data *= 2
    A.data[0] = 5.0
    assert cache.lookup(A) == 1


def test_dense_arrays_are_their_own_content_and_reshaping_is_seen() -> None:
    cache: MatrixCache[int] = MatrixCache()
    dense = np.arange(12.0).reshape(3, 4)
    assert content_arrays(dense) == (dense,)
    cache.store(dense, 1)
    assert cache.lookup(dense) == 1
    dense.shape = (4, 3)
    assert cache.lookup(dense) is None


def test_a_moved_device_pointer_is_seen() -> None:
    cache: MatrixCache[int] = MatrixCache()
    A = DeviceCsr()
    cache.store(A, 1)
    assert cache.lookup(A) == 1
    A.data.data = types.SimpleNamespace(ptr=99)
    assert cache.lookup(A) is None


class CupyArray(DeviceArray):
    """Stands in for cupy.ndarray (a fake ``cupy`` module names it), counting reads of the
    two attributes that CuPy's arrays hold read-only."""

    reads = 0

    def __getattribute__(self, name: str) -> Any:
        if name in ("data", "dtype"):
            CupyArray.reads += 1
        return object.__getattribute__(self, name)


def test_cupy_arrays_are_checked_by_shape_and_strides_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy's ndarray cannot change its pointer or dtype (tests/gpu/test_api_gpu.py checks
    that they are read-only): the identity check covers them, and a lookup never reads them;
    a reshape is still seen."""
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(ndarray=CupyArray))
    cache: MatrixCache[int] = MatrixCache()
    A = DeviceCsr()
    A.indptr, A.indices, A.data = CupyArray(1, 5), CupyArray(2), CupyArray(3)
    cache.store(A, 1)
    CupyArray.reads = 0
    assert cache.lookup(A) == 1 and cache.lookup(A) == 1
    assert CupyArray.reads == 0
    A.data.shape = (2, 4)
    assert cache.lookup(A) is None


def test_unsupported_kinds_are_not_cached() -> None:
    cache: MatrixCache[int] = MatrixCache()
    for A in (sp.lil_matrix((3, 3)), sp.dok_matrix((3, 3)), [[1.0, 2.0]], (1, 2)):
        assert not cache.store(A, 1)
        assert cache.lookup(A) is None
    assert len(cache) == 0


def test_entries_die_with_their_matrix_and_keep_nothing_alive() -> None:
    cache: MatrixCache[Any] = MatrixCache()

    class Value:
        pass

    A, value = _csr(), Value()
    cache.store(A, value)
    alive = weakref.ref(A)
    held = weakref.ref(value)
    del A, value
    gc.collect()
    assert alive() is None, "the cache kept the matrix alive"
    assert held() is None and len(cache) == 0


def test_a_dead_matrix_callback_spares_a_new_entry_under_the_same_id() -> None:
    cache: MatrixCache[int] = MatrixCache()
    A = _csr()
    cache.store(A, 1)
    stale_callback = cache._on_death(id(A))

    class Dead:
        pass

    stale_callback(weakref.ref(Dead()))  # a different (already dead) reference: no effect
    assert cache.lookup(A) == 1
    stale_callback(cache._entries[id(A)].ref)
    assert len(cache) == 0


def test_least_recently_used_is_evicted() -> None:
    cache: MatrixCache[int] = MatrixCache(capacity=2)
    a, b, c = _csr(1), _csr(2), _csr(3)
    cache.store(a, 1)
    cache.store(b, 2)
    assert cache.lookup(a) == 1  # a is now the most recent
    cache.store(c, 3)
    assert cache.lookup(b) is None and cache.lookup(a) == 1 and cache.lookup(c) == 3
    assert cache.forget(a) and not cache.forget(a) and not cache.forget(b)
    with pytest.raises(ValueError):
        MatrixCache(capacity=0)


def test_a_changed_class_is_seen() -> None:
    class OtherCsr(sp.csr_matrix):
        pass

    cache: MatrixCache[int] = MatrixCache()
    A = _csr()
    cache.store(A, 1)
    A.__class__ = OtherCsr  # same object, same arrays: the fingerprint's type differs
    assert cache.lookup(A) is None


def test_device_strides_and_shapes_are_seen() -> None:
    cache: MatrixCache[int] = MatrixCache()
    A = DeviceCsr()
    cache.store(A, 1)
    A.indices.strides = (16,)
    assert cache.lookup(A) is None
    B = DeviceCsr()
    cache.store(B, 2)
    B.shape = (4, 5)
    assert cache.lookup(B) is None


class CountingArray(np.ndarray):
    """A NumPy array that counts reads of its buffer (``data``)."""

    reads = 0

    @property  # type: ignore[misc]
    def data(self) -> memoryview:
        CountingArray.reads += 1
        return memoryview(np.asarray(self))


def test_a_host_arrays_buffer_is_not_read_on_lookup() -> None:
    """Reading a NumPy array's ``data`` builds a memoryview (a microsecond a lookup); its
    buffer cannot move while the array lives, so only store looks at it, to learn its kind."""
    cache: MatrixCache[int] = MatrixCache()
    A = _csr()
    A.data = A.data.view(CountingArray)
    CountingArray.reads = 0
    cache.store(A, 1)
    stored = CountingArray.reads
    for _ in range(5):
        assert cache.lookup(A) == 1
    assert CountingArray.reads == stored == 1
