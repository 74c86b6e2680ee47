#!/usr/bin/env bash
# The GPU runs of the benchmark suite, in one call: one or more modes, each one bench script
# (bench/README.md says what each measures and which results file holds its latest figures).
#
#   source .tile/tile-env.sh && export PYTHONPATH=$PWD:$PYTHONPATH && MODE="tests accept" bash bench/gpu.sh
#   DRY=1 MODE="tests accept" bash bench/gpu.sh      # print what would run, run nothing (no GPU needed)
#
# MODE: one or more of the modes below, run in that order. Each mode stops at its time limit
# (<MODE>_S seconds, e.g. ACCEPT_S=300) and writes its log to $OUT/<mode>.txt and its results to
# $OUT/<mode>.md / .json; the last lines printed are one row per mode (exit status, seconds).
# Settings per mode (environment): TESTS (pytest arguments), SIZES (accept), TIMELINE, HOSTPROF,
# PAIR_SIZES, PAIR_VARIANTS, PAIR_BIG, CERT_SIZES, TABLE_SIZES, GEMM_ARGS, TRANSFER_GB, E2E_N, E2E_DIR, STARTUP_N,
# MULTI_ARGS, MULTI_MACHINE, WEAK_RUNS, ZGEMM_SIZES, ZGEMM_REPS, ZGEMM_E2E (sizes; empty: none), ZGEMM_E2E_S (its seconds).
# A new mode is one case in run_mode below plus its script (and a line in bench/README.md).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

MODES="tests accept pairs timeline fixed certified table gemm transfer overflow e2e startup shared multi weak crt rows complex levels"
MODE=${MODE:-tests}
OUT=${OUT:-/tmp/out}
DRY=${DRY:-0}

for m in $MODE; do
  case " $MODES " in
    *" $m "*) ;;
    *) echo "bench/gpu.sh: unknown MODE '$m' (known modes: $MODES)" >&2; exit 2 ;;
  esac
done

# GEMMul8's build kit, beside the checkout (../.gemmul8) or in it (.gemmul8): not part of this
# repository; its build.sh writes /tmp/libgm8.so, the ctypes entry point bench/speed/hw_speed.py loads.
GM8=""
for d in ../.gemmul8 .gemmul8; do [ -f "$d/build.sh" ] && { GM8=$d; break; }; done

limit() {   # the mode's time limit in seconds: <MODE>_S, or the default given
  local var
  var="$(echo "$1" | tr '[:lower:]' '[:upper:]')_S"
  echo "${!var:-$2}"
}

step() {   # step SECONDS CMD...: CMD with a time limit, its output appended to the mode's log;
           # a failure is the mode's exit status (MODE_RC), and the mode goes on with its next step
  local secs=$1 rc; shift
  if [ "$DRY" = 1 ]; then echo "  [<= ${secs} s] $*"; return 0; fi
  if [ "$secs" -le 0 ]; then echo "  (no time left for: $*)"; MODE_RC=124; return 124; fi
  echo "\$ $*" >> "$LOG"
  timeout "$secs" "$@" >> "$LOG" 2>&1; rc=$?
  [ "$rc" = 0 ] || { echo "  exit $rc: $*"; MODE_RC=$rc; }
  return "$rc"
}

left() { echo $(( DEADLINE - $(date +%s) )); }

run_mode() {
  case $1 in
    tests)     # the GPU test files (every file with a gpu mark except the slow ranks-sharing-a-GPU one: MODE=shared)
      # shellcheck disable=SC2046,SC2086
      step "$(left)" python3 -m pytest -q -p no:cacheprovider -n 4 -rs \
        ${TESTS:-$(grep -l "pytest.mark.gpu" tests/test_*.py | grep -v test_shared_gpu)} ;;
    accept)    # the acceptance table: cuBLAS DGEMM, the default, fixed bits, "tight", GEMMul8 accurate
      if [ -n "$GM8" ] && [ "$DRY" != 1 ]; then
        for _ in $(seq 60); do
          { [ -f /tmp/libgm8.so ] || grep -q error "$OUT/gemmul8_build.txt" 2>/dev/null; } && break; sleep 2
        done
        tail -3 "$OUT/gemmul8_build.txt" 2>/dev/null
      fi
      local lib=()
      if [ "$DRY" = 1 ]; then [ -n "$GM8" ] && lib=(--gemmul8 /tmp/libgm8.so)
      elif [ -f /tmp/libgm8.so ]; then lib=(--gemmul8 /tmp/libgm8.so); fi
      # shellcheck disable=SC2086
      step "$(left)" python3 bench/speed/hw_speed.py --sizes ${SIZES:-4096 8192 16384 32768} ${lib[@]+"${lib[@]}"} \
        --out "$OUT/accept" ;;
    pairs)     # scheme II's products per pair-kernel variant (compiled in parallel first)
      local v big
      v=${PAIR_VARIANTS:-$(python3 -c "import sys; sys.path.insert(0, 'bench/speed'); from pair_sweep import VARIANTS; \
print(' '.join(k for k, x in VARIANTS.items() if not x.get('big')))")}
      big=${PAIR_BIG-$(python3 -c "import sys; sys.path.insert(0, 'bench/speed'); from pair_sweep import VARIANTS; \
print(' '.join(k for k, x in VARIANTS.items() if x.get('big')))")}
      if [ "$DRY" = 1 ]; then
        echo "  [parallel] python3 bench/speed/pair_sweep.py --warm NAME, for NAME in $v $big"
      else
        for name in $v $big; do python3 bench/speed/pair_sweep.py --warm "$name" >> "$LOG" 2>&1 & done; wait
      fi
      # shellcheck disable=SC2086
      step "$(left)" python3 bench/speed/pair_sweep.py --sizes ${PAIR_SIZES:-16384 32768} --variants $v \
        --out "$OUT/pairs"
      # every modulus in one launch (int32 views of more than 2**31 elements): its own process
      # shellcheck disable=SC2086
      [ -z "$big" ] || step "$(left)" python3 bench/speed/pair_sweep.py --sizes 16384 --variants base $big ;;
    timeline)  # where one default call's time goes (PyTorch's profiler), and cProfile at HOSTPROF
      # shellcheck disable=SC2086
      step "$(left)" python3 bench/speed/hw_speed.py --sizes --timeline ${TIMELINE:-2048 4096 16384} \
        --host-profile "${HOSTPROF:-0}" --out "$OUT/timeline" ;;
    fixed)     # the call's time outside the products: default vs fixed bits, kernels in order, waits, cProfile
      # shellcheck disable=SC2086
      step "$(left)" python3 bench/speed/fixed_costs.py --sizes ${FIXED_SIZES:-2048 4096 8192 16384} \
        --host-profile "${HOSTPROF:-2048}" --kernels ${FIXED_KERNELS:-16384} --out "$OUT/fixed" ;;
    certified) # the certified default against fixed plans and cuBLAS, and the certificate's steps
      # shellcheck disable=SC2086
      step "$(left)" python3 bench/speed/certified_gpu.py --sizes ${CERT_SIZES:-16384 32768} --reps 3 --samples 16 \
        --profile 16384 --out "$OUT/certified" ;;
    table)     # the default product over phi x n
      # shellcheck disable=SC2086
      step "$(left)" python3 bench/speed/certified_gpu.py --sizes --table --table-sizes ${TABLE_SIZES:-4096 8192 16384} \
        --reps 2 --samples 12 --out "$OUT/table" ;;
    gemm)      # both schemes per setting, per phase and per kernel; the tuning sweeps (GEMM_ARGS)
      # shellcheck disable=SC2086
      step "$(left)" python3 bench/speed/gpu_gemm.py ${GEMM_ARGS:---sizes 4096 8192 16384 --slices 6 7 8 auto --bits 53 auto --emulation --reps 3} \
        --out "$OUT/gemm" ;;
    transfer)  # host <-> GPU copy paths for a large operand (TRANSFER_GB)
      step "$(left)" python3 bench/speed/transfer_paths.py --gb "${TRANSFER_GB:-2}" ;;
    levels)    # the cost of levels of scales: 1% of rows needing a second level, against none (LEVELS_SIZES)
      # shellcheck disable=SC2086
      step "$(left)" python3 bench/speed/levels_cost.py --n ${LEVELS_SIZES:-4096 16384} --engine cutile --repeat 2 \
        --out "$OUT/levels" ;;
    overflow)  # the overflow reproducer on both engines, and the default product CPU == GPU
      step "$(left)" python3 bench/accuracy/overflow_check.py ;;
    e2e)       # the ozhpc command end to end, HDF5 in and out, against h5py + cuBLAS
      local dir=${E2E_DIR:-/tmp/ozhpc-e2e}
      [ "$DRY" = 1 ] || mkdir -p "$dir"
      step 60 python3 -m ozhpc info
      # shellcheck disable=SC2086
      OZHPC_CACHE_DIR=$dir/kernel-cache step "$(left)" python3 bench/end_to_end/end_to_end.py --dir "$dir" \
        --n ${E2E_N:-8192 16384} --out "$OUT/e2e.md" --json "$OUT/e2e.json" ;;
    complex)   # ZGEMM: the certified default against cuBLAS ZGEMM, the products' rate beside the real one's,
               # then the complex HDF5 job against h5py + CuPy
      # shellcheck disable=SC2086
      local keep=0; [ -z "${ZGEMM_E2E-8192}" ] || keep=${ZGEMM_E2E_S:-90}   # seconds kept for the HDF5 job
      # shellcheck disable=SC2086
      step "$(( $(left) - keep ))" python3 bench/speed/zgemm_gpu.py --sizes ${ZGEMM_SIZES:-8192 16384 32768} \
        --reps "${ZGEMM_REPS:-3}" ${ZGEMM_KERNELS:+--kernels "$ZGEMM_KERNELS"} --out "$OUT/complex"
      # shellcheck disable=SC2086
      [ -z "${ZGEMM_E2E-8192}" ] || OZHPC_CACHE_DIR=${ZGEMM_E2E_DIR:-/tmp/ozhpc-ze2e}/kernel-cache step "$(left)" \
        python3 bench/end_to_end/complex_e2e.py --dir "${ZGEMM_E2E_DIR:-/tmp/ozhpc-ze2e}" --n ${ZGEMM_E2E-8192} \
        --out "$OUT/complex_e2e.md" --json "$OUT/complex_e2e.json" ;;
    startup)   # where a fresh `ozhpc gemm` process spends its time (cProfile, import times)
      N=${STARTUP_N:-16384} step "$(left)" bash bench/end_to_end/startup_profile.sh ;;
    shared)    # ranks sharing one GPU: their tests, transport auto vs nccl, bench/scaling/scaling.py
      CUDA_VISIBLE_DEVICES=0 step "$(( $(left) / 2 ))" python3 -m pytest -q -p no:cacheprovider -rs tests/test_shared_gpu.py
      CUDA_VISIBLE_DEVICES=0 step "$(left)" python3 bench/scaling/scaling.py --engine cutile --n 8192 --ranks 1 2 4 ;;
    multi)     # 2 or more GPUs (nvidia-h200-x2): the bitwise check, then the SUMMA table (MULTI_ARGS)
      step 150 mpiexec -n 2 python3 bench/scaling/multi_gpu.py --check
      # shellcheck disable=SC2086
      step "$(left)" python3 bench/scaling/multi_gpu.py --machine "${MULTI_MACHINE:-2 x NVIDIA H200}" \
        --budget $(( $(left) - 60 )) --fallback mpi-host --out "$OUT/multi" ${MULTI_ARGS:-} ;;
    weak)      # 2 GPUs: the panel product per local shape alone, then weak scaling three times each
      CUDA_VISIBLE_DEVICES=0 step 150 python3 bench/scaling/local_shapes.py
      # shellcheck disable=SC2086
      step "$(left)" python3 bench/scaling/multi_gpu.py --machine "${MULTI_MACHINE:-2 x NVIDIA H200}" \
        --budget $(( $(left) - 60 )) --out "$OUT/weak" --runs ${WEAK_RUNS:-16384:1x1 20736:1x2 20736:2x1 16384:1x1 20736:1x2 20736:2x1 16384:1x1 20736:1x2 20736:2x1} ;;
    crt)       # the CRT kernel alone: moduli per load x occupancy
      step "$(left)" python3 bench/speed/crt_kernel.py --out "$OUT/crt" ;;
    rows)      # the row-summary kernel alone: tile x occupancy along rows, transposed and complex rows
      # shellcheck disable=SC2086
      step "$(left)" python3 bench/speed/row_summary_kernel.py ${ROWS_VARIANTS:+--variants $ROWS_VARIANTS} --out "$OUT/rows" ;;
  esac
}

default_limit() {   # seconds per mode unless <MODE>_S says otherwise
  case $1 in
    tests|accept|gemm|e2e|startup|complex) echo 300 ;; pairs) echo 260 ;; certified|table) echo 240 ;;
    timeline|fixed|crt|rows|levels) echo 150 ;; transfer|overflow) echo 120 ;; shared|multi|weak) echo 420 ;;
  esac
}

if [ "$DRY" = 1 ]; then
  echo "DRY=1: MODE=\"$MODE\", OUT=$OUT, GEMMul8 kit: ${GM8:-none}"
else
  mkdir -p "$OUT" /tmp/ctc /tmp/ctt /tmp/ozc && chmod 700 /tmp/ctc /tmp/ozc
  export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 CUDA_TILE_CACHE_DIR=/tmp/ctc CUDA_TILE_TEMP_DIR=/tmp/ctt
  export OZHPC_CACHE_DIR=${OZHPC_CACHE_DIR:-/tmp/ozc}
  # a GPU node that runs as root with Open MPI's mpiexec: the SUMMA tests' mpiexec refuses root without these
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # GEMMul8's build runs beside the first modes (only accept reads it)
  case " $MODE " in *" accept "*) [ -n "$GM8" ] && (bash "$GM8/build.sh" > "$OUT/gemmul8_build.txt" 2>&1 &) ;; esac
  # byte-compiled modules, as `pip install` leaves them
  python3 -m compileall -q -j 0 ozhpc $(python3 -c 'import cuda.tile, os; print(os.path.dirname(cuda.tile.__file__))' 2> /dev/null) > /dev/null 2>&1
  date -u; git log --oneline -1 2>/dev/null
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
fi

SUMMARY=()
STATUS=0
for m in $MODE; do
  secs=$(limit "$m" "$(default_limit "$m")")
  T0=$(date +%s); DEADLINE=$(( T0 + secs )); LOG="$OUT/$m.txt"
  echo "== $m (<= $secs s, log $LOG)"
  MODE_RC=0; run_mode "$m"; rc=$MODE_RC
  [ "$DRY" = 1 ] || grep -v '^{' "$LOG" 2>/dev/null | tail -n "${TAIL:-30}"
  SUMMARY+=("| $m | $rc | $(( $(date +%s) - T0 )) |")
  [ "$rc" = 0 ] || STATUS=1
done
echo; echo "| mode | exit | s |"; echo "|---|---|---|"; printf '%s\n' "${SUMMARY[@]}"
exit $STATUS
