"""The native one-step call (``runtime/native/vector_call.c``) without a GPU: it is compiled
here with the host's C compiler, a fake CuPy stands in for the arrays and streams, and a ctypes
callback stands in for ``cuLaunchKernel``, so the tests read back every argument the driver
would get, and check that the native call takes exactly the cases the Python class takes."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from teaal_loops.errors import DeviceError
from teaal_loops.runtime import launcher, native, vector_call
from tests.runtime.test_output_vectors import NOT_PLAIN, FakeCupy, Stream
from tests.runtime.test_output_vectors import native_module as _native

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                          ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)


class Driver:
    """cuLaunchKernel's stand-in: records each launch with its arguments read back (the
    leading ones as int32, float64 and a pointer, the trailing ones as pointers)."""

    def __init__(self, status: int = 0, trailing: int = 3) -> None:
        self.launches: list[dict[str, Any]] = []
        self.status = status
        self.trailing = trailing
        self.entry = LAUNCH(self._launch)  # kept alive with this object
        self.address = ctypes.cast(self.entry, ctypes.c_void_p).value

    def _launch(self, function: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                shared: int, stream: Any, params: Any, extra: Any) -> int:
        read = [ctypes.cast(params[i], ctypes.POINTER(t)).contents.value
                for i, t in enumerate((ctypes.c_int32, ctypes.c_double, ctypes.c_uint64))]
        read += [ctypes.cast(params[3 + i], ctypes.POINTER(ctypes.c_uint64)).contents.value
                 for i in range(self.trailing)]
        self.launches.append({"function": function, "grid": (gx, gy, gz),
                              "block": (bx, by, bz), "shared": shared, "stream": stream or 0,
                              "args": read, "extra": extra})
        return self.status


class Scratch:
    def __init__(self) -> None:
        self.asked: list[int] = []

    def pointer(self, stream_pointer: int) -> int:
        self.asked.append(stream_pointer)
        return 0x5C0000 + stream_pointer


def _launcher(cp: FakeCupy, trailing: int = 3) -> launcher.RawLaunch:
    matrix_array = types.SimpleNamespace(data=types.SimpleNamespace(ptr=0xA0A0))
    return launcher.RawLaunch(types.SimpleNamespace(ptr=0xF00D), 17, 128,
                             [np.int32(-5), np.float64(2.5), matrix_array], trailing,
                             lambda *a: 0, cp.cuda.get_current_stream)


def _call(cp: FakeCupy, driver: Driver, *, zeroed: bool = True, scratch: Any = None,
          launch: Any = True) -> Any:
    _native()
    raw = _launcher(cp, 4 if scratch else 3) if launch else None
    call = vector_call.vector_call(cp, raw, 40, 30, np.float32, zeroed=zeroed, owner=0xBEEF,
                               scratch=scratch, driver_address=driver.address)
    assert not isinstance(call, vector_call.VectorCall), "the native call was not used"
    return call


def test_the_driver_gets_every_argument_on_the_current_stream() -> None:
    cp, driver = FakeCupy(), Driver()
    call = _call(cp, driver)
    x = cp.ndarray((30,), np.float32)
    cp.stream = Stream(0x50)
    cp.stream_reads = 0
    y = call(x)
    assert cp.stream_reads == 1
    assert driver.launches == [{"function": 0xF00D, "grid": (17, 1, 1), "block": (128, 1, 1),
                                "shared": 0, "stream": 0x50,
                                "args": [-5, 2.5, 0xA0A0, x.data.ptr, y.data.ptr, 0xBEEF],
                                "extra": None}]
    assert y.shape == (40,) and y.dtype == np.float32
    assert [e[4] for e in cp.log if e[0] == "memset"] == [0x50], "zeroed on the launch stream"


def test_the_scratch_of_the_launch_stream_follows_the_owner() -> None:
    cp, scratch = FakeCupy(), Scratch()
    driver = Driver(trailing=4)
    call = _call(cp, driver, scratch=scratch)
    cp.stream = Stream(0x70)
    x = cp.ndarray((30,), np.float32)
    y = call(x)
    assert scratch.asked == [0x70]
    assert driver.launches[0]["args"][3:] == [x.data.ptr, y.data.ptr, 0xBEEF, 0x5C0070]


def test_outputs_come_from_batches_and_are_never_handed_out_twice() -> None:
    cp, driver = FakeCupy(), Driver()
    call = _call(cp, driver, zeroed=False)
    x = cp.ndarray((30,), np.float32)
    assert isinstance(call.outputs, _native().OutputVectors), "the C factory, called from C"
    ys = [call(x) for _ in range(130)]
    assert len({y.data.ptr for y in ys}) == 130
    assert cp.work().count("alloc") == 1 + 3  # x, then batches of 64
    assert [launch["args"][4] for launch in driver.launches] == [y.data.ptr for y in ys]


@pytest.mark.parametrize(
    "make",
    [
        *NOT_PLAIN,
        lambda cp: type("Sub", (cp.ndarray,), {})((30,), np.float32),  # a subclass
        lambda cp: [0.0] * 30,
    ],
)
def test_anything_else_is_left_to_the_general_path_as_the_python_class_does(make: Any) -> None:
    cp, driver = FakeCupy(), Driver()
    call = _call(cp, driver)
    python = vector_call.VectorCall(cp, None, 40, 30, np.float32, zeroed=True, owner=0xBEEF)
    x = make(cp)
    cp.log.clear()
    assert call(x) is None and python(x) is None
    assert driver.launches == [] and cp.log == []


def test_a_strided_vector_is_left_to_the_general_path() -> None:
    cp, driver = FakeCupy(), Driver()
    call = _call(cp, driver)
    strided = cp.ndarray((30,), np.float32)
    strided._c_contiguous = False
    assert call(strided) is None and driver.launches == []


def test_an_empty_grid_returns_the_zeroed_output_without_a_launch() -> None:
    cp, driver = FakeCupy(), Driver()
    call = _call(cp, driver, launch=False)
    y = call(cp.ndarray((30,), np.float32))
    assert y.shape == (40,) and driver.launches == []
    assert cp.work()[-2:] == ["alloc", "memset"]


def test_a_refused_launch_raises_the_device_error() -> None:
    cp, driver = FakeCupy(), Driver(status=700)
    call = _call(cp, driver)
    with pytest.raises(DeviceError, match="CUDA driver error 700"):
        call(cp.ndarray((30,), np.float32))


def test_the_call_takes_x_alone() -> None:
    cp, driver = FakeCupy(), Driver()
    call = _call(cp, driver)
    x = cp.ndarray((30,), np.float32)
    with pytest.raises(TypeError):
        call(x, x)
    with pytest.raises(TypeError):
        call(x=x)
    assert driver.launches == []


def test_too_many_leading_arguments_keep_the_python_class() -> None:
    cp, driver = FakeCupy(), Driver()
    _native()
    raw = launcher.RawLaunch(types.SimpleNamespace(ptr=1), 1, 32, [np.int32(i) for i in range(65)],
                            3, lambda *a: 0, cp.cuda.get_current_stream)
    call = vector_call.vector_call(cp, raw, 40, 30, np.float32, zeroed=True, owner=0,
                               driver_address=driver.address)
    assert isinstance(call, vector_call.VectorCall)


def test_switched_off_or_without_a_compiler_the_python_class_runs(tmp_path: Path) -> None:
    """In a fresh process (the loader remembers its answer): TEAAL_LOOPS_NATIVE=0, and a
    PATH and CC that name no compiler."""
    code = ("from teaal_loops.runtime import native; "
            "print(native.load() is None, native.unavailable_reason())")
    root = Path(__file__).resolve().parents[2]
    base = {**os.environ, "PYTHONPATH": str(root), "TEAAL_LOOPS_CACHE_DIR": str(tmp_path)}
    off = subprocess.run([sys.executable, "-c", code], env={**base, "TEAAL_LOOPS_NATIVE": "0"},
                         capture_output=True, text=True, check=True)
    assert off.stdout.strip() == "True TEAAL_LOOPS_NATIVE=0"
    bare = subprocess.run([sys.executable, "-c", code],
                          env={**base, "PATH": str(tmp_path), "CC": "no-such-cc"},
                          capture_output=True, text=True, check=True)
    assert bare.stdout.strip().startswith("True ")
    assert list(tmp_path.iterdir()) == []


def test_a_python_without_the_gil_keeps_the_python_classes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The C twins claim an output's slot under the GIL: a free-threaded Python never builds
    them (it would refuse to compile anyway: the source stops at an #error)."""
    real = native.sysconfig.get_config_var
    monkeypatch.setattr(native.sysconfig, "get_config_var",
                        lambda name: 1 if name == "Py_GIL_DISABLED" else real(name))
    monkeypatch.delenv(native.SWITCH, raising=False)
    module, reason = native._load.__wrapped__()  # the loader itself, not its remembered answer
    assert module is None and reason == "a Python without the GIL"


def test_the_module_is_built_once_into_the_cache(tmp_path: Path) -> None:
    _native()
    code = "from teaal_loops.runtime import native; print(native.load() is not None)"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "TEAAL_LOOPS_CACHE_DIR": str(tmp_path)}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, check=True)
        assert done.stdout.strip() == "True"
    built = list(tmp_path.iterdir())
    assert len(built) == 1 and built[0].name.startswith(native.MODULE)
    first = built[0].stat().st_mtime_ns
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    assert built[0].stat().st_mtime_ns == first, "a later process only loads it"


def test_the_source_compiles_without_a_warning(tmp_path: Path) -> None:
    import sysconfig

    cc = native.compiler()
    include = sysconfig.get_paths().get("include")
    if cc is None or not include or not (Path(include) / "Python.h").is_file():
        pytest.skip(f"the native call cannot be built here: {native.unavailable_reason()}")
    done = subprocess.run([*cc, *native.FLAGS, *native.STRICT_FLAGS, f"-I{include}",
                           str(native.SOURCE), "-o", str(tmp_path / "strict.so")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_cached_module_others_may_write_is_never_loaded(tmp_path: Path) -> None:
    _native()
    code = ("from teaal_loops.runtime import native; "
            "print(native.load() is None, native.unavailable_reason())")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "TEAAL_LOOPS_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    (built,) = tmp_path.iterdir()
    assert built.stat().st_mode & 0o077 == 0o055  # rwxr-xr-x: others may read, not write
    built.chmod(0o777)
    done = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                          capture_output=True, text=True)
    assert done.stdout.strip() == f"True {built} is writable by others"


def test_a_call_leaks_no_reference() -> None:
    """Every object the C code touches (x, its dtype and shape, the stream, the output) is
    held as many times after 2,000 calls as before them, launches and fall-throughs alike."""
    cp, driver, scratch = FakeCupy(), Driver(trailing=4), Scratch()
    call = _call(cp, driver, zeroed=False, scratch=scratch)
    x = cp.ndarray((30,), np.float32)
    other = cp.ndarray((31,), np.float32)
    cp.stream = Stream(0x90)
    watched = (x, x.dtype, x.shape, x.data, other, cp.stream, call.outputs)
    call(x)  # the first batch is made
    before = [sys.getrefcount(o) for o in watched]
    for _ in range(2000):
        y = call(x)
        assert call(other) is None
    del y
    assert [sys.getrefcount(o) for o in watched] == before
    assert len(driver.launches) == 2001


def test_without_a_home_folder_the_python_class_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Path.home() raises where neither HOME nor the password database names one."""
    if native.compiler() is None:
        pytest.skip("no C compiler here: the loader stops before it needs a folder")
    monkeypatch.delenv("TEAAL_LOOPS_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv(native.SWITCH, raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    module, reason = native._load.__wrapped__()  # the loader itself, not its remembered answer
    assert module is None
    assert reason is not None and "home directory" in reason
