"""``check --against gpu`` for SpMM and SDDMM (issue #13), on the CPU.

The GPU side runs the kernel (``Kernel.call_dense``) and its trace build
(``Kernel.trace_dense``: atoms x D owners, atom-major, the atoms of the matrix the layout holds
in the layout's order). Here a stand-in kernel with the runtime's calling convention (dense
operands in the kernels' axis order, the sampled values written into ``out`` per atom) computes
the values with NumPy and the owners with the schedule's rule, so that what ``check`` hands to
the comparisons (orientation, shapes, the binding's dense size) is checked without a GPU; a
wrong owner or value from that kernel makes the check fail. Without a GPU the real path is one
line. tests/gpu/test_check_gpu_dense.py runs the real kernels.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import teaal_loops.pipeline as pipeline
import teaal_loops.runtime as runtime
from teaal_loops.cli import main
from teaal_loops.layouts import tile_view
from teaal_loops.lowering import owners
from teaal_loops.lowering.simulate import operand_shape, sparse_operand
from teaal_loops.runtime.backend import unavailable_reason
from teaal_loops.schedules import bind
from tests.codegen.sddmm_lanes_specs import LANES_SPEC, lanes_spec_text
from tests.conftest import REPO, require_corpus
from tests.lowering.dense_specs import PARAMS, write_spec

SYNTH = "emptyrows:rows=40,cols=30,nnz=200,seed=3"
FAKE_CUPY = types.SimpleNamespace(empty=np.empty, asnumpy=np.asarray)


class _Prepared:
    def __init__(self, kernel: FakeKernel, A: Any) -> None:
        self.held = sparse_operand(kernel.schedule, A).tocsr()
        self.bound = bind(kernel.schedule, operand_shape(kernel.schedule, A), None,
                          kernel.params)


class FakeKernel:
    """The runtime Kernel's dense calls, computed on the host (module docstring)."""

    def __init__(self, spec: Any, params: dict[str, int], dtype: str,
                 shift_owner: bool = False, scale_value: float = 1.0) -> None:
        self.schedule = pipeline.load_schedule(spec, params=params)
        self.params = dict(params)
        self.dtype = np.dtype(dtype)
        self.layout = self.schedule.layout
        self.shift_owner, self.scale_value = shift_owner, scale_value

    def prepare(self, A: Any) -> _Prepared:
        return _Prepared(self, A)

    def _checked(self, prepared: _Prepared, operands: Any) -> tuple[Any, ...]:
        rows, cols = prepared.held.shape
        if self.schedule.form.kind == "spmm":
            (b,) = operands
            assert b.shape[0] == cols, "SpMM's B must come as (K, N)"
            return (np.asarray(b, dtype=np.float64),)
        u, v = operands
        assert u.shape[0] == rows and v.shape == (u.shape[1], cols), "SDDMM: (M, K), (K, N)"
        return np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)

    def call_dense(self, prepared: _Prepared, operands: Any, *, out: Any = None) -> Any:
        dense = self._checked(prepared, operands)
        view = tile_view(self.layout, prepared.held)
        if self.schedule.form.kind == "spmm":
            assert out is None
            return (prepared.held @ dense[0]).astype(self.dtype)
        u, v = dense
        e = view.entries
        assert out is not None and out.shape == (view.num_atoms,) and out.dtype == self.dtype
        out[:] = 0
        out[e.atom] = e.val * np.einsum("ek,ke->e", u[e.row], v[:, e.col]) * self.scale_value
        return None

    def trace_dense(self, prepared: _Prepared, operands: Any) -> Any:
        dense = self._checked(prepared, operands)
        size = dense[0].shape[1] if self.schedule.form.kind == "spmm" else dense[0].shape[1]
        bound = bind(self.schedule, prepared.bound.matrix, None, self.params, dense_size=size)
        owner = owners(bound, tile_view(self.layout, prepared.held).tile_ptr).astype(np.int32)
        if self.shift_owner:
            owner[0, -1] += 1
        return owner


def _patch(monkeypatch: pytest.MonkeyPatch, **fake: Any) -> None:
    def compile_for(spec: Any, A: Any, *, dtype: str, params: dict[str, int]) -> FakeKernel:
        return FakeKernel(spec, params, dtype, **fake)

    monkeypatch.setattr(pipeline, "compile_for", compile_for)
    monkeypatch.setattr(runtime, "cupy_module", lambda: FAKE_CUPY)


def _check(capsys: pytest.CaptureFixture[str], spec: Path, *args: str) -> tuple[int, str]:
    rc = main(["check", str(spec), "--against", "gpu", "--synthetic", SYNTH,
               "--reference", "builtin", *args])
    return rc, capsys.readouterr().out


def _params(name: str) -> list[str]:
    return [a for p, v in PARAMS[name].items() for a in ("--param", f"{p}={v}")]


@pytest.mark.parametrize(
    "name", ["spmm_n0_space", "spmm_n_space_group", "spmm_work", "spmm_b_nk", "spmm_transposed",
             "sddmm_one", "sddmm_two"],
)
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_the_gpu_side_agrees_where_the_kernel_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    name: str, dtype: str,
) -> None:
    _patch(monkeypatch)
    rank = "K" if name.startswith("sddmm") else "N"
    rc, out = _check(capsys, write_spec(tmp_path, name), "--rank", f"{rank}=5", "--dtype", dtype,
                     *_params(name))
    assert rc == 0, out
    word = "float32" if dtype == "f32" else "float64"
    assert f"values (GPU {word} vs reference): agree" in out
    if name == "sddmm_two":
        assert f"owners (GPU {word} vs reference): agree for all" in out and "per atom" in out
    else:
        assert "x 5 dense indices" in out


@pytest.mark.parametrize("kind,params", [("thread_mapped", {"S": 4, "T": 2}),
                                         ("group_mapped", {"G": 4, "S": 8})])
def test_the_lanes_kernels_gpu_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    kind: str, params: dict[str, int],
) -> None:
    _patch(monkeypatch)
    spec = tmp_path / "lanes.yaml"
    spec.write_text(lanes_spec_text(kind))
    args = [a for p, v in params.items() for a in ("--param", f"{p}={v}")]
    rc, out = _check(capsys, spec, "--rank", "K=11", *args)
    assert rc == 0 and "owners (GPU float32 vs reference): agree for all" in out, out
    rc, out = _check(capsys, LANES_SPEC, "--rank", "K=9")
    assert rc == 0 and "x 9 dense indices" in out, out


def test_a_wrong_gpu_owner_or_value_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _patch(monkeypatch, shift_owner=True)
    rc, out = _check(capsys, LANES_SPEC, "--rank", "K=9")
    assert rc == 1 and "DISAGREE for 1 of" in out and "index 8 atom 0" in out
    _patch(monkeypatch, scale_value=1.01)
    rc, out = _check(capsys, LANES_SPEC, "--rank", "K=9")
    assert rc == 1 and "values (GPU float32 vs reference): DISAGREE" in out


def test_above_max_nnz_the_gpu_values_meet_the_oracle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _patch(monkeypatch)
    rc, out = _check(capsys, write_spec(tmp_path, "spmm_transposed"), "--max-nnz", "100",
                     *_params("spmm_transposed"))
    assert rc == 0 and "values (GPU float32 vs NumPy oracle): agree" in out, out


def test_teaal_specs_gpu_side(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _patch(monkeypatch)
    for name in ("spmm.yaml", "sddmm.yaml"):
        rc, out = _check(capsys, require_corpus("teaal-specs", "teaal-compiler", name),
                         "--rank", ("K" if "sddmm" in name else "N") + "=3")
        assert rc == 0 and "result: AGREE" in out, out


@pytest.mark.skipif(unavailable_reason() is None, reason="a GPU is present: the real path runs")
def test_without_a_gpu_the_dense_gpu_check_is_one_line(
    capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["check", str(REPO / "specs/sddmm/lanes_over_k.yaml"), "--against", "gpu",
               "--synthetic", SYNTH])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "CUDA" in err or "CuPy" in err
