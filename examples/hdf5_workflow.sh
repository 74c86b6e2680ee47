#!/usr/bin/env bash
# The HDF5 workflow end to end: generate inputs, multiply with `ozhpc gemm` on one process,
# run the same product from a job file on 2 MPI ranks (when mpiexec is there), check that
# both wrote the same bits (report SHA-256), and check C against the exact product.
#
#   examples/hdf5_workflow.sh [DIR]        (default: a new temporary directory)
#   OZHPC="python -m ozhpc" examples/hdf5_workflow.sh    # without the ozhpc script on PATH
set -euo pipefail
DIR=${1:-$(mktemp -d -t ozhpc-workflow.XXXXXX)}
OZHPC=${OZHPC:-ozhpc}
N=${N:-96}
mkdir -p "$DIR"
cd "$DIR"
echo "working in $DIR"

run() { echo "\$ $*"; "$@"; }

run $OZHPC gen --phi 1 --shape ${N}x$((N + 20)) --seed 1 --force in.h5:/A
run $OZHPC gen --phi 1 --shape $((N + 20))x$((N - 10)) --seed 2 --force in.h5:/B
run $OZHPC gemm in.h5:/A in.h5:/B -o gemm.h5:/C --force --report gemm.json --progress off

cat > job.toml <<TOML
# paths are relative to this file
[inputs]
a = "in.h5:/A"
b = "in.h5:/B"
[output]
c = "job.h5:/C"
report = "job.json"
force = true
[layout]
grid = "auto"
block = 16
[run]
progress = "log"
TOML
if command -v mpiexec >/dev/null; then
    run mpiexec -n 2 $OZHPC run job.toml
else
    run $OZHPC run job.toml
fi

sha() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["sha256"])' "$1"; }
if [ "$(sha gemm.json)" != "$(sha job.json)" ]; then
    echo "DIFFERENT: gemm.json and job.json have different SHA-256" >&2
    exit 1
fi
echo "bitwise equal: one process (gemm.json) and the job file run (job.json): sha256 $(sha job.json)"
run $OZHPC check job.h5:/C --a in.h5:/A --b in.h5:/B --samples 32
