"""Heavy validation on large synthetic matrices (up to 1e8 nonzeros); writes JSON.

    PYTHONPATH=. python3 scripts/validate_large.py --max-nnz 100000000 --out large.json

For each synthetic kind and size (10x steps from 1e6 up to --max-nnz), each library spec and
each dtype: the rigorous verdict (Wilkinson bound against the float64 reference), the trace
build's owners against the simulation (skipped above --trace-max-nnz to bound the time), and a
repeated launch (bitwise equal for STORE / GROUP_REDUCE schedules). Exit status 1 when any case
fails, so it can gate a release.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

KINDS = ["uniform", "rmat", "banded", "longrows", "emptyrows"]
SPECS = ["thread_mapped", "group_mapped", "group_mapped_block", "work_oriented", "merge_path"]


def sizes(max_nnz: int, min_nnz: int = 1_000_000) -> list[int]:
    out, n = [], 1_000_000
    while n <= max_nnz:
        if n >= min_nnz:
            out.append(n)
        n *= 10
    return out or [max_nnz]


def fit_params(spec: str, A: Any) -> dict[str, int]:
    """Bindings that keep a launch within 32-bit thread ids (bind refuses larger ones): the
    block-group spec takes several rows a group once rows x 256 lanes would overflow."""
    if spec != "group_mapped_block":
        return {}
    rows_per_group = -(-A.shape[0] * 256 // (2**31 - 1))
    return {"ROWS_PER_GROUP": rows_per_group} if rows_per_group > 1 else {}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--max-nnz", type=float, default=1e8)
    p.add_argument("--min-nnz", type=float, default=1e6, help="skip sizes below this")
    p.add_argument("--trace-max-nnz", type=float, default=2e7)
    p.add_argument("--kind", action="append", help=f"synthetic kinds (default {KINDS})")
    p.add_argument("--spec", action="append", help=f"spec names (default {SPECS})")
    p.add_argument("--dtype", action="append", choices=["f32", "f64"])
    p.add_argument("--out", default="validate_large.json")
    args = p.parse_args()

    import numpy as np

    import teaal_loops.runtime as rt
    from teaal_loops import matrix
    from teaal_loops.lowering import simulate
    from teaal_loops.runtime import validation

    cases: list[dict[str, Any]] = []
    failed = 0
    for nnz in sizes(int(args.max_nnz), int(args.min_nnz)):
        for kind in args.kind or KINDS:
            rows = max(1000, nnz // 10) if kind != "longrows" else max(1000, nnz // 100)
            text = f"{kind}:rows={rows},nnz={nnz},seed=11"
            t0 = time.time()
            A = matrix.synthetic_from_string(text)
            print(f"{text}: built in {time.time() - t0:.1f}s", flush=True)
            for dt in args.dtype or ["f32", "f64"]:
                dtype = {"f32": "float32", "f64": "float64"}[dt]
                x = validation.random_vector(A.shape[1], dtype, 5)
                for name in args.spec or SPECS:
                    t1 = time.time()
                    k = rt.compile(
                        REPO / "specs" / f"{name}.yaml", dtype=dtype, params=fit_params(name, A)
                    )
                    prepared = k.prepare(A)
                    xd = k.vector(prepared, x)
                    y1 = k(prepared, xd).get()
                    y2 = k(prepared, xd).get()
                    report = validation.rigorous(A, x, y1, dtype)
                    if prepared.accumulates:
                        bound = validation.wilkinson_bound(A, x, dtype)
                        repeat_ok = bool(np.all(np.abs(y1.astype(np.float64) - y2) <= bound))
                    else:
                        repeat_ok = bool(np.array_equal(y1.view(np.uint8), y2.view(np.uint8)))
                    trace_ok: bool | None = None
                    if A.nnz <= args.trace_max_nnz:
                        owner = k.trace(prepared, xd).get()
                        trace_ok = bool(
                            np.array_equal(owner, simulate(prepared.bound, A, x).owner)
                        )
                    ok = report.verdict == "NOT_A_BUG" and repeat_ok and trace_ok is not False
                    failed += not ok
                    case = {
                        "matrix": text, "nnz": int(A.nnz), "dtype": dtype, "spec": name,
                        "params": fit_params(name, A),
                        "verdict": report.verdict, "gpu_overruns": report.gpu_overruns,
                        "max_abs_error": report.max_abs_error, "repeat_ok": repeat_ok,
                        "trace_ok": trace_ok, "ok": ok, "seconds": round(time.time() - t1, 2),
                    }
                    cases.append(case)
                    print(f"  {dt} {name:20s} {report.verdict} repeat={repeat_ok} "
                          f"trace={trace_ok} ({case['seconds']}s)", flush=True)
                    del prepared, xd
            del A
    Path(args.out).write_text(json.dumps({"failed": failed, "cases": cases}, indent=2))
    print(f"{len(cases)} cases, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
