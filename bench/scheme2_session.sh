#!/bin/bash
# One device call on nvidia-h200-x2 for scheme II (issues 4 and 6): GPU suite, multi-GPU bitwise
# check (both schemes), single-GPU table (scheme I and II), multi-GPU scaling with scheme II.
# SINGLE=1 (nvidia-h200): no multi-GPU parts, n = 32768 on one GPU instead.
# Usage (device tool, carry [".tile"]):
#   source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH && bash bench/scheme2_session.sh
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt
mkdir -p /tmp/ctc /tmp/ctt
ROOT=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-560} - $(date +%s) + T0 )); }
nvidia-smi -L
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 -m gpu tests/ -rs > "$OUT/gpu_tests.txt" 2>&1
tail -3 "$OUT/gpu_tests.txt"; echo "tests done at $(( $(date +%s) - T0 )) s"
if [ -z "$SINGLE" ]; then
  timeout 120 mpiexec $ROOT -n 2 python3 bench/multi_gpu.py --check > "$OUT/check.txt" 2>&1
  grep -o '"failures": \[[^]]*\]' "$OUT/check.txt" | head -2; grep -c same_as_cpu "$OUT/check.txt"
  echo "check done at $(( $(date +%s) - T0 )) s"
fi
CUDA_VISIBLE_DEVICES=0 timeout 150 python3 bench/gpu_gemm.py --sizes 8192 16384 --slices 8 auto --bits 50 53 auto \
  --reps 3 --out "$OUT/gpu_gemm" > "$OUT/gpu_gemm.txt" 2>&1; tail -25 "$OUT/gpu_gemm.md"
echo "gemm done at $(( $(date +%s) - T0 )) s"
if [ -n "$SINGLE" ]; then   # one GPU: the largest size instead of the multi-GPU runs
  CUDA_VISIBLE_DEVICES=0 timeout $(left) python3 bench/gpu_gemm.py --sizes 32768 --slices 8 --bits 53 auto \
    --reps 1 --no-phases --samples 12 --out "$OUT/gpu_gemm_32768" > "$OUT/gpu_gemm_32768.txt" 2>&1
  tail -8 "$OUT/gpu_gemm_32768.md"; echo "all done at $(( $(date +%s) - T0 )) s"; exit 0
fi
R="${RUNS:-16384:1x1 20736:1x2 20736:2x1 32768:1x1 32768:1x2 32768:2x1}"
timeout $(left) python3 bench/multi_gpu.py --scheme ozaki2 --bits 53 \
  --machine "2 x NVIDIA H200 (nvidia-h200-x2), Open MPI 4.1.6, CuPy NCCL" --budget $(( $(left) - 45 )) \
  --out "$OUT/multi_gpu_ozaki2" --runs $R > "$OUT/multi_gpu.txt" 2>&1; tail -30 "$OUT/multi_gpu_ozaki2.md"
echo "all done at $(( $(date +%s) - T0 )) s"
