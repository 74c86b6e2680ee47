#!/bin/bash
# One device call for issue 15 (certified "auto" on the H200): GPU tests, then bench/certified_gpu.py.
# Usage (device tool, carry [".tile"]):
#   source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH && bash bench/certified_session.sh [bench args]
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p /tmp/ctc /tmp/ctt
nvidia-smi -L; date -u; git log --oneline -1 2>/dev/null
T0=$(date +%s)
if [ -z "$SKIP_TESTS" ]; then
  timeout ${TEST_S:-300} python3 -m pytest -q -p no:cacheprovider -n ${XDIST:-4} ${TESTS:-tests/test_cutile_engine.py tests/test_pinned_bits.py tests/test_certified.py} -rs 2>&1 | tee "$OUT/tests.txt" | tail -30
fi
echo "tests took $(( $(date +%s) - T0 )) s"
BT=$(( ${BUDGET_S:-540} - $(date +%s) + T0 )); echo "bench budget $BT s"
timeout $BT python3 bench/certified_gpu.py --out "$OUT/certified" "$@" 2>&1 | tee "$OUT/bench.txt"
