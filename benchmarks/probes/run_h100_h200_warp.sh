#!/usr/bin/env bash
# The session-19 probes (#13), in the repository root on the device; the corpus matrices they
# read carried in .carry2/corpus/matrices, nvmath-python's wheels in .whl.
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site:benchmarks/probes PCORPUS=.carry2/corpus/matrices
# nvidia-h100-x1: the warp walk, then the build forced for one worker a warp, then 2-D tiles
python3 benchmarks/probes/coop_probe.py            # -> $OUT/coop_probe.json
python3 benchmarks/probes/warp_shuffle_probe.py    # -> $OUT/warp_shuffle_probe_n128.json
python3 benchmarks/probes/tiles2d_probe.py         # -> $OUT/tiles2d_probe_n32.json
# nvidia-h200: the forced builds again, on the classes past the L2 and luxembourg_osm
PMATS=uniform-r20,rmat-s20,longrows-r20,luxembourg_osm python3 benchmarks/probes/warp_shuffle_probe.py
