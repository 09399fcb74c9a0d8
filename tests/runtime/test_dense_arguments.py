"""The launch arguments of SpMM and SDDMM kernels line up with the rendered signature
(checked on the CPU with NumPy arrays standing in for device arrays)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from teaal_loops import pipeline
from teaal_loops.codegen.config import make_config
from teaal_loops.errors import MatrixError
from teaal_loops.lowering import lower
from teaal_loops.runtime.device_matrix import DeviceMatrix
from teaal_loops.runtime.kernel import leading_arguments
from teaal_loops.runtime.operands import (
    DenseCall,
    device_dense,
    element_strides,
    trailing_arguments,
)
from teaal_loops.schedules import bind
from teaal_loops.spec import load_spec_string
from teaal_loops.types import MatrixShape
from tests.lowering import epilogue_specs

REPO = Path(__file__).resolve().parents[2]
SPECS = [REPO / "specs/spmm/lanes_over_n.yaml", REPO / "specs/spmm/group_lanes_over_k.yaml",
         REPO / "specs/sddmm/thread_per_nonzero.yaml"]


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_arguments_match_the_signature(spec: Path) -> None:
    kernel = pipeline.compile(spec)
    shape = MatrixShape(rows=4, cols=5, nnz=3)
    matrix = DeviceMatrix(
        "csr", shape,
        {"indptr": np.zeros(5, np.int32), "indices": np.zeros(3, np.int32),
         "values": np.zeros(3, np.float32)},
        np.dtype("float32"), 32,
    )
    bound = bind(kernel.schedule, shape, dense_size=6)
    cfg = make_config(kernel.schedule, bound=bound)
    if kernel.form == "spmm":
        call = DenseCall((np.zeros((5, 6), np.float32),), 6)
        out = np.zeros((4, 6), np.float32)
    else:
        call = DenseCall((np.zeros((4, 6), np.float32), np.zeros((6, 5), np.float32)), 6)
        out = np.zeros(3, np.float32)
    args = leading_arguments(cfg, bound, matrix) + trailing_arguments(
        kernel.schedule, call, out, np.zeros(1, np.int32), bound.dense_space,
        bound.dense_time, np.int32,
    )
    params = cfg.kernel_params()
    assert len(args) == len(params)
    for p, value in zip(params, args, strict=True):
        assert isinstance(value, np.ndarray) == p.is_pointer, p.name


def test_strides_are_counted_in_elements() -> None:
    a = np.zeros((3, 4), np.float64)
    assert element_strides(a) == (4, 1)
    assert element_strides(np.asfortranarray(a)) == (1, 3)
    assert element_strides(a.T) == (1, 4)


def test_dense_operands_are_checked_before_any_launch() -> None:
    class FakeCupy:  # device_dense only needs ndarray, asarray, ascontiguousarray
        ndarray = np.ndarray
        asarray = staticmethod(np.asarray)
        ascontiguousarray = staticmethod(np.ascontiguousarray)

    f32 = np.dtype("float32")
    with pytest.raises(MatrixError, match=r"operand B has shape \(4, 2\); expected \(5, any\)"):
        device_dense(FakeCupy, np.zeros((4, 2)), f32, (5, None), "B")
    with pytest.raises(MatrixError, match="operand B holds complex"):
        device_dense(FakeCupy, np.zeros((5, 2), complex), f32, (5, None), "B")
    with pytest.raises(MatrixError, match="operand B has shape"):
        device_dense(FakeCupy, np.zeros(5), f32, (5, None), "B")
    ok = device_dense(FakeCupy, np.zeros((5, 2), np.int64), f32, (5, None), "B")
    assert ok.dtype == f32 and ok.shape == (5, 2)


def test_an_output_or_upload_that_cannot_fit_is_refused_naming_it() -> None:
    from teaal_loops.errors import DeviceError
    from teaal_loops.runtime.operands import ensure_fits

    class Runtime:
        @staticmethod
        def memGetInfo() -> tuple[int, int]:
            return (1 << 20, 1 << 30)

    class Pool:
        @staticmethod
        def free_bytes() -> int:
            return 0

    class Cuda:
        runtime = Runtime

    class SmallGpu:
        cuda = Cuda

        @staticmethod
        def get_default_memory_pool() -> Pool:
            return Pool()

    ensure_fits(SmallGpu, 1 << 19, "operand B")  # fits
    with pytest.raises(DeviceError, match="operand B needs"):
        ensure_fits(SmallGpu, 1 << 21, "operand B")


def test_bind_dense_is_refused_for_spmv_and_epilogue_kernels_before_any_device_work() -> None:
    spmv = pipeline.compile(REPO / "specs/merge_path.yaml")
    with pytest.raises(MatrixError, match="is SpMV"):
        spmv.bind_dense(None, (np.zeros(3),))
    schedule = lower(load_spec_string(epilogue_specs.SPECS["spmm_thread"], source="e.yaml"),
                     params=epilogue_specs.PARAMS["spmm_thread"])
    with_epilogue = pipeline.compile(schedule, params=epilogue_specs.PARAMS["spmm_thread"])
    with pytest.raises(MatrixError, match="has an epilogue"):
        with_epilogue.bind_dense(None, (np.zeros((3, 2)),))


def _strided(rows: int, row_bytes: int) -> np.ndarray:
    """A float32 view of ``rows`` x 3 whose rows lie ``row_bytes`` apart, over a buffer of 3
    values: its strides may be checked, and rows past the first never read."""
    return np.lib.stride_tricks.as_strided(np.arange(3, dtype=np.float32), shape=(rows, 3),
                                           strides=(row_bytes, 4))


def test_rows_of_b_too_far_apart_for_32_bit_strides_are_read_from_a_fortran_copy() -> None:
    from teaal_loops.runtime.operands import MAX_ROW_STRIDE_BYTES, dense_inputs, rows_within_reach

    copied: list[tuple[int, ...]] = []

    def fortran_copy(a: np.ndarray) -> np.ndarray:  # records the copy, reads nothing
        copied.append(a.strides)
        return np.zeros(a.shape, a.dtype, order="F")

    class FakeCupy:
        ndarray = np.ndarray
        asarray = staticmethod(np.asarray)
        ascontiguousarray = staticmethod(np.ascontiguousarray)
        asfortranarray = staticmethod(fortran_copy)

    near, far = _strided(2, MAX_ROW_STRIDE_BYTES - 3), _strided(2, 1 << 32)
    assert rows_within_reach(near) and not rows_within_reach(far)
    assert not rows_within_reach(_strided(2, -(1 << 32)))
    assert rows_within_reach(_strided(1, 1 << 32))  # one row: its stride is never used
    schedule = pipeline.compile(REPO / "specs/spmm/lanes_over_n.yaml").schedule
    f32 = np.dtype("float32")
    # B: read from a Fortran-ordered copy, its rows then 4 bytes apart
    call = dense_inputs(FakeCupy, schedule, 4, 2, f32, (far,))
    assert copied == [far.strides] and call.arrays[0].strides[0] == 4 and call.size == 3
    # B within reach: used as it is
    assert dense_inputs(FakeCupy, schedule, 4, 2, f32, (near,)).arrays[0] is near
    assert len(copied) == 1
