#!/bin/bash
# One device call: GPU tests, SASS check of the pair kernels, then the benchmark.
# Usage (device tool, carry [".tile"]): source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH && bash bench/gpu_session.sh [bench args]
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt
mkdir -p /tmp/ctc /tmp/ctt
nvidia-smi -L; pwd
python3 -c "import cupy, cuda.tile as ct; print('cupy', cupy.__version__, 'cuda.tile', ct.__version__ if hasattr(ct,'__version__') else '?')"
T0=$(date +%s)
if [ -z "$SKIP_TESTS" ]; then
  timeout 420 python3 -m pytest -q -p no:cacheprovider -n ${XDIST:-4} tests/test_cutile_typecheck.py tests/test_cutile_engine.py -rs 2>&1 | tee "$OUT/tests.txt" | tail -40
fi
echo "tests took $(( $(date +%s) - T0 )) s"
# SASS of the compiled kernels (cubins kept in the temp/cache dirs)
( for f in $(find /tmp/ctt /tmp/ctc -type f \( -name '*.cubin' -o -size +20k \) ! -name 'probe*' 2>/dev/null | head -20); do
    if cuobjdump -sass "$f" > /tmp/sass.txt 2>/dev/null; then
      echo "== $f: $(grep -m1 -o 'Function : [^ ]*' /tmp/sass.txt | head -c 120)"
      echo "   IGMMA=$(grep -c IGMMA /tmp/sass.txt) HGMMA=$(grep -c HGMMA /tmp/sass.txt) UTMALDG=$(grep -c UTMALDG /tmp/sass.txt) LDG=$(grep -c 'LDG' /tmp/sass.txt) STL=$(grep -c 'STL' /tmp/sass.txt) LDL=$(grep -c 'LDL' /tmp/sass.txt) DFMA=$(grep -c DFMA /tmp/sass.txt) lines=$(wc -l < /tmp/sass.txt)"
      cuobjdump -res-usage "$f" 2>/dev/null | grep -i "REG\|STACK" | head -3
    fi
  done ) 2>&1 | tee "$OUT/sass.txt"
T1=$(date +%s)
BT=$(( ${BUDGET_S:-560} - $(date +%s) + T0 )); echo "bench budget $BT s"
timeout $BT python3 bench/gpu_gemm.py --out "$OUT/gpu_gemm" "$@" 2>&1 | tee "$OUT/bench.txt"
echo "bench took $(( $(date +%s) - T1 )) s"
if [ -n "$EXTRA_ARGS" ]; then
  BT=$(( ${BUDGET_S:-560} - $(date +%s) + T0 )); echo "extra bench budget $BT s"
  [ $BT -gt 30 ] && timeout $BT python3 bench/gpu_gemm.py --out "$OUT/gpu_gemm_extra" $EXTRA_ARGS 2>&1 | tee "$OUT/bench_extra.txt"
fi
