#!/usr/bin/env bash
# GPU validation of everything the CPU cannot check, in one go, on a CUDA machine with
# teaal-loops installed (pip install -e ".[cuda13,test]") or importable from the checkout
# (PYTHONPATH=. where CuPy and pytest are already there, as on the lent GPU machines):
#   1. every test marked gpu (corpus matrices x schedules x layouts x dtypes: rigorous verdict,
#      cuSPARSE, simulation, trace owners, repeated launches; runtime and CLI behaviour);
#   2. teaal-loops check --against gpu (HiFiber reference vs the kernel's trace) on small
#      corpus matrices, for SpMV and for the SpMM, SDDMM, transposed and epilogue specs;
#   3. teaal-loops validate: large synthetic matrices of every kind (sizes via $LARGE, e.g.
#      LARGE="--max-nnz 1e8").
# Usage (repository root): OUT=out bash scripts/gpu_validation.sh
# The corpus is read from $TEAAL_LOOPS_CORPUS (default ../shared/corpus). Logs go to $OUT.
set -uo pipefail
out="${OUT:-out}"
mkdir -p "$out"
corpus="${TEAAL_LOOPS_CORPUS:-../shared/corpus}"
export PYTHONUNBUFFERED=1
status=0

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

echo "== 1. gpu tests"
python -m pytest -m gpu tests -q -p no:cacheprovider --maxfail=25 -W ignore 2>&1 \
    | tee "$out/gpu_tests.log" | tail -5 || status=1
grep -qE "^[0-9]+ passed" "$out/gpu_tests.log" && ! grep -qE "[0-9]+ failed" "$out/gpu_tests.log" \
    || status=1

echo "== 2. check --against gpu"
for m in chesapeake west0067 cage8 lp_ship04l; do
    for s in thread_mapped group_mapped work_oriented merge_path; do
        python3 -m teaal_loops check "specs/$s.yaml" -m "$corpus/matrices/$m.mtx.gz" \
            --against gpu > "$out/check.tmp" 2>&1 || status=1
        echo "$m $s: $(grep -E '^(owners|result)' "$out/check.tmp" | tr '\n' ' ')" \
            | tee -a "$out/check_gpu.log"
    done
done
# SpMM, SDDMM, transposed and epilogue forms: values and the owner of every (nonzero, dense index)
for s in specs/spmm/*.yaml specs/sddmm/*.yaml "$corpus/teaal-specs/teaal-compiler/spmm.yaml" \
         "$corpus/teaal-specs/teaal-compiler/sddmm.yaml" "$corpus/teaal-specs/teaal-compiler/gemv.yaml" \
         "$corpus/teaal-specs/loops/spmm_work_oriented__cell07_0.yaml"; do
    rank=$(case "$s" in *sddmm*) echo K=32;; *gemv*) echo "";; *) echo N=8;; esac)
    python3 -m teaal_loops check "$s" -m "$corpus/matrices/west0067.mtx.gz" --against gpu \
        ${rank:+--rank "$rank"} > "$out/check.tmp" 2>&1 || status=1
    echo "west0067 $(basename "$s"): $(grep -E '^(owners|result)' "$out/check.tmp" | tr '\n' ' ')" \
        | tee -a "$out/check_gpu.log"
done
rm -f "$out/check.tmp"

echo "== 3. large synthetic matrices"
# shellcheck disable=SC2086 # $LARGE holds several flags
python3 -m teaal_loops validate ${LARGE:---max-nnz 1e7} -o "$out/validate_large.json" \
    > "$out/validate_large.log" 2>&1 || status=1
tail -3 "$out/validate_large.log"
exit $status
