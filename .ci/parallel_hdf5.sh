#!/usr/bin/env bash
# Parallel-HDF5 leg of CI: build ONE consistent MPI stack in its own virtual environment
# (Debian's MPICH + parallel HDF5, mpi4py and h5py compiled from source against mpicc.mpich,
# HDF5_MPI=ON) and run tests/test_parallel_hdf5.py in it. The main environment keeps the pip
# MPICH wheel and serial h5py: one process must never load two MPI libraries.
#
#   .ci/parallel_hdf5.sh            build (or reuse) the venv, then run the test
#   OZHPC_PHDF5_VENV=DIR            where the venv goes (default /tmp/ozhpc-phdf5-venv)
#
# About 10 minutes on 2 cores, nearly all of it compiling h5py and mpi4py.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${OZHPC_PHDF5_VENV:-/tmp/ozhpc-phdf5-venv}
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1
start=$SECONDS

pkgs="libhdf5-mpich-dev mpich pkg-config build-essential"
if ! dpkg -s $pkgs >/dev/null 2>&1; then
    apt-get update -q
    apt-get install -y -q --no-install-recommends $pkgs
fi
MPICC=$(command -v mpicc.mpich)
# Versions seen to build and pass here against bookworm's MPICH 4.0.2 / HDF5 1.10.8.
MPI4PY_SPEC=${MPI4PY_SPEC:-mpi4py>=4.0,<4.2}
H5PY_SPEC=${H5PY_SPEC:-h5py>=3.12,<3.17}
pkg-config --exists hdf5-mpich || { echo "parallel_hdf5.sh: pkg-config cannot find hdf5-mpich" >&2; exit 1; }

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import h5py, sys; sys.exit(not h5py.get_config().mpi)' 2>/dev/null; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q -U numpy cython "setuptools>=77" wheel pkgconfig
    # mpi4py against Debian's MPICH (never the pip 'mpich' wheel in this venv).
    MPICC="$MPICC" CC="$MPICC" "$VENV/bin/python" -m pip install -q --no-binary mpi4py --no-build-isolation --no-cache-dir "$MPI4PY_SPEC"
    # h5py against Debian's hdf5-mpich, with MPI support.
    HDF5_MPI=ON HDF5_PKGCONFIG_NAME=hdf5-mpich CC="$MPICC" \
        "$VENV/bin/python" -m pip install -q --no-binary h5py --no-build-isolation --no-cache-dir "$H5PY_SPEC"
fi
# ozhpc itself without its pip dependencies (they would pull the serial h5py wheel back in).
"$VENV/bin/python" -m pip install -q --no-deps .
"$VENV/bin/python" -m pip install -q tqdm pytest pytest-timeout hypothesis
# mpiexec inside the venv must be MPICH's own launcher, matching the library mpi4py links
# (a wrapper, not a symlink: Hydra looks for hydra_pmi_proxy beside the path it was run as).
rm -f "$VENV/bin/mpiexec"
printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v mpiexec.mpich)" > "$VENV/bin/mpiexec"
chmod +x "$VENV/bin/mpiexec"
"$VENV/bin/python" - <<'PY'
import h5py
from mpi4py import MPI
assert h5py.get_config().mpi, "h5py was built without MPI"
print("parallel stack:", MPI.Get_library_version().splitlines()[0].strip(), "| h5py", h5py.__version__,
      "| HDF5", h5py.version.hdf5_version)
PY
echo "parallel_hdf5.sh: stack ready after $((SECONDS - start)) s"

# The test refuses to skip here: in this venv a skip would mean the stack is broken.
OZHPC_REQUIRE_PARALLEL_HDF5=1 PATH="$VENV/bin:$PATH" \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/test_parallel_hdf5.py
echo "parallel_hdf5.sh: done after $((SECONDS - start)) s"
