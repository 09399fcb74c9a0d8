#!/usr/bin/env bash
# Session 24 (#13): lean_probe.py on one GPU, the corpus carried as .carry3/corpus/matrices.
# Outputs under $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1 PCORPUS=.carry3/corpus/matrices
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout "${PROBE_S:-540}" python3 benchmarks/probes/lean_probe.py 2>&1 | tee "$OUT/lean_probe.log"
