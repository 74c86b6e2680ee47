#!/usr/bin/env bash
# One device call for the hardware-speed work: GEMMul8's build (background), the GPU tests, the pair-kernel
# sweep, the timeline of one default call per size and the acceptance table (bench/hw_speed.py).
# Usage (device tool; carry [".tile", ".<checkout copy>", ".gemmul8"], from the checkout holding them):
#   source .tile/tile-env.sh && cd .<checkout copy> && export PYTHONPATH=$PWD:$PYTHONPATH && \
#     STEPS="tests accept" bash bench/hw_speed_session.sh
# STEPS (default "tests accept"; also "timeline", "pairs"), SIZES (accept), TIMELINE, HOSTPROF, PAIR_SIZES,
# PAIR_VARIANTS, TESTS; everything it writes goes to $OUT (a few files: the device returns at most 8).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt OZHPC_CACHE_DIR=/tmp/ozc
# the GPU machine runs as root with Open MPI's mpiexec: the SUMMA tests' mpiexec refuses root without these
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p /tmp/ctc /tmp/ctt /tmp/ozc && chmod 700 /tmp/ctc /tmp/ozc
T0=$(date +%s)
GM8=../.gemmul8
if [ -x $GM8/build.sh ]; then (bash $GM8/build.sh > "$OUT/gemmul8_build.txt" 2>&1 &); fi
python3 -m compileall -q -j 0 ozhpc > /dev/null 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
for step in ${STEPS:-tests accept}; do
  case $step in
    tests)
      timeout ${TEST_S:-200} python3 -m pytest -q -p no:cacheprovider -n 4 \
        ${TESTS:-tests/test_certificate_gpu.py tests/test_pinned_bits.py tests/test_cutile_engine.py} 2>&1 | tail -8 ;;
    pairs)
      V=${PAIR_VARIANTS:-$(python3 -c "import sys; sys.path.insert(0, 'bench'); from pair_sweep import VARIANTS; \
print(' '.join(k for k, v in VARIANTS.items() if not v.get('big')))")}
      BIG=${PAIR_BIG-$(python3 -c "import sys; sys.path.insert(0, 'bench'); from pair_sweep import VARIANTS; \
print(' '.join(k for k, v in VARIANTS.items() if v.get('big')))")}
      for v in $V $BIG; do python3 bench/pair_sweep.py --warm $v > /tmp/warm_$v.txt 2>&1 & done; wait
      tail -q -n 2 /tmp/warm_*.txt | grep -v "^$" | tr '\n' ';'; echo
      echo "== warm done at $(( $(date +%s) - T0 )) s"
      timeout ${PAIR_S:-200} python3 bench/pair_sweep.py --sizes ${PAIR_SIZES:-16384 32768} --variants $V \
        --out "$OUT/pairs" 2>&1 | grep -v "^{" | tail -50
      # every modulus in one launch (int32 views of more than 2**31 elements): its own process
      [ -n "$BIG" ] && timeout 60 python3 bench/pair_sweep.py --sizes 16384 --variants base $BIG 2>&1 | grep -v "^{" | tail -6 ;;
    timeline)
      timeout ${TL_S:-150} python3 bench/hw_speed.py --sizes --timeline ${TIMELINE:-2048 4096 16384} \
        --host-profile ${HOSTPROF:-0} --out "$OUT/timeline" 2>&1 | grep -v "^{" | tail -40 ;;
    accept)
      for i in $(seq 60); do [ -f /tmp/libgm8.so ] || grep -q error "$OUT/gemmul8_build.txt" 2>/dev/null && break; sleep 2; done
      tail -3 "$OUT/gemmul8_build.txt" 2>/dev/null
      LIB=""; [ -f /tmp/libgm8.so ] && LIB="--gemmul8 /tmp/libgm8.so"
      timeout ${ACC_S:-300} python3 bench/hw_speed.py --sizes ${SIZES:-4096 8192 16384 32768} $LIB --out "$OUT/accept" 2>&1 \
        | grep -v "^{" | tail -40 ;;
  esac
  echo "== $step done at $(( $(date +%s) - T0 )) s"
done
