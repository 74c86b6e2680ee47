# Source (bash) on the GPU node, from the checkout that holds .tile/ (made by tools/tile-kit.sh):
#     source tools/tile-env.sh          (or .tile/tile-env.sh, a copy)
# Unpacks the toolchain once into $TILE_ROOT (default /opt/tile, or ~/.cache/ozhpc/tile when
# /opt is not writable), installs the bundled cuda-tile wheel there, and puts both first on
# PATH / PYTHONPATH. CUDA_HOME and CUDA_PATH are unset: with tileiras found on PATH, cuda-tile
# passes them on to tileiras, which would then pick the node's older ptxas and libnvvm.
_tile_repo="$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
_tile_kit="$_tile_repo/.tile"
if [ -z "${TILE_ROOT:-}" ]; then
  if mkdir -p /opt/tile 2>/dev/null && [ -w /opt/tile ]; then TILE_ROOT=/opt/tile; else TILE_ROOT="$HOME/.cache/ozhpc/tile"; fi
fi
if [ ! -f "$_tile_kit/tiletool.tar.xz" ]; then
  echo "tile-env.sh: no bundle in $_tile_kit (run tools/tile-kit.sh where pip works)" >&2
else
  if [ ! -x "$TILE_ROOT/bin/tileiras" ]; then
    mkdir -p "$TILE_ROOT" && tar -xJf "$_tile_kit/tiletool.tar.xz" -C "$TILE_ROOT"
  fi
  if [ ! -d "$TILE_ROOT/site/cuda/tile" ]; then
    python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade \
      --target "$TILE_ROOT/site" "$_tile_kit"/cuda_tile-*.whl
  fi
  export TILE_ROOT PATH="$TILE_ROOT/bin:$PATH" PYTHONPATH="$TILE_ROOT/site${PYTHONPATH:+:$PYTHONPATH}"
  unset CUDA_HOME CUDA_PATH
fi
unset _tile_repo _tile_kit
