"""Launch the best cuSPARSE algorithm and one library build on one case, between
cudaProfilerStart/Stop, for ncu to compare the two (#13, #14):

    ncu --profile-from-start off ... python3 ncu_versus.py CASE

CASE is MATRIX:FAMILY:WIDTH:LABEL:SPEC[:PARAM=VALUE...]: FAMILY ``spmm`` (WIDTH = N) or
``spmv`` (WIDTH ignored); LABEL the cuSPARSE algorithm (``CSR_ALG3+preprocess``); SPEC a
library spec. MATRIX is a corpus file under $PCORPUS or a 2^20-row class (``longrows-r20``,
``rmat-s20``, ``uniform-r20``) or a large SpMV class (``rmat-s23``, ``longrows``):
coop_probe.load. PDTYPE=float64 runs both sides in float64 (default float32). Each side runs three
times inside the profiled range (ncu -c picks which it reports); its output is checked first.
"""
import os
import sys

import cupy as cp
import numpy as np

import teaal_loops
from teaal_loops.bench.cusparse.spmm import SpMM
from teaal_loops.bench.cusparse.spmv import SpMV

sys.path.insert(0, os.path.dirname(__file__))
import coop_probe  # noqa: E402  (beside this file)

matrix, family, width, label, spec, *params = sys.argv[1].split(":")
n = int(width)
dtype = os.environ.get("PDTYPE", "float32")
A = coop_probe.load(matrix, dtype)
A.sum_duplicates()
rows, cols = A.shape
rng = np.random.default_rng(1)
shape_in = (cols, n) if family == "spmm" else (cols,)
shape_out = (rows, n) if family == "spmm" else (rows,)
B = cp.asarray(rng.standard_normal(shape_in).astype(dtype))
ref = A.astype(cp.float64) @ B.astype(cp.float64)
Z = cp.empty(shape_out, dtype=dtype)
base = SpMM(A, n, B=B, C=Z) if family == "spmm" else SpMV(A, x=B, y=Z)
base.select(label)
k = teaal_loops.compile(spec, dtype=dtype,
                        params={p.split("=")[0]: int(p.split("=")[1]) for p in params})
prepared = k.prepare(A)
if family == "spmm":
    bound = k.bind_dense(prepared, (B,), Z)
    ours = bound.launch
else:
    def ours():
        k.launch_into(prepared, B, Z)
sides = {"cusparse " + label: lambda: base.launch(B, Z), "ours " + spec: ours}
for name, side in sides.items():
    Z.fill(np.nan)
    side()
    cp.cuda.Device().synchronize()
    err = float(cp.abs(Z.astype(cp.float64) - ref).max() / (cp.abs(ref).max() + 1))
    print(name, "max error", err, flush=True)
    assert err < 1e-4, name
cp.cuda.profiler.start()
for side in sides.values():
    for _ in range(3):
        side()
    cp.cuda.Device().synchronize()
cp.cuda.profiler.stop()
