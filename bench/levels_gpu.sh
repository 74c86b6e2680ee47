#!/bin/bash
# Levels of scales on a GPU: the GPU tests (CPU == GPU bits, exact dots on CuPy), then the cost
# benchmark at n = 4096 and 16384 (bench/levels_cost.py). Logs under $OUT (default: /tmp/levels_gpu).
# Run from the repository root with PYTHONPATH set to it.
OUT=${OUT:-/tmp/levels_gpu}; mkdir -p "$OUT"
export CUDA_TILE_CACHE_DIR=${CUDA_TILE_CACHE_DIR:-/tmp/tile-cache}
timeout 70 python3 -m pytest -q -x -m gpu -p no:cacheprovider tests/test_levels_gpu.py tests/test_superacc.py \
    > "$OUT/levels_gpu_tests.log" 2>&1; echo "gpu tests rc=$?" | tee -a "$OUT/summary.txt"
tail -3 "$OUT/levels_gpu_tests.log" | tee -a "$OUT/summary.txt"
timeout 95 python3 bench/levels_cost.py --n 4096 16384 --engine cutile --repeat 1 \
    --out "$OUT/levels_cost_h200.md" > "$OUT/levels_cost.log" 2>&1; echo "cost rc=$?" | tee -a "$OUT/summary.txt"
tail -6 "$OUT/levels_cost.log" | tee -a "$OUT/summary.txt"
