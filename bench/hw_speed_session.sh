#!/usr/bin/env bash
# One device call for the hardware-speed work: GEMMul8's build (background), the GPU tests, the
# timeline of one default call per size and the acceptance table (bench/hw_speed.py).
# Usage (device tool; carry [".tile", ".gpuwt", ".gemmul8"], from the checkout holding them):
#   source .tile/tile-env.sh && cd .gpuwt && export PYTHONPATH=$PWD:$PYTHONPATH && bash bench/hw_speed_session.sh
# STEPS (default "timeline accept"; also "tests"), SIZES, TIMELINE, HOSTPROF; caches in /tmp,
# packed to $OUT/caches.tar and unpacked from $CACHES when given (same machine image).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt OZHPC_CACHE_DIR=/tmp/ozc
mkdir -p /tmp/ctc /tmp/ctt /tmp/ozc && chmod 700 /tmp/ctc /tmp/ozc
[ -n "${CACHES:-}" ] && [ -f "$CACHES" ] && tar -xf "$CACHES" -C / 2>/dev/null && echo "caches unpacked"
T0=$(date +%s)
GM8=../.gemmul8
if [ -x $GM8/build.sh ]; then (bash $GM8/build.sh > "$OUT/gemmul8_build.txt" 2>&1 &); fi
python3 -m compileall -q -j 0 ozhpc > /dev/null 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
for step in ${STEPS:-timeline accept}; do
  case $step in
    tests)
      timeout ${TEST_S:-200} python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_certificate_gpu.py tests/test_pinned_bits.py \
        tests/test_cutile_engine.py 2>&1 | tail -8 ;;
    timeline)
      timeout ${TL_S:-150} python3 bench/hw_speed.py --sizes --timeline ${TIMELINE:-2048 4096 16384} \
        --host-profile ${HOSTPROF:-2048} --out "$OUT/timeline" 2>&1 | tee "$OUT/timeline.txt" | grep -v "^{" | tail -60 ;;
    accept)
      for i in $(seq 60); do [ -f /tmp/libgm8.so ] || grep -q error "$OUT/gemmul8_build.txt" 2>/dev/null && break; sleep 2; done
      cat "$OUT/gemmul8_build.txt" 2>/dev/null | tail -3
      LIB=""; [ -f /tmp/libgm8.so ] && LIB="--gemmul8 /tmp/libgm8.so"
      timeout ${ACC_S:-240} python3 bench/hw_speed.py --sizes ${SIZES:-4096 8192 16384} $LIB --out "$OUT/accept" 2>&1 \
        | tee "$OUT/accept.txt" | grep -v "^{" | tail -30 ;;
  esac
  echo "== $step done at $(( $(date +%s) - T0 )) s"
done
tar -cf "$OUT/caches.tar" /tmp/ctc /tmp/ozc 2>/dev/null; ls -la "$OUT/caches.tar"
