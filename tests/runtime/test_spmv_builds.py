"""Merge-path SpMV launches are built for their chunk (schedules/merge_path.build_options): the
staged tile sized for the bound items a thread, and float32 tiles of 9 to 16 items with more
blocks a SM and 8 loads a step. The product and the partition kernel that fills its prepared
block rows get the same build. Without a GPU, a stand-in CuPy (conftest.RecordingCupy)
records the compile options."""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import numpy as np
import pytest

from teaal_loops.codegen.config import make_config
from teaal_loops.runtime import backend
from teaal_loops.runtime import kernel as kernel_module
from teaal_loops.schedules import bind, schedule_definition
from teaal_loops.schedules.merge_path import build_options, is_staged
from teaal_loops.types import MatrixShape
from tests.codegen import hand_schedules as hs
from tests.runtime.conftest import RecordingCupy

SHAPE = MatrixShape(rows=1000, cols=1000, nnz=20000)


def _bound(items: int, *, threads: int = 128, bits: int = 32, spmm: bool = False) -> Any:
    schedule = dataclasses.replace(hs.merge_path(), block_threads=threads)
    bound = bind(schedule, SHAPE, None, {"ITEMS_PER_THREAD": items})
    if bits == 64:
        bound = dataclasses.replace(bound, index_bits=64)
    if spmm:
        form = dataclasses.replace(bound.schedule.form, kind="spmm")
        bound = dataclasses.replace(bound, schedule=dataclasses.replace(bound.schedule, form=form))
    return bound


@pytest.mark.parametrize(("items", "value_bytes", "expected"), [
    (1, 4, ("-DTEAAL_TILE_ITEMS=1",)),
    (4, 4, ("-DTEAAL_TILE_ITEMS=4",)),
    (8, 4, ("-DTEAAL_TILE_ITEMS=8",)),
    (9, 4, ("-DTEAAL_TILE_ITEMS=9", "-DTEAAL_MIN_BLOCKS=12", "-DTEAAL_STAGE_UNROLL_MAX=8")),
    (16, 4, ("-DTEAAL_TILE_ITEMS=16", "-DTEAAL_MIN_BLOCKS=12", "-DTEAAL_STAGE_UNROLL_MAX=8")),
    (17, 4, ("-DTEAAL_TILE_ITEMS=17",)),
    (32, 4, ("-DTEAAL_TILE_ITEMS=32",)),
    (33, 4, ()),  # past the default tile: the direct walk, built as before
    (8, 8, ("-DTEAAL_TILE_ITEMS=8",)),
    (16, 8, ("-DTEAAL_TILE_ITEMS=16",)),  # float64 keeps the registers of 8 blocks a SM
    (17, 8, ()),
])
def test_a_staged_launch_is_built_for_its_chunk(
    items: int, value_bytes: int, expected: tuple[str, ...]
) -> None:
    bound = _bound(items)
    assert build_options(bound, value_bytes) == expected
    assert bool(expected) == is_staged(bound, value_bytes)
    assert schedule_definition("merge_path").build_options(bound, value_bytes) == expected


def test_more_blocks_follow_the_block_size_and_the_slot() -> None:
    # 256-thread blocks: 1536 threads are 6 blocks; 64-bit offsets make a float32 slot 8
    # bytes, which keeps the default registers
    assert build_options(_bound(16, threads=256), 4) == (
        "-DTEAAL_TILE_ITEMS=16", "-DTEAAL_MIN_BLOCKS=6", "-DTEAAL_STAGE_UNROLL_MAX=8")
    assert build_options(_bound(16, bits=64), 4) == ("-DTEAAL_TILE_ITEMS=16",)


def test_spmm_and_other_schedules_have_no_build_options() -> None:
    assert build_options(_bound(8, spmm=True), 4) == ()
    group = bind(hs.group_mapped(), SHAPE, None, {})
    assert schedule_definition(group.kind).build_options(group, 4) == ()


def test_the_product_is_built_with_the_prepared_options(fake: RecordingCupy) -> None:
    from teaal_loops import pipeline

    kernel = pipeline.compile(hs.merge_path(8))
    options = ("-DTEAAL_TILE_ITEMS=8",)
    prepared = types.SimpleNamespace(source=kernel.source, options=options,
                                     config=kernel._nominal, _functions={})
    kernel.function(prepared)
    kernel.function(prepared, trace=True)
    assert fake.compiled == [backend.COMPILE_OPTIONS + options,
                             backend.COMPILE_OPTIONS + (backend.TRACE_OPTION,) + options]


def test_the_partition_is_built_with_the_products_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[tuple[str, tuple[str, ...]]] = []

    def get_function(source: str, name: str, *, trace: bool = False,
                     options: tuple[str, ...] = ()) -> Any:
        asked.append((name, options))
        return lambda grid, block, args: None

    monkeypatch.setattr(backend, "get_function", get_function)
    monkeypatch.setattr(backend, "cupy_module", lambda: types.SimpleNamespace(
        empty=lambda n, dtype: np.empty(n, dtype)))
    monkeypatch.setattr(kernel_module, "leading_arguments", lambda *a: ())
    bound = _bound(8)
    cfg = make_config(bound.schedule, dtype="float32", bound=bound)
    options = build_options(bound, 4)
    computed = kernel_module.prepared_arrays(cfg, bound, None, "source", None, options)
    assert list(computed) == ["block_rows"]
    assert asked == [("teaal_merge_partition", options)]
