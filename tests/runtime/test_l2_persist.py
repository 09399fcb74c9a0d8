"""The L2 persistence window: the plan and the driver structs (CPU), the calls (GPU)."""

from __future__ import annotations

import ctypes

import pytest

from teaal_loops.runtime.backend import unavailable_reason
from teaal_loops.runtime.l2_persist import (
    CU_ACCESS_PROPERTY_PERSISTING,
    AccessPolicyWindow,
    StreamAttrValue,
    plan,
    window_value,
)


def test_structs_match_cuda_h() -> None:
    # void* + size_t + float + 2 enums, padded to 8: 32 bytes; the union is 64 (cuda.h's pad)
    assert ctypes.sizeof(AccessPolicyWindow) == 32
    assert ctypes.sizeof(StreamAttrValue) == 64
    v = window_value(4096, 1 << 20, 0.5)
    assert v.accessPolicyWindow.num_bytes == 1 << 20
    assert v.accessPolicyWindow.hitProp == CU_ACCESS_PROPERTY_PERSISTING


def test_plan_never_asks_more_than_the_device_allows() -> None:
    assert plan(4 << 20, 30 << 20, 128 << 20) == (4 << 20, 4 << 20, 1.0)
    set_aside, window, ratio = plan(200 << 20, 30 << 20, 128 << 20)
    assert (set_aside, window) == (30 << 20, 128 << 20) and ratio == pytest.approx(30 / 128)
    assert plan(0, 30 << 20, 128 << 20) == (0, 0, 0.0)


@pytest.mark.gpu
def test_window_applies_and_restores() -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"needs a CUDA GPU: {reason}")
    import cupy

    from teaal_loops.runtime.l2_persist import PersistingWindow

    x = cupy.ones(1 << 20, dtype=cupy.float32)
    with PersistingWindow(cupy, x) as window:
        assert window.window == min(x.nbytes, window.max_window) > 0
        y = x * 2  # work on the stream inside the window
    assert float(y.sum()) == 2 * x.size
