#!/usr/bin/env bash
# Where a fresh `ozhpc gemm` process spends its time before and around the kernels (H200, one call).
# Usage: MODE=startup bash bench/gpu.sh (bench/README.md); its scratch files stay in $E2E_DIR.
# Prints cProfile's top entries (cumulative) of a warm-cache run at n = $N (default 16384),
# scheme II "auto", and `python -X importtime`'s slowest imports.
set -uo pipefail
DIR="${E2E_DIR:-/tmp/ozhpc-e2e}"; N="${N:-16384}"
mkdir -p "$DIR"
# byte-compiled modules, as `pip install` leaves them (the nodes set no __pycache__ otherwise)
python3 -m compileall -q -j 0 ozhpc $(python3 -c 'import cuda.tile, os; print(os.path.dirname(cuda.tile.__file__))' 2> /dev/null) > /dev/null
export OZHPC_CACHE_DIR="$DIR/kernel-cache" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
IN="$DIR/in_$N.h5"
t0=$(date +%s.%N)
[ -f "$IN" ] || { python3 -m ozhpc gen --phi 0.5 --shape ${N}x${N} --seed 1 "$IN:/A" && \
                  python3 -m ozhpc gen --phi 0.5 --shape ${N}x${N} --seed 2 "$IN:/B"; }
echo "inputs ready"
python3 -m ozhpc warmup > "$DIR/warmup.txt" 2>&1; tail -2 "$DIR/warmup.txt"
run() { rm -f "$DIR/c.h5" "$DIR/r.json"; /usr/bin/time -f "wall %e s, maxrss %M KB" python3 "$@" "$IN:/A" "$IN:/B" -o "$DIR/c.h5:/C" \
          --engine cutile --scheme ozaki2 --report "$DIR/r.json" > "$DIR/run.log" 2>&1; grep -E "seconds|wall|rror|certified" "$DIR/run.log"; }
echo "== first run (compiles the n-specific variants)"; run -m ozhpc gemm
echo "== second run (warm cache)"; run -m ozhpc gemm
python3 -c "import json; r=json.load(open('$DIR/r.json')); print({k: r[k] for k in ('phases','certified','bits') if k in r})"
echo "== cProfile, warm cache"; run -m cProfile -o "$DIR/gemm.prof" -m ozhpc gemm
python3 - "$DIR/gemm.prof" > "$DIR/pstats.txt" <<'PY'
import pstats, sys
s = pstats.Stats(sys.argv[1]); s.sort_stats("cumulative").print_stats(90)
s.sort_stats("tottime").print_stats(30)
PY
head -c 6000 "$DIR/pstats.txt"
echo "== import time"; python3 -X importtime -m ozhpc --help 2> "$DIR/importtime.txt" >/dev/null
sort -t'|' -k2 -n -r "$DIR/importtime.txt" | head -12
