#!/bin/bash
# Device session for issue 25 (what a device call runs; results under $OUT). Usage (carry [".tile"]):
#   source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH && MODE=shared bash bench/scaleout_session.sh
# MODE=shared (nvidia-h200, one GPU): ranks sharing the GPU -- the GPU tests (2 and 4 ranks, both
#   schemes and wires, certified auto with extra passes, bits of one rank), `ozhpc gemm --engine cutile`
#   on 2 ranks with transport auto (must not pick NCCL) and nccl (one line, exit 2), then
#   bench/scaling.py --engine cutile (1, 2, 4 ranks on the GPU against the planner).
# MODE=x2 (nvidia-h200-x2): scheme II on 1x1 / 1x2 / 2x1 at n = 16384, 23170, 32768, both wires
#   (bench/multi_gpu.py), and the planner's prediction of each.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 CUDA_TILE_CACHE_DIR=${CUDA_TILE_CACHE_DIR:-/tmp/ctc}
mkdir -p "$CUDA_TILE_CACHE_DIR"
[ -d tilecache ] && cp -r tilecache/. "$CUDA_TILE_CACHE_DIR"/ 2>/dev/null
T0=$(date +%s)
nvidia-smi -L; mpiexec --version | head -1
ROOT=""; [ "$(id -u)" = 0 ] && mpiexec --version | grep -qE "Open MPI|OpenRTE" && ROOT="--allow-run-as-root --oversubscribe"
if [ "${MODE:-shared}" = shared ]; then
  export CUDA_VISIBLE_DEVICES=0
  timeout 400 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_shared_gpu.py -rs 2>&1 | tail -15
  echo "tests done at $(( $(date +%s) - T0 )) s"
  D=$(mktemp -d); python3 -m ozhpc gen --shape 4096x4096 --seed 1 $D/in.h5:/A && python3 -m ozhpc gen --shape 4096x4096 --seed 2 $D/in.h5:/B
  for T in auto nccl; do
    timeout 120 mpiexec $ROOT -n 2 python3 -m ozhpc gemm $D/in.h5:/A $D/in.h5:/B -o $D/out_$T.h5:/C --engine cutile \
      --grid 1x2 --transport $T --progress off --report $D/run_$T.json > $D/log_$T.txt 2>&1
    echo "transport $T: exit $?"; grep -v -i "root\|^---\|^$" $D/log_$T.txt | tail -5
    if [ -f $D/run_$T.json ]; then python3 -c "import json; r = json.load(open('$D/run_$T.json')); print(r['transport'], '|', r['transport_reason'], '|', r['wire'], r['sha256'])"; fi
  done
  timeout 300 python3 bench/scaling.py --engine cutile --n 8192 --ranks 1 2 4 2>&1 | tee "$OUT/scaling_shared_h200.md"
  echo "scaling done at $(( $(date +%s) - T0 )) s"
else
  for W in fp64 planes; do
    timeout 260 python3 bench/multi_gpu.py --scheme ozaki2 --bits auto --wire $W --fallback mpi-host \
      --machine "2 x NVIDIA H200 (nvidia-h200-x2)" --budget 220 --out "$OUT/multi_gpu_h200x2_ozaki2_$W" \
      --runs 16384:1x1 23170:1x2 23170:2x1 32768:1x1 32768:1x2 32768:2x1 2>&1 | tail -25
    for S in 16384:1 23170:2 32768:1 32768:2; do
      python3 -m ozhpc plan --m ${S%:*} --n ${S%:*} --k ${S%:*} --gpus ${S#*:} --gpu h200 --scheme ozaki2 --wire $W | head -4
    done
  done
fi
mkdir -p "$OUT/tilecache" && cp -r "$CUDA_TILE_CACHE_DIR"/. "$OUT/tilecache"/ 2>/dev/null; du -sh "$OUT/tilecache"
