"""Every generated file and every schedule x dtype compiles with nvcc for sm_90 and sm_80.

Skipped (with the reason) where nvcc is absent. Compiles run in a thread pool, one nvcc per
(source, architecture) to a cubin in a temporary folder, so ptxas checks the code too.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from teaal_loops.codegen import make_config, render
from teaal_loops.layouts import get_layout, known_layouts
from teaal_loops.lowering import lower
from teaal_loops.spec import load_spec_string
from tests.codegen import hand_schedules as hs

REPO = Path(__file__).resolve().parents[2]
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
)
ARCHS = ("sm_90", "sm_80")

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed)")


def _compile(source: Path, arch: str, *defines: str) -> tuple[str, int, str]:
    out = source.with_suffix(f".{arch}{''.join(defines).replace('-D', '.')}.cubin")
    proc = subprocess.run(
        [str(NVCC), f"-arch={arch}", "-cubin", *defines, "-o", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    return f"{source.name} [{arch} {' '.join(defines)}]", proc.returncode, proc.stderr


def _compile_all(jobs: list[tuple[Path, str, tuple[str, ...]]]) -> None:
    workers = max(2, min(8, os.cpu_count() or 2))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda job: _compile(job[0], job[1], *job[2]), jobs))
    failures = [f"{name}: exit {rc}\n{err}" for name, rc, err in results if rc != 0]
    assert not failures, "\n".join(failures)
    warnings = [f"{name}:\n{err}" for name, rc, err in results if "warning" in err.lower()]
    assert not warnings, "\n".join(warnings)


def test_every_generated_file_compiles(tmp_path: Path) -> None:
    sources = sorted((REPO / "generated").glob("*.cu"))
    assert sources, "generated/ is empty: run python -m teaal_loops generate --all -o generated"
    copies = []
    for src in sources:
        copy = tmp_path / src.name
        copy.write_text(src.read_text())
        copies.append(copy)
    _compile_all([(c, arch, ()) for c in copies for arch in ARCHS])


def test_every_schedule_variant_dtype_and_index_width_compiles(tmp_path: Path) -> None:
    jobs: list[tuple[Path, str, tuple[str, ...]]] = []
    for name, schedule in sorted(hs.all_variants().items()):
        for dtype in ("f32", "f64"):
            for bits in (32, 64):
                path = tmp_path / f"{name}.{dtype}.i{bits}.cu"
                path.write_text(render(make_config(schedule, dtype=dtype, index_bits=bits)))
                # sm_90 for everything; sm_80 and the trace build on the f64/32-bit set
                jobs.append((path, "sm_90", ()))
                if dtype == "f64" and bits == 32:
                    jobs.append((path, "sm_80", ("-DTEAAL_TRACE=1",)))
    _compile_all(jobs)


def test_spmm_on_every_layout_and_schedule_compiles(tmp_path: Path) -> None:
    """The dense wrapper around every schedule's body, on every layout that serves SpMM
    (N in time, in space where the schedule allows: work-oriented's N0 too), f32 and f64, 32-
    and 64-bit offsets."""
    mappings = {
        "thread_mapped": ("M: [uniform_shape(T)]", "[M1, M0, N, K]", "[M0, N]", "[M1, K]"),
        "group_mapped": ("K: [uniform_occupancy(A.G)]", "[M, N, K1, K0]", "[M, N, K0]", "[K1]"),
        "work_oriented": ("(M, K): [flatten()]\n      MK: [uniform_occupancy(A.W)]",
                          "[MK1, MK0, N]", "[MK1]", "[MK0, N]"),
        "merge_path": ("(M, K): [flatten()]\n      MK: [x_merge_path(A.I)]", "[MK1, MK0, N]",
                       "[MK1]", "[MK0, N]"),
        # nonzero splitting: work-oriented chunks with N0 in space
        "work_oriented/n0_space": (
            "(M, K): [flatten()]\n      MK: [uniform_occupancy(A.W)]\n"
            "      N: [uniform_shape(S)]", "[MK1, N1, N0, MK0]", "[MK1, N0]", "[N1, MK0]"),
    }
    jobs: list[tuple[Path, str, tuple[str, ...]]] = []
    for label, (part, order, space, time) in mappings.items():
        kind = label.split("/")[0]
        spec = load_spec_string(
            "einsum:\n  declaration: {A: [M, K], B: [K, N], Z: [M, N]}\n"
            "  expressions: ['Z[m, n] = A[m, k] * B[k, n]']\nmapping:\n  partitioning:\n"
            f"    Z:\n      {part}\n  loop-order:\n    Z: {order}\n"
            f"  spacetime:\n    Z: {{space: {space}, time: {time}}}\n"
        )
        for layout in known_layouts():
            definition = get_layout(layout)
            if "spmm" not in definition.forms or kind not in definition.schedules:
                continue
            if definition.scatters:
                continue  # a row-partitioning spec does not fit a column layout (refused)
            schedule = lower(spec, layout=layout)
            for dtype, bits in (("f32", 32), ("f64", 64)):
                name = label.replace("/", "_")
                path = tmp_path / f"spmm.{name}.{layout.replace(':', '_')}.{dtype}.cu"
                path.write_text(render(make_config(schedule, dtype=dtype, index_bits=bits)))
                jobs.append((path, "sm_90", ("-DTEAAL_TRACE=1",) if dtype == "f64" else ()))
    assert len(jobs) >= 16
    assert any("n0_space" in job[0].name for job in jobs)
    _compile_all(jobs)
