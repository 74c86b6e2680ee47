#!/usr/bin/env bash
# One short device call after a change of the engines or the pipeline: the GPU tests, the
# default's speed table, ranks sharing the GPU (transport auto vs an explicit nccl, the planner's
# scaling check). Usage (device tool, carry [".tile"]):
#   source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH && bash bench/final_gpu_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt OZHPC_CACHE_DIR=/tmp/ozc
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p /tmp/ctc /tmp/ctt
python3 -m compileall -q -j 0 ozhpc > /dev/null 2>&1
T0=$(date +%s)
timeout ${TEST_S:-150} python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_certificate_gpu.py tests/test_pinned_bits.py \
  tests/test_cutile_engine.py tests/test_kernel_store.py tests/test_cache_trust.py 2>&1 | tail -6
echo "== tests $(( $(date +%s) - T0 )) s"
timeout ${BENCH_S:-110} python3 bench/certified_gpu.py --sizes ${SIZES:-16384 32768} --reps 3 --samples 16 --out "$OUT/certified" 2>&1 | tail -14
echo "== bench $(( $(date +%s) - T0 )) s"
D=$(mktemp -d); python3 -m ozhpc gen --shape 4096x4096 --seed 1 $D/in.h5:/A > /dev/null && python3 -m ozhpc gen --shape 4096x4096 --seed 2 $D/in.h5:/B > /dev/null
for T in auto nccl; do
  timeout 60 mpiexec --allow-run-as-root --oversubscribe -n 2 python3 -m ozhpc gemm $D/in.h5:/A $D/in.h5:/B -o $D/out_$T.h5:/C \
    --engine cutile --grid 1x2 --transport $T --progress off --report $D/run_$T.json > $D/log_$T.txt 2>&1
  echo "transport $T: exit $?"; grep -i "error\|transport\|certified" $D/log_$T.txt | grep -v "^-\|root" | head -3
done
timeout ${SCALE_S:-90} python3 bench/scaling.py --engine cutile --n 8192 --ranks 1 2 4 2>&1 | tee "$OUT/scaling_shared_h200.md" | tail -12
echo "== all $(( $(date +%s) - T0 )) s"
