"""Prepared matrices remembered per user matrix, so that ``kernel(A, x)`` in a loop is as cheap
as ``kernel(prepared, x)``.

A kernel keeps a few entries (:data:`DEFAULT_CAPACITY`, least recently used evicted first), each
keyed by the user's matrix object and held through a **weak reference**: the entry (and the
device memory of its prepared matrix) goes when the matrix is garbage-collected, and the cache
never keeps a matrix alive. Objects that take no weak reference (a list of lists, say) are not
cached: every call prepares them again.

On every call the entry's **fingerprint** is checked against the matrix as it is now:

* the matrix's type and shape;
* the identity of the arrays that hold its content (``indptr``, ``indices``, ``data`` for
  CSR, CSC and BSR; ``row``, ``col``, ``data`` for COO; ``offsets``, ``data`` for DIA; the array
  itself for a dense NumPy or CuPy matrix), each held by weak reference, so that an array freed
  and replaced by a new one at the same address or ``id`` is not mistaken for it;
* each such array's shape, strides, dtype and, for CuPy arrays, device pointer (CuPy's own
  ``ndarray`` can change neither its pointer nor its dtype, so for it the identity check
  covers both and the lookup reads only its shape and strides).

So assigning new arrays (``A.data = A.data * 2``, ``A.indices = ...``), reshaping one, or
anything scipy or cupyx does by building new arrays (``eliminate_zeros``, ``sum_duplicates``,
``astype``) prepares the matrix again on the next call. What is **not** detected is writing into
the existing arrays in place (``A.data *= 2``, ``A.data[3] = 0``, ``A.indices[...] = ...``):

* values edited in place are seen by the kernel when the prepared matrix *aliases* the user's
  arrays (a cupyx CSR matrix whose values already have the kernel's dtype, int32 column indices
  and offsets of the kernel's width, on a layout whose kernel arguments are CSR's: no
  conversion, no copy; ``prepared.aliases_input`` says so); otherwise the kernel keeps using
  the copy it made;
* the structure (``indptr``, ``indices``) must not be edited in place: the launch sizes were
  computed from it.

After such an edit call ``kernel.forget(A)`` (or ``kernel.prepare(A)``, which always prepares
anew and refreshes the entry). Kinds of matrices that hold their content in Python containers
(scipy's LIL and DOK) are never cached.
"""

from __future__ import annotations

import contextlib
import operator
import sys
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

DEFAULT_CAPACITY = 4

# The arrays that hold a sparse matrix's content, by the attributes its kind has (CSR, CSC and
# BSR; COO; DIA), in this order; SciPy's LIL and DOK have none of these sets.
SPARSE_ARRAYS: tuple[tuple[str, ...], ...] = (
    ("indptr", "indices", "data"),
    ("row", "col", "data"),
    ("offsets", "data"),
)
_DENSE = ("",)  # marker: the object is itself the (dense) array
_UNKNOWN = object()
# type -> the attribute names of its content arrays, _DENSE, or None (not cacheable)
_NAMES: dict[type, Any] = {}

V = TypeVar("V")


def _classify(A: Any) -> tuple[str, ...] | None:
    if isinstance(getattr(A, "format", None), str):  # a SciPy or cupyx sparse matrix
        return next((names for names in SPARSE_ARRAYS if all(hasattr(A, n) for n in names)), None)
    if all(hasattr(A, a) for a in ("shape", "dtype", "strides")):
        return _DENSE
    return None


def _names(A: Any) -> Any:
    kind = type(A)
    names = _NAMES.get(kind, _UNKNOWN)
    if names is _UNKNOWN:
        names = _NAMES[kind] = _classify(A)
    return names


def content_arrays(A: Any) -> tuple[Any, ...] | None:
    """The arrays holding ``A``'s content (see the module docstring), or None when ``A`` is a
    kind of matrix the cache does not handle."""
    names = _names(A)
    if names is None:
        return None
    if names is _DENSE:
        return (A,)
    return tuple(getattr(A, n) for n in names)


def _on_device(array: Any) -> bool:
    """True for a CuPy array (its ``data`` has a device pointer that the fingerprint reads);
    a NumPy array's ``data`` is a memoryview (its buffer cannot move while the array lives,
    and reading its address costs a microsecond)."""
    return type(array.data) is not memoryview


def _fixed_pointer_and_dtype(array: Any) -> bool:
    """True for exactly CuPy's ``ndarray``, whose ``data`` and ``dtype`` are read-only (the
    same object keeps its device pointer and dtype for life). No import: an array of that
    type exists only once CuPy is loaded."""
    cupy = sys.modules.get("cupy")
    return cupy is not None and type(array) is getattr(cupy, "ndarray", None)


def _plain_fields(names: tuple[str, ...], arrays: tuple[Any, ...]) -> list[str]:
    """The attribute paths, from the matrix, of the fingerprint's plain values: its shape,
    and each content array's device pointer (device arrays only), shape, strides and dtype,
    less what a CuPy array cannot change (:func:`_fixed_pointer_and_dtype`: 0.13 us a CuPy
    array a lookup on an H100 machine)."""
    fields = ["shape"]
    for name, array in zip(names, arrays, strict=True):
        prefix = f"{name}." if name else ""
        fixed = _fixed_pointer_and_dtype(array)
        fields += [f"{prefix}data.ptr"] if _on_device(array) and not fixed else []
        fields += [f"{prefix}shape", f"{prefix}strides"]
        fields += [] if fixed else [f"{prefix}dtype"]
    return fields


class _Entry(Generic[V]):
    """One remembered matrix. The getters are built once, at store time, for the matrix's
    type and its arrays' kinds (the identity check keeps both fixed while the entry holds):
    a lookup is two C-level attribute sweeps and two comparisons."""

    __slots__ = ("ref", "kind", "arrays_of", "array_refs", "plain_of", "signature", "value")

    def __init__(self, A: Any, ref: weakref.ref[Any], names: tuple[str, ...],
                 arrays: tuple[Any, ...], value: V) -> None:
        self.ref = ref
        self.kind = type(A)
        self.arrays_of: Callable[[Any], tuple[Any, ...]] = (
            _itself if names is _DENSE else operator.attrgetter(*names))
        self.array_refs = tuple(weakref.ref(a) for a in arrays)  # TypeError: not cached
        getter = operator.attrgetter(*_plain_fields(names, arrays))
        self.plain_of: Callable[[Any], tuple[Any, ...]] = getter
        self.signature = getter(A)
        self.value = value

    def matches(self, A: Any) -> bool:
        """True when ``A`` (the entry's own matrix: the caller checked) still holds the very
        same arrays and its fingerprint's plain values are unchanged."""
        if type(A) is not self.kind:
            return False
        for ref, array in zip(self.array_refs, self.arrays_of(A), strict=True):
            if ref() is not array:
                return False
        return bool(self.plain_of(A) == self.signature)


def _itself(A: Any) -> tuple[Any, ...]:
    return (A,)


class MatrixCache(Generic[V]):
    """Values (prepared matrices, auto choices) per user matrix; see the module docstring.

    No lock: every mutation is one dictionary operation (atomic under the GIL), so threads
    racing on one kernel can at worst cause a spurious miss (the matrix prepared twice). The
    weak-reference callbacks, which may run in the middle of any other operation, never wait.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("a matrix cache holds at least one entry")
        self.capacity = capacity
        self._entries: OrderedDict[int, _Entry[V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, A: Any) -> V | None:
        """The value stored for ``A`` if ``A`` still matches its fingerprint, else None (a
        stale entry is dropped)."""
        key = id(A)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.ref() is A and entry.matches(A):
            if len(self._entries) > 1:
                try:  # not contextlib.suppress: a context manager costs a lookup 0.4 us
                    self._entries.move_to_end(key)
                except KeyError:  # dropped meanwhile by another thread
                    pass
            return entry.value
        self._drop(key, entry)
        return None

    def store(self, A: Any, value: V) -> bool:
        """Remember ``value`` for ``A``; False (nothing stored) where ``A`` cannot be cached."""
        names = _names(A)
        if names is None:
            return False
        arrays = (A,) if names is _DENSE else tuple(getattr(A, n) for n in names)
        key = id(A)
        try:
            entry = _Entry(A, weakref.ref(A, self._on_death(key)), names, arrays, value)
        except TypeError:  # takes no weak reference: never cached
            return False
        self._entries[key] = entry
        with contextlib.suppress(KeyError):
            self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            with contextlib.suppress(KeyError):
                self._entries.popitem(last=False)
        return True

    def forget(self, A: Any) -> bool:
        """Drop ``A``'s entry; True if there was one."""
        entry = self._entries.get(id(A))
        if entry is None or entry.ref() is not A:
            return False
        self._drop(id(A), entry)
        return True

    def clear(self) -> None:
        self._entries.clear()

    def values(self) -> list[V]:
        return [e.value for e in list(self._entries.values())]

    def _drop(self, key: int, entry: _Entry[V]) -> None:
        if self._entries.get(key) is entry:
            self._entries.pop(key, None)

    def _on_death(self, key: int) -> Callable[[weakref.ref[Any]], None]:
        """A weak-reference callback that removes the dead matrix's entry (and only it: the
        id may already belong to a new object with an entry of its own)."""
        cache_ref = weakref.ref(self)

        def remove(dead: weakref.ref[Any]) -> None:
            cache = cache_ref()
            if cache is not None:
                entry = cache._entries.get(key)
                if entry is not None and entry.ref is dead:
                    cache._entries.pop(key, None)

        return remove
