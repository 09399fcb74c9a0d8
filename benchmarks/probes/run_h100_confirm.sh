# Device probes of session 2026-11-24 (BENCHMARKS.md, "merge-path tile sized for its chunk"); run from the repository root with the corpus in .carry/corpus.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site TEAAL_LOOPS_CORPUS=$PWD/.carry/corpus PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SMALL=ego-Twitter-undirected,soc-Slashdot0902,as-caida20071105,cit-HepTh,email-Enron,wiki-Vote,ca-AstroPh-cc1
PCONF=4:4:8,4:4:12,8:8:8,8:4:8,8:8:12,16:8:12,16:16:8,16:8:8,16:4:12,32:16:8,32:8:12 PDTYPE=float32 PMATS=rmat-s23,longrows,uniform@panels:2,$SMALL timeout 170 python3 benchmarks/probes/mp_probe.py > $OUT/mp32.log 2>&1
PCONF=4:4:8,8:8:8,8:4:8,8:8:12,16:16:8,16:8:12 PDTYPE=float64 PMATS=rmat-s23,longrows@panels:2,uniform@panels:3,$SMALL timeout 140 python3 benchmarks/probes/mp_probe.py > $OUT/mp64.log 2>&1
GMC=1138_bus,bcsstk13,bcsstk33,cage8,chesapeake,crack,delaunay_n15,fidapex6,hep-th,lp_ship04l,pubmed,rgg_n_2_15_s0
V=""; for G in 4 8 16 32; do for UL in 4:__ldcs 2:__ldg 4:__ldg; do V="$V,$G:$UL"; done; done
PDTYPE=float64 PVARS=${V#,} PMATS=banded,uniform,$GMC timeout 120 python3 benchmarks/probes/gm_probe.py > $OUT/gm64.log 2>&1
PDTYPE=float32 PVARS=8:4:__ldcs,16:4:__ldcs,8:4:__ldg,8:2:__ldg PMATS=banded timeout 60 python3 benchmarks/probes/gm_probe.py > $OUT/gm32.log 2>&1
grep -A5 "==\|copy" $OUT/*.log | head -150
