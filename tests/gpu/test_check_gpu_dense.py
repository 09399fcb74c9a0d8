"""``teaal-loops check --against gpu`` on the dense forms (issue #13 point 4): the kernel's
values and its trace build's owner of every (atom, dense index) against the HiFiber reference,
for a loops SpMM spec, TeAAL's transposed spmm.yaml and two-einsum sddmm.yaml, and the SDDMM
library specs (one thread per nonzero's K, and lanes over K)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teaal_loops.cli import main
from tests.conftest import REPO, corpus_dir

pytestmark = pytest.mark.gpu

SYNTH = "emptyrows:rows=40,cols=30,nnz=200,seed=3"
LOOPS = corpus_dir() / "teaal-specs" / "loops"
COMPILER = corpus_dir() / "teaal-specs" / "teaal-compiler"
CASES: list[tuple[str, Path, list[str], str]] = [
    ("loops_spmm_thread", LOOPS / "spmm_thread_mapped__cell08_0.yaml",
     ["--param", "NUM_TILES=4", "--param", "NUM_THREADS=2"], "N=5"),
    ("loops_spmm_group", LOOPS / "spmm_group_mapped__cell08_0.yaml",
     ["--param", "NUM_TILES=4", "--param", "GRID_SIZE=2", "--param", "BLOCK_SIZE=2"], "N=3"),
    ("teaal_spmm", COMPILER / "spmm.yaml", [], "N=4"),
    ("teaal_sddmm", COMPILER / "sddmm.yaml", [], "K=3"),
    ("spmm_lanes_over_n", REPO / "specs/spmm/lanes_over_n.yaml", [], "N=6"),
    ("sddmm_thread_per_nonzero", REPO / "specs/sddmm/thread_per_nonzero.yaml", [], "K=9"),
    ("sddmm_lanes_over_k", REPO / "specs/sddmm/lanes_over_k.yaml", [], "K=19"),
]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_check_against_the_gpu_agrees(
    capsys: pytest.CaptureFixture[str], case: str, dtype: str
) -> None:
    _, spec, params, rank = next(c for c in CASES if c[0] == case)
    if not spec.exists():
        pytest.skip(f"{spec} absent: set TEAAL_LOOPS_CORPUS to the shared corpus")
    rc = main(["check", str(spec), "--against", "gpu", "--synthetic", SYNTH, "--rank", rank,
               "--dtype", dtype, "--reference", "builtin", *params])
    out = capsys.readouterr().out
    assert rc == 0, out
    word = "float32" if dtype == "f32" else "float64"
    assert f"values (GPU {word} vs reference): agree" in out
    assert f"owners (GPU {word} vs reference): agree for all" in out
    assert out.rstrip().endswith("result: AGREE")
