#!/usr/bin/env bash
# One device call for the guarantee levels on the H200: GPU tests, the speed table (default
# "dgemm", "tight", fixed plans, cuBLAS), the certificate's steps, and GEMMul8 beside it.
# Usage (device tool; carry [".tile", ".gemmul8"]: the cuTile toolchain bundle of tools/tile-kit.sh
# and a build kit of GEMMul8's public source, which is not part of this repository):
#   source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH && bash bench/guarantee_session.sh
# STEPS (default "tests bench gemmul8"; also "table", "shared" (bench/scaleout_session.sh MODE=shared),
# "e2e" (bench/e2e_session.sh)), SIZES (default "16384 32768"); writes $OUT/*.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OZHPC_CACHE_DIR=${OZHPC_CACHE_DIR:-/tmp/ozc}
mkdir -p /tmp/ctc /tmp/ctt
STEPS=${STEPS:-tests bench gemmul8}
SIZES=${SIZES:-16384 32768}
nvidia-smi -L; date -u
python3 -m compileall -q -j 0 ozhpc > /dev/null 2>&1
for step in $STEPS; do
  T0=$(date +%s)
  case $step in
    tests)
      timeout ${TEST_S:-240} python3 -m pytest -q -p no:cacheprovider -x -n ${XDIST:-4} \
        ${TESTS:-tests/test_certificate_gpu.py tests/test_pinned_bits.py tests/test_cutile_engine.py} \
        2>&1 | tee "$OUT/tests.txt" | tail -15 ;;
    bench)
      # shellcheck disable=SC2086
      timeout ${BENCH_S:-240} python3 bench/certified_gpu.py --sizes $SIZES --reps 3 --samples 16 \
        --profile 16384 --out "$OUT/certified" 2>&1 | tee "$OUT/bench.txt" | tail -25 ;;
    table)
      timeout ${TABLE_S:-240} python3 bench/certified_gpu.py --sizes --table --table-sizes ${TABLE_SIZES:-4096 8192 16384} \
        --reps 2 --samples 12 --out "$OUT/phi_table" 2>&1 | tee "$OUT/table.txt" | tail -20 ;;
    shared)
      MODE=shared timeout ${SHARED_S:-240} bash bench/scaleout_session.sh 2>&1 | tee "$OUT/shared.txt" | tail -25 ;;
    e2e)
      N="${E2E_N:-16384}" timeout ${E2E_S:-240} bash bench/e2e_session.sh 2>&1 | tail -12 ;;
    gemmul8)
      (bash .gemmul8/build.sh && timeout ${GM8_S:-200} python3 .gemmul8/bench_gemmul8.py --n $SIZES \
        --moduli 14 15 16 --modes accurate) 2>&1 | tee "$OUT/gemmul8.txt" | tail -12 ;;
  esac
  echo "== $step took $(( $(date +%s) - T0 )) s"
done
