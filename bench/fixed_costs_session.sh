#!/usr/bin/env bash
# One device call for the fixed costs and the certificate (issue 30): the GPU tests of what they
# touch, the timeline of one default call per size (bench/hw_speed.py --timeline) and the CRT
# kernel's variants (bench/crt_kernel.py; compiled in the background while the tests run).
# Usage (device tool; carry [".tile", ".dev-X"]):
#   source .tile/tile-env.sh && cd .dev-X && export PYTHONPATH=$PWD:$PYTHONPATH && bash bench/fixed_costs_session.sh
# TESTS, TEST_K, TIMELINE, VARIANTS, CRT_N and the *_S time limits override the defaults.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt OZHPC_CACHE_DIR=/tmp/ozc
# the GPU machine runs as root with Open MPI: its mpiexec refuses root without these
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p /tmp/ctc /tmp/ctt /tmp/ozc && chmod 700 /tmp/ctc /tmp/ozc
T0=$(date +%s)
python3 -m compileall -q -j 0 ozhpc > /dev/null 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
git log --oneline -1 2>/dev/null || true
VARIANTS=${VARIANTS:-1:4 2:4 4:2 8:2}
(python3 bench/crt_kernel.py --warm --variants $VARIANTS > "$OUT/crt_warm.txt" 2>&1 &)
TESTS=${TESTS:-tests/test_certificate_gpu.py tests/test_host_round_trips.py tests/test_cutile_engine.py tests/test_pinned_bits.py}
timeout ${TEST_S:-150} python3 -m pytest -q -p no:cacheprovider -n 4 -k "${TEST_K:-not summa}" $TESTS > "$OUT/tests.txt" 2>&1
tail -25 "$OUT/tests.txt"
echo "== tests done at $(( $(date +%s) - T0 )) s"
for i in $(seq 60); do grep -q '"group"' "$OUT/crt_warm.txt" 2>/dev/null && [ $(grep -c '"group"' "$OUT/crt_warm.txt") -ge $(( 2 * $(echo $VARIANTS | wc -w) )) ] && break; sleep 1; done
timeout ${TL_S:-120} python3 bench/hw_speed.py --sizes --timeline ${TIMELINE:-2048 4096 16384} --host-profile ${HOSTPROF:-2048} \
  --out "$OUT/timeline" > "$OUT/timeline.txt" 2>&1
grep -v "^{" "$OUT/timeline.txt" | grep -E "^n=|tottime|cumtime|ozhpc|cupy|cuda" | head -60
echo "== timeline done at $(( $(date +%s) - T0 )) s"
timeout ${CRT_S:-60} python3 bench/crt_kernel.py --n ${CRT_N:-16384} --variants $VARIANTS --out "$OUT/crt" 2>&1 | tee "$OUT/crt.txt"
cat "$OUT/crt_warm.txt" | tail -3
echo "== crt done at $(( $(date +%s) - T0 )) s"
