"""Launch one merge-path SpMV build three times on one synthetic matrix, for ncu to profile
(ncu -k teaal_spmv_merge_path -s 1 -c 1 python3 ncu_one.py MATRIX IPT)."""
import sys
import numpy as np
import cupy as cp
import cupyx.scipy.sparse as cps
import teaal_loops
from teaal_loops.bench import generate

name, ipt = sys.argv[1], int(sys.argv[2])
DT = "float32"
gen = {"rmat-s23": lambda: generate.rmat(cp, scale=23, nnz=160_000_000, dtype=DT),
       "longrows": lambda: generate.longrows(cp, rows=2**22, nnz=2**27, dtype=DT),
       "uniform": lambda: generate.uniform(cp, rows=2**23, nnz=2**27, dtype=DT)}
indptr, indices, data = gen[name]()
n = len(indptr) - 1
A = cps.csr_matrix((data, indices, indptr), shape=(n, n))
x = cp.asarray(np.random.default_rng(1).standard_normal(n).astype(DT))
y = cp.empty(n, dtype=DT)
k = teaal_loops.compile("specs/merge_path.yaml", params={"ITEMS_PER_THREAD": ipt}, dtype=DT)
p = k.prepare(A)
for _ in range(3):
    k.launch_into(p, x, y)
cp.cuda.Device().synchronize()
