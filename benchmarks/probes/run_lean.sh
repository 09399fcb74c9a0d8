#!/usr/bin/env bash
# Session 24 (#13): lean_probe.py on one GPU, the corpus carried as .carry3/corpus/matrices.
# Its default builds need the templates of commit 468dc8e; at f4a7f6f and after, run it with
# PMODE=bytes (the probe's docstring). PMATS, PSPECS, PWIDTHS pass through. Outputs under $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1 PCORPUS=.carry3/corpus/matrices
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout "${PROBE_S:-540}" python3 benchmarks/probes/lean_probe.py 2>&1 | tee "$OUT/lean_probe.log"
