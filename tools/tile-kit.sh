#!/usr/bin/env bash
# Pack a cuTile toolchain for a GPU node that has no package index and whose CUDA is older
# than 13.3 (cuTile on Hopper, sm_90, needs tileiras >= 13.3; Blackwell >= 13.1).
#
# Where pip works, `pip install ".[gpu]"` is all a node needs (cuda-tile[tileiras] brings
# tileiras, ptxas and libnvvm as wheels, found without CUDA_HOME). Otherwise run this once,
# from a checkout, on any x86_64 Linux machine with pip and network access:
#     bash tools/tile-kit.sh                 # -> .tile/ (about 60 MB, ignored by git)
# then copy the checkout (with .tile/) to the cluster and, on the GPU node:
#     source tools/tile-env.sh               # or .tile/tile-env.sh
#
# What it packs: tileiras (nvidia-cuda-tileiras), ptxas (nvidia-cuda-nvcc) and libnvvm
# (nvidia-nvvm) of one CUDA release, xz-compressed, and the cuda-tile wheel for the node's
# Python. Knobs: CT_VER (cuda-tile), CTK_VER (the three NVIDIA wheels; one release for all
# three), PYVER (the node's Python, default the one running this script).
set -euo pipefail
CT_VER="${CT_VER:-1.7.0}"
CTK_VER="${CTK_VER:-13.4.92}"
PYVER="${PYVER:-$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(git -C "$here" rev-parse --show-toplevel)"
kit="$root/.tile"
if [ -f "$kit/tiletool.tar.xz" ] && ls "$kit"/cuda_tile-"$CT_VER"-*.whl >/dev/null 2>&1; then
  cp "$here/tile-env.sh" "$kit/"
  echo "toolchain bundle already in $kit"
  exit 0
fi
mkdir -p "$kit"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_12_x86_64 manylinux2010_x86_64; do
  platforms+=(--platform "$p")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
  "${platforms[@]}" -d "$work/wheels" \
  "cuda-tile==$CT_VER" "nvidia-cuda-tileiras==$CTK_VER" "nvidia-cuda-nvcc==$CTK_VER" "nvidia-nvvm==$CTK_VER"
mkdir -p "$work/kit/bin" "$work/kit/lib"
unzip -q -j -o "$work"/wheels/nvidia_cuda_tileiras-*.whl 'nvidia/cu13/bin/tileiras' -d "$work/kit/bin"
unzip -q -j -o "$work"/wheels/nvidia_cuda_nvcc-*.whl 'nvidia/cu13/bin/ptxas' -d "$work/kit/bin"
unzip -q -j -o "$work"/wheels/nvidia_nvvm-*.whl 'nvidia/cu13/lib/libnvvm.so.4' -d "$work/kit/lib"
chmod +x "$work/kit/bin/"*
echo "compressing the toolchain (minutes on a small machine)..."
tar -C "$work/kit" -cf - bin lib | xz -T0 -9e > "$kit/tiletool.tar.xz"
cp "$work"/wheels/cuda_tile-"$CT_VER"-*.whl "$kit/"
cp "$here/tile-env.sh" "$kit/"
du -sh "$kit"
