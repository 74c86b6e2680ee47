#!/bin/bash
# One device call on nvidia-h200 for scheme II (issue 4): the bitwise tests of the CRT, residue and
# "auto"-statistic kernels first, then the launch-shape / CRT-tile and "auto"-statistic sweeps and the
# gemm table with the winners, then the whole GPU suite, then n = 32768 with what is left of BUDGET_S.
# Usage (device tool, carry [".tile"]):
#   source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH && BUDGET_S=500 bash bench/crt_session.sh
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt
mkdir -p /tmp/ctc /tmp/ctt
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-500} - $(date +%s) + T0 )); }
nvidia-smi -L
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_cutile_engine.py \
  -k "crt_combine or gemm_ozaki2_bits or ozaki2 or gap or count or residue or row_stats" -x > "$OUT/crt_tests.txt" 2>&1
tail -3 "$OUT/crt_tests.txt"; echo "crt tests done at $(( $(date +%s) - T0 )) s"
timeout 200 python3 bench/gpu_gemm.py --tune-ozaki2 --tune-stats --tune-size 16384 --sizes 8192 16384 --slices auto \
  --bits 53 auto --reps 3 --out "$OUT/gpu_gemm" > "$OUT/gpu_gemm.txt" 2>&1; tail -30 "$OUT/gpu_gemm.md"
echo "gemm done at $(( $(date +%s) - T0 )) s"
timeout $(( $(left) - 60 )) python3 -m pytest -q -p no:cacheprovider -n 4 -m gpu tests/ -rs \
  > "$OUT/gpu_tests.txt" 2>&1; tail -3 "$OUT/gpu_tests.txt"; echo "suite done at $(( $(date +%s) - T0 )) s"
timeout $(left) python3 bench/gpu_gemm.py --sizes 32768 --slices --bits 53 auto --reps 1 --no-phases \
  --samples 12 --out "$OUT/gpu_gemm_32768" > "$OUT/gpu_gemm_32768.txt" 2>&1
tail -8 "$OUT/gpu_gemm_32768.md"; echo "all done at $(( $(date +%s) - T0 )) s"
