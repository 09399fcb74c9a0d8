# Device probes of session 2026-11-24 (BENCHMARKS.md, "merge-path tile sized for its chunk"); run from the repository root with the corpus in .carry/corpus.
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site TEAAL_LOOPS_CORPUS=$PWD/.carry/corpus PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
PGS=8,16,32 PUS=2,4,8 PLOADS=__ldcs,__ldg timeout 250 python3 benchmarks/probes/banded_probe.py 2>&1 | tee $OUT/banded.log
timeout 280 python3 benchmarks/probes/mp_probe.py 2>&1 | tee $OUT/mp.log
