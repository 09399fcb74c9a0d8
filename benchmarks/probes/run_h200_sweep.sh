# Device probes of session 2026-11-24 (BENCHMARKS.md, "merge-path tile sized for its chunk"); run from the repository root with the corpus in .carry/corpus.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site TEAAL_LOOPS_CORPUS=$PWD/.carry/corpus PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export PCONF=4:4:8,4:4:12,4:4:16,8:4:8,8:4:10,8:4:12,8:8:8,8:8:10,8:8:12,16:4:8,16:4:10,16:4:12,16:8:8,16:8:10,16:8:12,16:16:8,16:16:10,16:16:12,32:8:8,32:8:10,32:8:12,32:16:8,32:16:10,32:16:12
SMALL=ego-Twitter-undirected,soc-Slashdot0902,as-caida20071105,cit-HepTh,email-Enron,wiki-Vote,ca-AstroPh-cc1
PDTYPE=float32 PMATS=rmat-s23,longrows,uniform@panels:2,$SMALL timeout 200 python3 benchmarks/probes/mp_probe.py > $OUT/mp32.log 2>&1
PDTYPE=float64 PMATS=rmat-s23,longrows@panels:2,uniform@panels:3,$SMALL timeout 200 python3 benchmarks/probes/mp_probe.py > $OUT/mp64.log 2>&1
GMC=1138_bus,add32,bcsstk13,bcsstk33,bips98_606,cage8,chesapeake,cora,crack,delaunay_n15,dnn_n1024-l1,fidapex6,hep-th,lp_ship04l,pubmed,rgg_n_2_15_s0,west0067
V=""; for G in 4 8 16 32; do for UL in 4:__ldcs 2:__ldg 4:__ldg 2:__ldcs; do V="$V,$G:$UL"; done; done
PDTYPE=float64 PVARS=${V#,} PMATS=banded,uniform,$GMC timeout 130 python3 benchmarks/probes/gm_probe.py > $OUT/gm64.log 2>&1
PDTYPE=float32 PVARS=8:4:__ldcs,8:3:__ldcs,8:6:__ldcs,4:4:__ldcs,4:8:__ldcs,8:4:__ldg,8:2:__ldg,16:2:__ldg PMATS=banded timeout 60 python3 benchmarks/probes/gm_probe.py > $OUT/gm32.log 2>&1
tail -n 400 $OUT/*.log
