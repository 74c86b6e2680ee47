#!/bin/bash
# One device call on nvidia-h200 for the "auto" statistic kernels (issue 4): their bitwise tests,
# the tile/grid sweep at 16384 and the scheme II table at 16384 with the winner.
# Usage (device tool, carry [".tile"]):
#   source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH && bash bench/stats_session.sh
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt
mkdir -p /tmp/ctc /tmp/ctt
T0=$(date +%s)
nvidia-smi -L
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_cutile_engine.py \
  -k "gap or row_stats or spread or auto" -x > "$OUT/stats_tests.txt" 2>&1
tail -3 "$OUT/stats_tests.txt"; echo "tests done at $(( $(date +%s) - T0 )) s"
timeout 240 python3 bench/gpu_gemm.py --tune-stats --tune-size 16384 --sizes 16384 --slices \
  --bits 53 auto --reps 3 --out "$OUT/gpu_gemm" > "$OUT/gpu_gemm.txt" 2>&1; tail -45 "$OUT/gpu_gemm.md"
echo "all done at $(( $(date +%s) - T0 )) s"
