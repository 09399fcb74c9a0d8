"""Every spec of the shared corpus (TeAAL's own and the loops notebooks') through load_spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from teaal_loops.errors import SpecError
from teaal_loops.spec import load_spec, spec_to_json
from tests.conftest import CORPUS_SKIP_HINT, corpus_dir

SPECS = corpus_dir() / "teaal-specs"

# Specs the TeAAL compiler itself cannot load, with what our message must say.
BROKEN = {
    "cnn.yaml": "did you mean 'expressions:'",
    "example8.yaml": "did you mean 'expressions:'",
    "test_arch.yaml": "the spec has no einsum section",
    "test_bindings.yaml": "the spec has no einsum section",
}


def _corpus_files() -> list[Path]:
    return sorted(SPECS.glob("**/*.yaml")) if SPECS.is_dir() else []


def _need_corpus() -> None:
    if not SPECS.is_dir():
        pytest.skip(f"shared corpus not found at {SPECS} ({CORPUS_SKIP_HINT})")


def _spec(*parts: str) -> Path:
    _need_corpus()
    path = SPECS.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} missing from the corpus")
    return path


@pytest.mark.parametrize(
    "path", _corpus_files() or [None], ids=lambda p: p.name if p else "no-corpus"
)
def test_every_corpus_spec_loads_or_fails_as_teaal_does(path: Path | None) -> None:
    if path is None:
        _need_corpus()
        return
    if path.name in BROKEN:
        with pytest.raises(SpecError) as info:
            load_spec(path)
        err = info.value
        assert BROKEN[path.name] in err.message
        assert err.location is not None and err.location.file == str(path)
        assert err.cli_line().startswith(f"{path}:{err.location.line}:{err.location.column}: error: ")
        return
    spec = load_spec(path)
    assert spec.einsums
    for e in spec.einsums:
        final = spec.final_ranks[e.name]
        # The loop order (given or default) is always a permutation of the final ranks.
        assert sorted(spec.loop_order_of(e.name)) == sorted(final)
        st = spec.spacetime_of(e.name)
        if st is not None:
            assert {r.rank for r in (*st.space, *st.time)} <= set(final)
    spec_to_json(spec)  # must not raise on any real spec


def test_the_corpus_has_the_expected_size() -> None:
    _need_corpus()
    assert len(list((SPECS / "loops").glob("*.yaml"))) == 27
    assert len(list((SPECS / "teaal-compiler").glob("*.yaml"))) == 38


def test_spmv_group_mapped() -> None:
    s = load_spec(_spec("loops", "spmv_group_mapped__cell08_0.yaml"))
    assert s.final_ranks["Z"] == ("M2", "M1", "M0", "K1", "K0")
    assert s.parameters == ("NUM_TILES", "GRID_SIZE", "BLOCK_SIZE")
    m, k = s.partitioning_of("Z")
    assert m.produces == ("M2", "M1", "M0") and k.produces == ("K1", "K0")
    assert k.functions[0].leader == "A"
    st = s.spacetime_of("Z")
    assert st is not None
    assert [r.rank for r in st.space] == ["M0", "K0"]
    assert [r.rank for r in st.time] == ["M2", "M1", "K1"]
    assert not st.slip
    assert s.warnings == ()


def test_spmv_thread_mapped_cell13_has_k_outermost() -> None:
    s = load_spec(_spec("loops", "spmv_thread_mapped__cell13_1.yaml"))
    assert s.final_ranks["Z"] == ("M2", "M1", "M0", "K")
    assert s.loop_order_of("Z") == ("K", "M2", "M1", "M0")


def test_work_oriented_specs_flatten() -> None:
    s = load_spec(_spec("loops", "ver2__spgemm_work_oriented__cell07_0.yaml"))
    assert s.final_ranks["Z"] == ("N", "MK1", "MK0")
    assert s.loop_order_of("Z") == ("MK1", "MK0", "N")
    assert s.parameters == ("WORK_PER_THREAD",)


def test_example9_warns_about_partitions() -> None:
    s = load_spec(_spec("teaal-compiler", "example9.yaml"))
    (w,) = s.warnings
    assert "'partitions'" in w.message and "'partitioning'" in w.message
    assert w.location is not None and (w.location.line, w.location.column) == (15, 5)
    assert w.key_path == "mapping.partitions"
    assert s.mapping.rank_order["A"] == ("J", "L", "I")
    assert s.loop_order_of("T1") == ("J", "I", "L", "K")


def test_teaal_examples_with_dynamic_and_flattened_partitioning() -> None:
    demo = load_spec(_spec("teaal-compiler", "demo.yaml"))
    assert demo.final_ranks["Z"] == ("M3", "M2", "M1", "M0", "N3", "N2", "N1", "N0", "K")
    sigma = load_spec(_spec("teaal-compiler", "sigma.yaml"))
    assert sigma.final_ranks["Z"] == ("N", "K1", "MK01", "MK00")
    extensor = load_spec(_spec("teaal-compiler", "extensor.yaml"))
    assert extensor.parameters == ("K1", "K0", "M1", "M0", "N1", "N0")


def test_gamma_has_take_formats_architecture_and_bindings() -> None:
    s = load_spec(_spec("teaal-compiler", "gamma.yaml"))
    t = s.einsum("T")
    assert type(t.expr).__name__ == "Take"
    assert [f.name for f in s.formats["A"]] == ["default"]
    assert {r.rank: r.format for r in s.formats["A"][0].ranks} == {"M": "U", "K": "C"}
    assert "Accelerator" in s.architecture
    assert set(s.bindings) == {"T", "Z"}


def test_outerspace_interleaved_layout() -> None:
    s = load_spec(_spec("teaal-compiler", "outerspace.yaml"))
    (ll,) = s.formats["T0"]
    n = [r for r in ll.ranks if r.rank == "N"][0]
    assert n.layout == "interleaved" and n.cbits == 32


def test_strict_mode_accepts_all_teaal_specs() -> None:
    _need_corpus()
    for path in _corpus_files():
        if path.name not in BROKEN:
            load_spec(path, strict=True)


def test_the_corpus_location_follows_teaal_loops_corpus(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    from tests.conftest import corpus_dir

    monkeypatch.setenv("TEAAL_LOOPS_CORPUS", str(tmp_path))
    assert corpus_dir() == tmp_path.resolve()
