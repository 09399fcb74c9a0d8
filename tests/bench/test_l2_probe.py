"""The L2 probes (read bandwidth, random gathers by buffer size): their kernels compile (CPU,
with nvcc) and measure sane rates (GPU)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from teaal_loops.bench.l2_probe import GATHER_SOURCE, PROBE_SOURCE, l2_bandwidth
from teaal_loops.runtime.backend import unavailable_reason
from tests.codegen.test_nvcc import NVCC


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed)")
@pytest.mark.parametrize("text", [PROBE_SOURCE, GATHER_SOURCE], ids=["read", "gather"])
def test_probe_kernels_compile(tmp_path: Path, text: str) -> None:
    source = tmp_path / "probe.cu"
    source.write_text(text)
    done = subprocess.run([str(NVCC), "-arch=sm_90", "-cubin", "-o", str(tmp_path / "p.cubin"),
                           str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.gpu
def test_probe_measures_more_than_dram_rates() -> None:
    unavailable = unavailable_reason()
    if unavailable:
        pytest.skip(f"needs a CUDA GPU: {unavailable}")
    import cupy

    from teaal_loops.bench.timing import Timer

    result = l2_bandwidth(cupy, Timer(cupy), reps=5)
    # L2 serves reads faster than HBM's few TB/s and slower than anything absurd
    assert 1500 < result["gbps"] < 50000, result


@pytest.mark.gpu
def test_gather_curve_falls_once_the_buffer_outgrows_l2() -> None:
    unavailable = unavailable_reason()
    if unavailable:
        pytest.skip(f"needs a CUDA GPU: {unavailable}")
    import cupy

    from teaal_loops.bench.l2_probe import gather_curve
    from teaal_loops.bench.timing import Timer

    l2 = cupy.cuda.Device().attributes["L2CacheSize"]
    sizes = (1 << 20, 4 << 20, 1 << (4 * l2 - 1).bit_length())  # the last: over 4x the L2
    curve = dict((int(b), r) for b, r in gather_curve(cupy, Timer(cupy), reps=3,
                                                      sizes=sizes)["curve"])
    resident, spilled = curve[4 << 20], curve[sizes[-1]]
    assert 300 < spilled < resident < 50000, curve  # GB/s of sectors
    assert spilled < 0.8 * resident, curve  # most gathers go to DRAM past the L2
