"""The runtime of a scalar epilogue (``Z = a * T1 + b * C``) on the fake GPU (NumPy for CuPy,
SciPy for the product): the second launch follows the product on the same stream with its
arguments in the signature's order and strides (replayed here by NumPy, rounding as the
kernel does), ``launch_into`` and ``capture`` hold both launches, and every operand and scalar
error is one line naming it, raised before any launch. Specs without an epilogue keep their
path."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import teaal_loops.runtime.epilogue as epilogue_module
from teaal_loops import pipeline
from teaal_loops.codegen.config import EPILOGUE_KERNEL
from teaal_loops.errors import MatrixError, UnsupportedMappingError
from teaal_loops.runtime import Kernel, backend
from teaal_loops.runtime.operands import epilogue_arguments
from teaal_loops.spec import load_spec_string
from tests.lowering.epilogue_specs import PARAMS, SPECS

from .conftest import SPECS as LIBRARY
from .conftest import FakeGpu, host_csr


def _kernel(name: str, dtype: str = "float32") -> Kernel:
    spec = load_spec_string(SPECS[name], source=f"{name}.yaml")
    kernel = pipeline.compile(spec, dtype=dtype, params=PARAMS[name])
    assert isinstance(kernel, Kernel)
    return kernel


@pytest.fixture
def epilogue_gpu(fake_gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> FakeGpu:
    """The fake GPU, with the epilogue kernel replayed from its arguments and SpMM's product
    computed by SciPy."""

    def get_function(source: str, name: str, **_: Any) -> Any:
        fake_gpu.record("compile")
        if name != EPILOGUE_KERNEL:
            return lambda *args: None
        return lambda grid, block, args: _epilogue(fake_gpu, source, args)

    def launch_dense(self: Kernel, prepared: Any, call: Any, y: Any, owner: Any,
                     *geometry: Any) -> None:
        A = host_csr(prepared)

        def run() -> None:
            product = A @ call.arrays[0]
            y[...] = y + product if prepared.accumulates else product

        fake_gpu.record("launch", run)
        run()

    monkeypatch.setattr(backend, "get_function", get_function)
    monkeypatch.setattr(Kernel, "launch_dense", launch_dense)
    return fake_gpu


def _epilogue(gpu: FakeGpu, source: str, args: tuple[Any, ...]) -> None:
    """teaal_epilogue as the template states it, reading its arguments by the signature's
    names (the rendered source's parameter list) and the strides they give."""
    start = source.index(f"{EPILOGUE_KERNEL}(\n")
    names = [line.split("//")[0].strip().rstrip(",").rsplit(" ", 1)[1]
             for line in source[start:].split("\n) {")[0].splitlines()[1:]]
    a = dict(zip(names, args, strict=True))

    def view(array: Any, so: Any, si: Any) -> Any:
        size = array.itemsize
        return np.lib.stride_tricks.as_strided(
            array, shape=(int(a["outer"]), int(a["inner"])),
            strides=(int(so) * size, int(si) * size),
        )

    def run() -> None:
        z = view(a["z"], a["z_stride_outer"], a["z_stride_inner"])
        t = a["alpha"] * z if "alpha" in a else z.copy()
        if "c" in a:
            c = view(a["c"], a["c_stride_outer"], a["c_stride_inner"])
            t = t + (a["beta"] * c if "beta" in a else c)
        z[...] = t

    gpu.record("epilogue", run)
    run()


def _expected(kernel: Kernel, A: Any, B: Any, C: Any, a: float, b: float) -> Any:
    """fl(fl(a * T1) + fl(b * C)) in the kernel's dtype, T1 the product in the dtype."""
    dt = kernel.dtype.type
    e = kernel.schedule.form.epilogue
    assert e is not None
    t1 = sp.csr_matrix(A).astype(kernel.dtype) @ np.asarray(B, kernel.dtype)
    z = dt(a) * t1 if e.alpha else t1
    if C is not None:
        z = z + (dt(b) * np.asarray(C, kernel.dtype) if e.beta else np.asarray(C, kernel.dtype))
    return z


A = sp.random(40, 30, density=0.15, format="csr", random_state=7)
RNG = np.random.default_rng(3)
X = RNG.uniform(-1, 1, 30).astype(np.float32)
C = RNG.uniform(-1, 1, 40).astype(np.float32)


@pytest.mark.parametrize("name", ["spmv_thread", "spmv_work", "spmv_group", "spmv_scale"])
def test_kernel_call_runs_the_product_then_the_epilogue(epilogue_gpu: FakeGpu,
                                                        name: str) -> None:
    kernel = _kernel(name)
    e = kernel.schedule.form.epilogue
    assert e is not None
    scalars = {n: v for n, v in (("a", 1 / 3), ("b", -0.7)) if n in e.scalars}
    addend = (C,) if e.addend else ()
    kernel.prepare(A)
    epilogue_gpu.log.clear()
    z = kernel(A, X, *addend, **scalars)
    np.testing.assert_array_equal(z, _expected(kernel, A, X, C if e.addend else None,
                                               1 / 3, -0.7))
    ops = [what for what, _, _ in epilogue_gpu.log if what in ("launch", "epilogue")]
    assert ops == ["launch", "epilogue"]
    assert len({ptr for what, ptr, _ in epilogue_gpu.log}) == 1  # one stream


def test_out_is_written_in_place(epilogue_gpu: FakeGpu) -> None:
    kernel = _kernel("spmv_merge")
    out = np.full(40, np.nan, np.float32)
    z = kernel(A, X, C, out=out, a=2.0, b=0.5)
    assert z is out
    np.testing.assert_array_equal(out, _expected(kernel, A, X, C, 2.0, 0.5))


def test_spmm_with_a_column_major_addend(epilogue_gpu: FakeGpu) -> None:
    kernel = _kernel("spmm_group", "float64")
    B = RNG.uniform(-1, 1, (30, 6))
    Cm = np.asfortranarray(RNG.uniform(-1, 1, (40, 6)))
    z = kernel(A, B, Cm, a=1.5, b=-2.0)
    assert z.shape == (40, 6)
    np.testing.assert_array_equal(z, _expected(kernel, A, B, Cm, 1.5, -2.0))
    z2 = kernel.call_dense(A, (B, Cm), scalars={"a": 1.5, "b": -2.0})
    np.testing.assert_array_equal(z2, z)


def test_launch_into_and_capture_hold_both_launches(epilogue_gpu: FakeGpu) -> None:
    kernel = _kernel("spmv_work")  # accumulates: zeroing, product, epilogue
    x = X.copy()
    y = np.zeros(40, np.float32)
    kernel.launch_into(A, x, y, C, a=0.25)
    np.testing.assert_array_equal(y, _expected(kernel, A, x, C, 0.25, 1.0))
    kernel.prepare(A)
    epilogue_gpu.log.clear()
    captured = kernel.capture(A, x, y, C, a=0.25)
    during = [what for what, _, capturing in epilogue_gpu.log if capturing]
    assert during == ["zero", "launch", "epilogue"]
    assert not any(what in ("compile",) or what.startswith("alloc")
                   for what, _, capturing in epilogue_gpu.log if capturing)
    assert captured.addend == (C,)  # type: ignore[attr-defined]
    for seed in range(2):
        x[...] = np.random.default_rng(seed).uniform(-1, 1, 30)
        captured.launch()
        np.testing.assert_array_equal(y, _expected(kernel, A, x, C, 0.25, 1.0))


# ---- errors: one line naming the operand or the scalar, before any launch -------------------

ERRORS = [
    ((X,), {"a": 1.0, "b": 1.0}, r"operand C is missing"),
    ((X, C[:7]), {"a": 1.0, "b": 1.0}, r"operand C has shape \(7,\); expected \(40,\)"),
    ((X, C.astype(complex)), {"a": 1.0, "b": 1.0}, r"operand C holds complex values"),
    ((X, C), {"a": float("nan"), "b": 1.0}, r"scalar a = nan is not a finite float32 number"),
    ((X, C), {"a": 1.0, "b": float("inf")}, r"scalar b = inf is not a finite float32"),
    ((X, C), {"a": 1e39, "b": 1.0}, r"scalar a = 1e\+39 is not a finite float32 number"),
    ((X, C), {"a": 10**400, "b": 1.0}, r"scalar a = inf is not a finite"),
    ((X, C), {"a": True, "b": 1.0}, r"scalar a must be a real number, got bool"),
    ((X, C), {"a": "2", "b": 1.0}, r"scalar a must be a real number, got str"),
    ((X, C), {"a": 1.0}, r"scalar b of Z\[m\] = a \* T1\[m\] \+ b \* C\[m\] is missing"),
    ((X, C), {"a": 1.0, "b": 1.0, "q": 2}, r"scalar q is not a scalar of .* \(its scalars: a, b\)"),
    ((X, C, C), {"a": 1.0, "b": 1.0}, r"takes A, B, then the addend C .*; got 4 operands"),
]


@pytest.mark.parametrize(("operands", "scalars", "message"), ERRORS)
def test_operand_and_scalar_errors(epilogue_gpu: FakeGpu, operands: Any, scalars: Any,
                                   message: str) -> None:
    kernel = _kernel("spmv_thread")
    epilogue_gpu.log.clear()
    with pytest.raises(MatrixError, match=message) as info:
        kernel(A, *operands, **scalars)
    assert "\n" not in str(info.value)
    assert not [what for what, _, _ in epilogue_gpu.log if what in ("launch", "epilogue")]


def test_scalar_errors_come_before_the_device_is_touched() -> None:
    """No CuPy needed: the count and the scalars are checked first."""
    kernel = _kernel("spmv_thread")
    with pytest.raises(MatrixError, match="operand C is missing"):
        kernel(A, X, a=1.0, b=1.0)
    with pytest.raises(MatrixError, match="scalar a = nan"):
        kernel(A, X, C, a=np.float64("nan"), b=1.0)


def test_an_addend_sharing_the_output_is_refused(epilogue_gpu: FakeGpu) -> None:
    kernel = _kernel("spmv_thread")
    out = np.zeros(40, np.float32)
    with pytest.raises(MatrixError, match="operand C shares memory with the output"):
        kernel(A, X, out, out=out, a=1.0, b=1.0)


def test_scalars_for_a_kernel_without_an_epilogue_are_refused(epilogue_gpu: FakeGpu) -> None:
    kernel: Any = pipeline.compile(LIBRARY / "thread_mapped.yaml")
    with pytest.raises(MatrixError, match="has no epilogue and takes no scalars"):
        kernel(A, X, a=1.0)


def test_a_spec_without_an_epilogue_keeps_its_path(epilogue_gpu: FakeGpu,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> Any:
        raise AssertionError("the epilogue path ran for a spec without an epilogue")

    monkeypatch.setattr(epilogue_module, "call_with_epilogue", refuse)
    kernel: Any = pipeline.compile(LIBRARY / "thread_mapped.yaml")
    np.testing.assert_allclose(kernel(A, X), A @ X, rtol=1e-5, atol=1e-6)
    assert kernel._epilogue is None


def test_epilogue_arguments_walk_the_contiguous_rank_innermost() -> None:
    kernel = _kernel("spmm_thread", "float64")
    params = kernel._nominal.epilogue_params()
    rowmajor = np.zeros((4, 3))
    colmajor = np.asfortranarray(rowmajor)
    names = [p.name for p in params]
    for z, c, expect in (
        (rowmajor, colmajor, (4, 3, 3, 1, 1, 4)),  # inner = N: Z's rows are contiguous
        (colmajor, rowmajor, (3, 4, 4, 1, 1, 3)),  # inner = M
    ):
        args, elements = epilogue_arguments(params, z, c, 2.0, 3.0)
        got = dict(zip(names, args, strict=True))
        assert elements == 12
        assert tuple(int(got[k]) for k in ("outer", "inner", "z_stride_outer",
                                           "z_stride_inner", "c_stride_outer",
                                           "c_stride_inner")) == expect
        assert got["alpha"] == 2.0 and type(got["alpha"]) is np.float64
    vector = np.zeros(5, np.float32)
    args, elements = epilogue_arguments(_kernel("spmv_scale")._nominal.epilogue_params(),
                                        vector, None, 0.5, 1.0)
    assert elements == 5 and [type(v) for v in args[1:2]] == [np.float32]


def test_the_kernel_source_is_the_one_file_with_both_kernels() -> None:
    source = _kernel("spmv_thread").source
    assert source.count("extern \"C\" __global__") == 2
    assert f"{EPILOGUE_KERNEL}(" in source


def test_a_linear_operator_of_an_epilogue_spec_is_refused(epilogue_gpu: FakeGpu) -> None:
    """Z = a * T1 + b * C is affine: an operator running the product alone would drop it."""
    with pytest.raises(UnsupportedMappingError, match="runs the product alone, but"):
        _kernel("spmv_scale").linear_operator(A)
