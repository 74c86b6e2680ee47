#!/bin/bash
# One device call on nvidia-h200 that checks and measures the committed code (issue 4): the whole
# GPU suite, the table at 4096/8192/16384 (scheme I "auto", scheme II 53 bits and "auto", with
# per-kernel rows), then 32768 with what is left of BUDGET_S. No tuning: the config defaults.
# Usage (device tool, carry [".tile"]):
#   source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH && BUDGET_S=400 bash bench/final_session.sh
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt
mkdir -p /tmp/ctc /tmp/ctt
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-400} - $(date +%s) + T0 )); }
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 -m gpu tests/ -rs > "$OUT/gpu_tests.txt" 2>&1
tail -3 "$OUT/gpu_tests.txt"; echo "suite done at $(( $(date +%s) - T0 )) s"
timeout 200 python3 bench/gpu_gemm.py --sizes 4096 8192 16384 --slices auto --bits 53 auto --reps 3 \
  --out "$OUT/gpu_gemm" > "$OUT/gpu_gemm.txt" 2>&1; tail -40 "$OUT/gpu_gemm.md"
echo "gemm done at $(( $(date +%s) - T0 )) s"
timeout $(left) python3 bench/gpu_gemm.py --sizes 32768 --slices --bits 53 auto --reps 1 --no-phases \
  --samples 12 --out "$OUT/gpu_gemm_32768" > "$OUT/gpu_gemm_32768.txt" 2>&1
tail -8 "$OUT/gpu_gemm_32768.md"; echo "all done at $(( $(date +%s) - T0 )) s"
