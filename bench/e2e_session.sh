#!/usr/bin/env bash
# End-to-end benchmark on one H200 (issue: the whole job at disk and GPU speed), in one device call.
# Usage (device tool, carry [".tile"]; the toolchain bundle made by tools/tile-kit.sh):
#   source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH && bash bench/e2e_session.sh
# Writes $OUT/end_to_end_h200.md and .json (the table for bench/results/) and the logs.
# Inputs go to local disk ($E2E_DIR, default /tmp/ozhpc-e2e); N="8192 16384" by default.
set -uo pipefail
OUT="${OUT:-$PWD/e2e-out}"
E2E_DIR="${E2E_DIR:-/tmp/ozhpc-e2e}"
N="${N:-8192 16384}"
mkdir -p "$OUT" "$E2E_DIR"
# byte-compiled modules, as `pip install` leaves them (the nodes set no __pycache__ otherwise)
python3 -m compileall -q -j 0 ozhpc $(python3 -c 'import cuda.tile, os; print(os.path.dirname(cuda.tile.__file__))' 2> /dev/null) > /dev/null
export OZHPC_CACHE_DIR="${OZHPC_CACHE_DIR:-$E2E_DIR/kernel-cache}"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  df -h "$E2E_DIR" | tail -1
  python3 -m ozhpc info
} > "$OUT/env.txt" 2>&1
# shellcheck disable=SC2086
python3 bench/end_to_end.py --dir "$E2E_DIR" --n $N --out "$OUT/end_to_end_h200.md" \
  --json "$OUT/end_to_end_h200.json" 2> "$OUT/end_to_end.log"
rc=$?
cat "$OUT/end_to_end_h200.md" 2>/dev/null || tail -40 "$OUT/end_to_end.log"
exit $rc
