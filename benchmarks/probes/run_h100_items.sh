#!/usr/bin/env bash
# The session-20 probes (#14: merge-path's items a thread on skewed rows), in the repository
# root on an nvidia-h100-x1 machine; nvmath-python's wheels in .whl. Outputs under $OUT.
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site
# 1. long rows' atomics sent to one word, then spread over many (same work, wrong values)
OUT=$OUT python3 benchmarks/probes/atomic_probe.py      # -> $OUT/atomic_probe_float32.json
# 2. ncu of the runtime's merge-path at 4 and 16 items a thread on longrows and rmat-s23
for c in "longrows 4" "longrows 16" "rmat-s23 4" "rmat-s23 16"; do
  set -- $c
  ncu -k teaal_spmv_merge_path -s 1 -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats \
      --metrics lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_atom.sum,lts__t_sectors_srcunit_tex_op_red.sum,smsp__inst_executed.sum \
      --csv --page details python3 benchmarks/probes/ncu_one.py "$1" "$2" > "$OUT/ncu_$1_$2.csv"
done
# 3. blocks a SM asked of the compiler and the shared-memory carveout
OUT=$OUT python3 benchmarks/probes/carveout_probe.py    # -> $OUT/carveout_probe_float32.json
