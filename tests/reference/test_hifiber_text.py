"""The generated HiFiber text: TeAAL's constructs for each mapping, deterministic, and clear
refusals for what the reference does not support."""

from __future__ import annotations

import pytest

from teaal_loops.errors import ParameterError, UnsupportedMappingError
from teaal_loops.reference import hifiber_source
from teaal_loops.spec import load_spec, load_spec_string
from tests.conftest import REPO

SPMV_HEAD = """
einsum:
  declaration: {A: [M, K], B: [K], Z: [M]}
  expressions: ["Z[m] = A[m, k] * B[k]"]
"""


def text_of(name: str, **params: int) -> str:
    return hifiber_source(load_spec(REPO / "specs" / f"{name}.yaml"), params=params)


def test_thread_mapped_splits_statically_and_merges_back() -> None:
    text = text_of("thread_mapped", NUM_TILES=8, NUM_THREADS=4)
    assert "NUM_TILES = 8\nNUM_THREADS = 4\n" in text
    assert "A_MK.splitUniform(NUM_TILES, depth=0).splitUniform(NUM_THREADS, depth=1)" in text
    assert "for m0, (z_ref, a_k) in z_m0 << a_m0:" in text
    assert "enumerate(a_k & b_k)" in text
    assert "z_ref += a_val * b_val" in text
    assert 'mergeRanks(depth=0, levels=2, coord_style="absolute")' in text
    compile(text, "<hifiber>", "exec")


def test_group_mapped_splits_by_occupancy_inside_the_loop_nest() -> None:
    text = text_of("group_mapped", NUM_TILES=8, GRID_SIZE=4, BLOCK_SIZE=32)
    assert 'A_K_fiber = Tensor.fromFiber(rank_ids=["K"], fiber=a_k, name="A")' in text
    assert "A_K1K0 = A_K_fiber.splitEqual(BLOCK_SIZE)" in text
    assert "B_K1K0 = B_K_fiber.splitNonUniform(a_k1)" in text
    # the splits happen under the M0 loop, before the K1 loop
    assert (
        text.index("for m0,") < text.index("splitEqual") < text.index("in enumerate(a_k1 & b_k1)")
    )


def test_work_oriented_flattens_and_looks_up_the_other_tensors() -> None:
    text = text_of("work_oriented", WORK_PER_THREAD=4)
    assert 'A_MK.flattenRanks(depth=0, levels=1, coord_style="tuple")' in text
    assert "splitEqual(WORK_PER_THREAD)" in text
    assert "((m, k), a_val) in enumerate(a_mk0)" in text
    assert "z_ref = z_m.getPayloadRef(m)" in text
    assert "b_val = b_k.getPayload(k)" in text


def test_merge_path_splits_at_the_merge_path_shares() -> None:
    text = text_of("merge_path", ITEMS_PER_THREAD=5)
    assert "def merge_path_shares(fiber, rows, items_per_share):" in text
    assert "merge_path_shares(a_mk, SHAPE_M, ITEMS_PER_THREAD)" in text
    assert "splitUnEqual(mp_sizes)" in text
    assert "mk1_pos = mp_share_ids[mk1_index]" in text


def test_loop_order_before_rank_order_swizzles_first() -> None:
    spec = load_spec_string(
        SPMV_HEAD
        + """
mapping:
  partitioning: {Z: {M: [uniform_shape(4)]}}
  loop-order: {Z: [K, M1, M0]}
"""
    )
    text = hifiber_source(spec)
    # swizzling before splitting keeps fibertree away from split ranks it cannot swizzle
    assert text.index('A_KM = A_MK.swizzleRanks(rank_ids=["K", "M"])') < text.index(
        "splitUniform(4, depth=1)"
    )
    assert "for k_pos, (k, (a_m1, b_val)) in enumerate(a_k & b_k):" in text


def test_nway_shape_becomes_a_step_of_the_rank_shape() -> None:
    spec = load_spec_string(
        SPMV_HEAD
        + """
mapping:
  partitioning: {Z: {M: [nway_shape(3)]}}
"""
    )
    text = hifiber_source(spec)
    assert "STEP_M1 = (SHAPE_M - 1) // 3 + 1" in text
    assert "splitUniform(STEP_M1, depth=0)" in text


def test_text_is_deterministic() -> None:
    spec = load_spec(REPO / "specs" / "group_mapped.yaml")
    params = {"NUM_TILES": 8, "GRID_SIZE": 4, "BLOCK_SIZE": 32}
    assert hifiber_source(spec, params=params) == hifiber_source(spec, params=params)


def test_missing_parameter_is_named() -> None:
    spec = load_spec(REPO / "specs" / "thread_mapped.yaml")
    with pytest.raises(ParameterError, match="NUM_TILES"):
        hifiber_source(spec, params={"NUM_THREADS": 4})
    with pytest.raises(ParameterError, match="positive"):
        hifiber_source(spec, params={"NUM_THREADS": 0, "NUM_TILES": 4})


@pytest.mark.parametrize(
    "mapping, einsum, match",
    [
        ("", "Z[m] = A[m+k, k] * B[k]", "index arithmetic"),
        ("partitioning: {Z: {K: [follow(M)], M: [uniform_shape(2)]}}", None, "follow"),
        (
            "partitioning: {Z: {K: [uniform_occupancy(A.2), uniform_occupancy(A.1)]}}",
            None,
            "several levels",
        ),
        ("partitioning: {Z: {M: [uniform_shape(4), nway_shape(2)]}}", None, "nway_shape below"),
        (
            "partitioning:\n    Z:\n      (M, K): [flatten()]\n      MK: [x_merge_path(B.4)]",
            None,
            "does not hold all of M, K",
        ),
        (
            "partitioning: {Z: {M: [uniform_shape(4)]}}\n  loop-order: {Z: [M0, M1, K]}",
            None,
            "top-down",
        ),
    ],
)
def test_unsupported_mappings_are_refused_with_the_reason(mapping, einsum, match) -> None:
    head = SPMV_HEAD if einsum is None else SPMV_HEAD.replace("Z[m] = A[m, k] * B[k]", einsum)
    spec = load_spec_string(head + (f"mapping:\n  {mapping}\n" if mapping else ""))
    with pytest.raises(UnsupportedMappingError, match=match) as info:
        hifiber_source(spec, params={})
    assert "HiFiber reference" in info.value.cli_line()


def test_sum_inside_a_product_is_refused() -> None:
    spec = load_spec_string(
        """
einsum:
  declaration: {A: [M], B: [M], C: [M], D: [M], Z: [M]}
  expressions: ["Z[m] = A[m] * B[m] + C[m] * D[m]"]
"""
    )
    with pytest.raises(UnsupportedMappingError, match="sum of products"):
        hifiber_source(spec)
