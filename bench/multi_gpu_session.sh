#!/bin/bash
# Device session for issue 6 (nvidia-h200-x2). MODE=check: GPU tests + multi-GPU bitwise smoke
# + one short timing; MODE=bench: the benchmark table; MODE=weak: the panel product per local
# shape without communication (bench/local_shapes.py), then the weak-scaling runs three times each
# with both 2-GPU orientations. Usage (device tool, carry [".tile"]):
#   source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 \
#     && MODE=bench bash bench/multi_gpu_session.sh 2>&1 | tee $OUT/log.txt
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 CUDA_TILE_CACHE_DIR=${CUDA_TILE_CACHE_DIR:-/tmp/ctc} CUDA_TILE_TEMP_DIR=/tmp/ctt
mkdir -p "$CUDA_TILE_CACHE_DIR" /tmp/ctt
[ -d tilecache ] && cp -r tilecache/. "$CUDA_TILE_CACHE_DIR"/ 2>/dev/null   # compiles from an earlier call
T0=$(date +%s)
nvidia-smi -L; mpiexec --version | head -1
python3 -c "import cupy; from cupy.cuda import nccl; print('cupy', cupy.__version__, 'nccl', nccl.get_version()); from mpi4py import MPI; print('cuda-aware MPI:', getattr(MPI,'Query_cuda_support',lambda:None)())"
ROOT=""; [ "$(id -u)" = 0 ] && mpiexec --version | grep -qE "Open MPI|OpenRTE" && ROOT=--allow-run-as-root
if [ "${MODE:-check}" = check ]; then
  mpiexec $ROOT -n 2 python3 -m ozhpc info
  timeout 150 mpiexec $ROOT -n 2 python3 bench/multi_gpu.py --check 2>&1 | grep -v -i "root\|^---\|^$" | tail -c 3000
  echo "check done at $(( $(date +%s) - T0 )) s"
  timeout 100 python3 bench/multi_gpu.py --runs 8192:1x1 8192:1x2 16384:1x2 --machine "2 x H200 (nvidia-h200-x2)" --out "$OUT/short" 2>&1 | tail -30
  echo "short timing done at $(( $(date +%s) - T0 )) s"
  timeout ${TEST_S:-120} python3 -m pytest -q -p no:cacheprovider -n 4 -m gpu tests/ -rs 2>&1 | tail -15
  echo "tests done at $(( $(date +%s) - T0 )) s"
elif [ "$MODE" = weak ]; then
  CUDA_VISIBLE_DEVICES=0 timeout 150 python3 bench/local_shapes.py 2>&1 | tee "$OUT/local_shapes.md"
  echo "local shapes done at $(( $(date +%s) - T0 )) s"
  R="16384:1x1 20736:1x2 20736:2x1"
  timeout $(( ${BUDGET_S:-420} - $(date +%s) + T0 )) python3 bench/multi_gpu.py \
     --machine "2 x NVIDIA H200 (nvidia-h200-x2), Open MPI 4.1.6, CuPy NCCL" --budget $(( ${BUDGET_S:-420} - 60 - $(date +%s) + T0 )) \
     --out "$OUT/multi_gpu_weak" --runs $R $R $R 2>&1 | tail -30
  echo "weak done at $(( $(date +%s) - T0 )) s"
else
  timeout 100 mpiexec $ROOT -n 2 python3 bench/multi_gpu.py --check 2>&1 | grep -v -i "root\|^---\|^$" | tail -c 2500
  echo "check done at $(( $(date +%s) - T0 )) s"
  timeout ${BUDGET_S:-420} python3 bench/multi_gpu.py --machine "2 x NVIDIA H200 (nvidia-h200-x2), Open MPI 4.1.6, CuPy NCCL" \
     --budget $(( ${BUDGET_S:-420} - 90 )) --fallback mpi-host --out "$OUT/multi_gpu_h200x2" ${BENCH_ARGS} 2>&1 | tail -60
  echo "bench done at $(( $(date +%s) - T0 )) s"
fi
mkdir -p "$OUT/tilecache" && cp -r "$CUDA_TILE_CACHE_DIR"/. "$OUT/tilecache"/ 2>/dev/null; du -sh "$OUT/tilecache"
