"""Lowering: every SpMV spec reaches the schedule its mapping describes; the rest is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from teaal_loops.errors import ParameterError, UnsupportedMappingError
from teaal_loops.ir.model import GpuLevel
from teaal_loops.lowering import lower
from teaal_loops.schedules import bind, schedule_kinds
from teaal_loops.spec import load_spec, load_spec_string
from teaal_loops.types import MatrixShape
from tests.conftest import REPO, require_corpus

OUR_SPECS = {
    "thread_mapped.yaml": "thread_mapped",
    "group_mapped.yaml": "group_mapped",
    "group_mapped_block.yaml": "group_mapped",
    "work_oriented.yaml": "work_oriented",
    "merge_path.yaml": "merge_path",
}


@pytest.mark.parametrize("name,kind", sorted(OUR_SPECS.items()))
def test_our_specs_lower_to_their_schedule(name: str, kind: str) -> None:
    schedule = lower(load_spec(REPO / "specs" / name))
    assert schedule.kind == kind
    assert schedule.layout == "csr"
    assert (schedule.matrix, schedule.vector, schedule.output) == ("A", "B", "Z")


def _corpus_spmv_specs() -> list[Path]:
    folder = require_corpus("teaal-specs", "loops")
    return sorted(p for p in folder.glob("*.yaml") if "spmv_" in p.name)


def test_every_corpus_spmv_spec_lowers_to_the_schedule_its_name_says() -> None:
    specs = _corpus_spmv_specs()
    assert len(specs) == 11  # 4 HEAD, 4 ver1__, 3 ver2__ variants
    for path in specs:
        expected = next(k for k in schedule_kinds() if k in path.name)
        assert lower(load_spec(path)).kind == expected, path.name


def test_group_mapped_binds_m0_to_the_group_and_k0_to_the_lane() -> None:
    spec = load_spec(REPO / "specs" / "group_mapped.yaml")
    s = lower(spec)
    levels = {r.name: r.level for r in s.ranks}
    assert levels == {
        "M2": GpuLevel.LOOP,
        "M1": GpuLevel.LOOP,
        "M0": GpuLevel.WORKER,
        "K1": GpuLevel.LOOP,
        "K0": GpuLevel.LANE,
    }
    assert [r.name for r in s.ranks] == ["M2", "M1", "M0", "K1", "K0"]  # loop order


def test_params_bind_and_defaults_resolve_from_the_matrix() -> None:
    spec = load_spec(REPO / "specs" / "thread_mapped.yaml")
    s = lower(spec, params={"NUM_THREADS": 256, "NUM_TILES": 1024})
    b = bind(s, MatrixShape(rows=10_000, cols=10_000, nnz=50_000))
    assert b.workers == 256 and b.launch.total_threads == 256
    default = bind(lower(spec), MatrixShape(rows=10_000, cols=10_000, nnz=50_000))
    assert default.workers == 10_000  # one row per thread


def test_unknown_param_is_named() -> None:
    spec = load_spec(REPO / "specs" / "work_oriented.yaml")
    with pytest.raises(ParameterError, match="NUM_THREADZ"):
        lower(spec, params={"NUM_THREADZ": 4})


def test_group_size_must_be_a_power_of_two() -> None:
    spec = load_spec(REPO / "specs" / "group_mapped.yaml")
    with pytest.raises(ParameterError, match="power of two"):
        bind(lower(spec, params={"BLOCK_SIZE": 24}), MatrixShape(10, 10, 10))


def test_extension_defaults_apply_and_can_be_overridden() -> None:
    spec = load_spec(REPO / "specs" / "group_mapped_block.yaml")
    assert bind(lower(spec), MatrixShape(100, 100, 1000)).group_size == 256
    assert bind(lower(spec, params={"GROUP": 64}), MatrixShape(100, 100, 1000)).group_size == 64


SPMV_HEAD = """
einsum:
  declaration: {A: [M, K], B: [K], Z: [M]}
  expressions: ["Z[m] = A[m, k] * B[k]"]
mapping:
  partitioning:
    Z:
%s
  spacetime:
    Z:
      space: [%s]
      time: [%s]
"""


@pytest.mark.parametrize(
    "partitioning,space,time,rank",
    [
        ("      M: [uniform_shape(T)]", "M0, K", "M1", "K"),
        ("      K: [uniform_occupancy(A.G)]", "K1", "M, K0", "K0"),
        ("      K: [uniform_occupancy(B.G)]", "M, K0", "K1", "K"),
        ("      (M, K): [flatten()]\n      MK: [uniform_occupancy(A.W)]", "MK0", "MK1", "MK"),
        ("      K: [uniform_shape(4)]", "M, K0", "K1", "K"),
    ],
)
def test_unsupported_mappings_name_the_rank_and_list_what_is_supported(
    partitioning: str, space: str, time: str, rank: str
) -> None:
    spec = load_spec_string(SPMV_HEAD % (partitioning, space, time))
    with pytest.raises(UnsupportedMappingError) as err:
        lower(spec)
    text = err.value.cli_line()
    assert rank in text
    assert "supported mappings" in text


def test_an_einsum_outside_the_family_is_refused_naming_it_and_the_forms() -> None:
    """SpGEMM's 3-D intermediate is outside the one-sparse-operand family."""
    spec = load_spec_string(
        """
einsum:
  declaration: {A: [M, K], B: [K, N], T: [K, M, N], Z: [M, N]}
  expressions: ["T[k, m, n] = A[m, k] * B[k, n]", "Z[m, n] = T[k, m, n]"]
"""
    )
    with pytest.raises(UnsupportedMappingError, match=r"T\[k, m, n\]") as err:
        lower(spec)
    assert "SpMM" in str(err.value) and "SDDMM" in str(err.value)


def test_two_sparse_operands_are_refused() -> None:
    spec = load_spec_string(
        """
einsum:
  declaration: {A: [M, K], B: [K, N], Z: [M, N]}
  expressions: ["Z[m, n] = A[m, k] * B[k, n]"]
format:
  A: {CSR: {rank-order: [M, K], M: {format: U}, K: {format: C}}}
  B: {CSR: {rank-order: [K, N], K: {format: U}, N: {format: C}}}
"""
    )
    with pytest.raises(UnsupportedMappingError, match="two sparse operands"):
        lower(spec)


def test_factor_order_and_rank_names_do_not_matter() -> None:
    spec = load_spec_string(
        """
einsum:
  declaration: {X: [J], G: [I, J], Y: [I]}
  expressions: ["Y[i] = X[j] * G[i, j]"]
mapping:
  partitioning:
    Y:
      I: [uniform_shape(W)]
  spacetime:
    Y:
      space: [I0]
      time: [I1, J]
"""
    )
    s = lower(spec)
    assert s.kind == "thread_mapped"
    assert (s.matrix, s.vector, s.tile_rank, s.atom_rank) == ("G", "X", "I", "J")


def test_spec_without_spacetime_runs_on_one_worker() -> None:
    spec = load_spec_string(
        """
einsum:
  declaration: {A: [K], B: [M, K], Z: [M]}
  expressions: ["Z[m] = A[k] * B[m, k]"]
"""
    )
    b = bind(lower(spec), MatrixShape(rows=50, cols=20, nnz=100))
    assert b.workers == 1


CSC_SPEC = """
einsum:
  declaration: {A: [M, K], B: [K], Z: [M]}
  expressions: ["Z[m] = A[m, k] * B[k]"]
mapping:
  rank-order:
    A: [K, M]
  partitioning:
    Z:
      K: [uniform_shape(COLS_PER_THREAD)]
  spacetime:
    Z:
      space: [K1]
      time: [K0, M]
"""


def test_rank_order_k_m_selects_csc_whose_tiles_scatter_atomically() -> None:
    import numpy as np
    import scipy.sparse as sp

    from teaal_loops.ir.model import Combine
    from teaal_loops.lowering import simulate

    s = lower(load_spec_string(CSC_SPEC), params={"COLS_PER_THREAD": 2})
    assert (s.layout, s.tile_rank, s.atom_rank) == ("csc", "K", "M")
    assert s.combine == Combine.ATOMIC
    A = sp.random(7, 9, density=0.4, random_state=3, format="csr")
    x = np.random.default_rng(2).uniform(-1, 1, 9)
    res = simulate(bind(s, MatrixShape(7, 9, A.nnz)), A, x)
    np.testing.assert_allclose(res.y, A @ x)
    cols_of_atoms = np.repeat(np.arange(9), np.diff(A.tocsc().indptr))
    assert np.array_equal(res.owner, cols_of_atoms // 2)  # two columns per thread
    assert res.stats.atomics == A.nnz


def test_format_section_picks_the_layout_and_bad_formats_are_named() -> None:
    from teaal_loops.errors import LayoutError

    fmt = """
format:
  A:
    %s:
      rank-order: [%s]
      M: {format: %s}
      K: {format: C}
"""
    base = SPMV_HEAD % ("      M: [uniform_shape(T)]", "M0", "M1, K")
    assert lower(load_spec_string(base + fmt % ("default", "M, K", "U"))).layout == "csr"
    assert lower(load_spec_string(base + fmt % ("default", "M, K", "C"))).layout == "coo"
    assert lower(load_spec_string(base + fmt % ("ELL", "M, K", "U"))).layout == "ell"
    with pytest.raises(LayoutError, match="maps to no layout; supported formats"):
        lower(load_spec_string(base.replace("{format: C}", "{format: U}") + fmt.replace(
            "K: {format: C}", "K: {format: U}") % ("default", "M, K", "U")))
    group = load_spec(REPO / "specs" / "group_mapped.yaml")
    with pytest.raises(LayoutError, match="layout ell .* supports .*; the spec's mapping is "
                       "group_mapped"):
        lower(group, layout="ell")
    with pytest.raises(LayoutError, match="unknown layout"):
        lower(load_spec_string(base), layout="hyb")


def test_flatten_listed_after_its_split_still_lowers() -> None:
    spec = load_spec_string(
        SPMV_HEAD % ("      MK: [uniform_occupancy(A.W)]\n      (M, K): [flatten()]", "MK1", "MK0")
    )
    assert lower(spec).kind == "work_oriented"


def test_launches_beyond_32_bit_thread_ids_are_refused_naming_the_sizes() -> None:
    group = lower(load_spec(REPO / "specs" / "group_mapped.yaml"), params={"BLOCK_SIZE": 32})
    with pytest.raises(ParameterError, match=r"more than a 32-bit thread id .*BLOCK_SIZE"):
        bind(group, MatrixShape(rows=2**27, cols=2**27, nnz=2**28))
    work = lower(load_spec(REPO / "specs" / "work_oriented.yaml"), params={"WORK_PER_THREAD": 1})
    with pytest.raises(ParameterError, match="WORK_PER_THREAD"):
        bind(work, MatrixShape(rows=10, cols=10, nnz=2**31 + 5))
    assert bind(work, MatrixShape(rows=10, cols=10, nnz=2**31 - 1)).workers == 2**31 - 1


def test_a_transposed_declaration_lowers_to_the_transposed_product() -> None:
    """`A: [K, M]` with `Z[m] = A[k, m] * B[k]` is Z = A^T B: stored [K, M], A's rows are the
    contracted rank, so the layout is CSC of A^T (A's own CSR arrays) and atoms scatter."""
    text = """\
einsum:
  declaration:
    A: [K, M]
    B: [K]
    Z: [M]
  expressions:
    - Z[m] = A[k, m] * B[k]
"""
    schedule = lower(load_spec_string(text, source="t.yaml"))
    assert schedule.form.transposed and schedule.form.kind == "spmv"
    assert schedule.layout == "csc" and schedule.combine.value == "atomic"
    assert (schedule.tile_rank, schedule.atom_rank) == ("K", "M")


def test_a_group_mapped_loop_order_with_k1_outside_a_tile_level_is_refused() -> None:
    """The kernel splits each tile's atoms; with K1 above M1 TeAAL splits differently (the
    owners of 6 of 25 nonzeros differed on a 3x12 matrix), so the mapping is refused."""
    text = (REPO / "specs" / "group_mapped.yaml").read_text()
    bad = text.replace("Z: [M2, M1, M0, K1, K0]", "Z: [K1, M2, M1, M0, K0]")
    assert bad != text
    with pytest.raises(UnsupportedMappingError) as info:
        lower(load_spec_string(bad, source="g.yaml"))
    message = info.value.cli_line()
    assert "K1 comes before a tile rank" in message
    line = next(i for i, t in enumerate(bad.splitlines(), 1) if "[K1, M2, M1, M0, K0]" in t)
    assert message.startswith(f"g.yaml:{line}:")


def test_an_unknown_schedule_name_is_refused_at_its_value() -> None:
    text = (REPO / "specs" / "work_oriented.yaml").read_text() + (
        "x-teaal-loops:\n  schedule: fastest\n"
    )
    with pytest.raises(UnsupportedMappingError) as info:
        lower(load_spec_string(text, source="w.yaml"))
    message = info.value.cli_line()
    assert message.startswith(f"w.yaml:{len(text.splitlines())}:13: ")
    assert "unknown schedule 'fastest'" in message and "merge_path" in message
