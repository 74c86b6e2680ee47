#!/bin/bash
# One device call on nvidia-h200 that checks and measures the committed code (issue 4): the whole
# GPU suite, then the table at 4096/8192/16384 (cuBLAS DGEMM and its FP64 emulation,
# scheme I with 6, 7, 8 slices and "auto", scheme II with 53 bits and "auto", per-kernel rows).
# LARGE=1 instead runs n = 32768 (scheme I "auto", scheme II 53 bits and "auto") after the suite.
# No tuning: the config defaults.
# Usage (device tool, carry [".tile"]):
#   source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH && BUDGET_S=540 bash bench/final_session.sh
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt
mkdir -p /tmp/ctc /tmp/ctt
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-540} - $(date +%s) + T0 )); }
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 -m gpu tests/ -rs > "$OUT/gpu_tests.txt" 2>&1
tail -3 "$OUT/gpu_tests.txt"; echo "suite done at $(( $(date +%s) - T0 )) s"
if [ "${LARGE:-0}" = 1 ]; then
  timeout $(left) python3 bench/gpu_gemm.py --sizes 32768 --slices auto --bits 53 auto --reps 1 --no-phases \
    --samples 12 --out "$OUT/gpu_gemm_32768" > "$OUT/gpu_gemm_32768.txt" 2>&1
  tail -8 "$OUT/gpu_gemm_32768.md"
else
  timeout $(left) python3 bench/gpu_gemm.py --sizes 4096 8192 16384 --slices 6 7 8 auto --bits 53 auto \
    --emulation --reps 3 --out "$OUT/gpu_gemm" > "$OUT/gpu_gemm.txt" 2>&1; tail -45 "$OUT/gpu_gemm.md"
fi
echo "all done at $(( $(date +%s) - T0 )) s"
