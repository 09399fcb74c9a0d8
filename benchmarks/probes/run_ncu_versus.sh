#!/usr/bin/env bash
# Session 23: ncu of the best cuSPARSE algorithm beside our best build on the largest misses
# of #13 (SpMM, N = 32 and 128) and #14 (SpMV), float32, one nvidia-h100-x1. Outputs under $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
export PYTHONPATH=.:/tmp/site
METRICS=lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_atom.sum,lts__t_sectors_srcunit_tex_op_red.sum,smsp__inst_executed.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,smsp__thread_inst_executed_per_inst_executed.ratio
for c in "$@"; do
  tag=$(echo "$c" | cut -d: -f1-3 | tr ':' '_')
  ncu --profile-from-start off -c 12 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats \
      --metrics "$METRICS" --csv --page details \
      python3 benchmarks/probes/ncu_versus.py "$c" > "$OUT/ncu_versus_$tag.csv" 2> "$OUT/ncu_versus_$tag.err"
  echo "$c rc=$? $(wc -l < "$OUT/ncu_versus_$tag.csv") lines"
done
