"""cuTile's compiler and kernel cache, settled before ``cuda.tile`` is imported.

* Compiler. cuda-tile runs ``tileiras`` (which calls ``ptxas`` and libnvvm) on the first
  launch of each kernel variant. It looks, in order: in the pip wheels nvidia-cuda-tileiras,
  nvidia-cuda-nvcc and nvidia-nvvm (``pip install "ozhpc[gpu]"`` brings them; the three
  must share major.minor), on PATH, in ``$CUDA_HOME/bin``, in ``/usr/local/cuda*``. With the
  wheels no CUDA_HOME is needed (cuda-tile even hides it from tileiras). Hopper needs
  tileiras >= 13.3. :func:`compiler` says which one will run.
* Cache. Compiled cubins persist in ``CUDA_TILE_CACHE_DIR`` (read once, when cuda.tile is
  imported). :func:`configure_cache` points it at ``--cache-dir`` / ``$OZHPC_CACHE_DIR`` /
  a ``CUDA_TILE_CACHE_DIR`` the user set / ``~/.cache/ozhpc/cutile``: one directory that all
  ranks of a node share (cuTile indexes it with SQLite, safe for concurrent ranks), so a kernel
  compiles once per node and tileiras' 4-25 s per variant are not paid per rank per run;
  ``ozhpc warmup`` fills it ahead of time.
"""
from __future__ import annotations

import importlib.metadata
import logging
import os
import shutil
import sys

log = logging.getLogger(__name__)

CACHE_ENV = "OZHPC_CACHE_DIR"
TILE_CACHE_ENV = "CUDA_TILE_CACHE_DIR"
OFF = ("0", "off", "none")
PIP_PACKAGES = ("nvidia-cuda-tileiras", "nvidia-cuda-nvcc", "nvidia-nvvm")


def cache_dir(explicit: str | None = None, environ=os.environ) -> str:
    """The kernel cache directory to use (see the module docstring for the order)."""
    for value in (explicit, environ.get(CACHE_ENV), environ.get(TILE_CACHE_ENV)):
        if value:
            return os.path.expanduser(value)
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ozhpc", "cutile")


def configure_cache(explicit: str | None = None, environ=os.environ) -> str:
    """Set ``CUDA_TILE_CACHE_DIR`` for this process (and create the directory); returns it.

    Must run before ``cuda.tile`` is imported, which reads the variable once; later calls
    only log that the running process keeps its cache.
    """
    path = cache_dir(explicit, environ)
    if "cuda.tile" in sys.modules and environ.get(TILE_CACHE_ENV) != path:
        log.warning("cuda.tile is already imported: its kernel cache stays %s", environ.get(TILE_CACHE_ENV))
        return path
    if path.strip().lower() not in OFF:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:  # a read-only home: cuTile then compiles without a disk cache
            log.warning("kernel cache %s cannot be created (%s)", path, exc)
    environ[TILE_CACHE_ENV] = path
    return path


FOREIGN_FRAMEWORKS = ("torch",)
"""Array frameworks whose dtypes cuda.tile looks up on its first compile when they are installed."""


def skip_foreign_frameworks(modules=sys.modules) -> list[str]:
    """Keep cuda.tile from importing PyTorch in this process (``ozhpc`` commands only).

    On its first kernel compile cuda.tile imports ``torch``, if installed, to recognise its
    dtypes: about 7 s per process on the H200 nodes (measured with cProfile; all of it in
    "scales", the first phase that launches a kernel). The command line never hands it a torch
    object, so it marks torch absent (``sys.modules["torch"] = None``, the documented way to
    block an import); a library user's process, which may use torch, is left alone. Returns what
    it blocked (nothing when torch was imported already)."""
    blocked = [name for name in FOREIGN_FRAMEWORKS if name not in modules]
    for name in blocked:
        modules[name] = None
    return blocked


def _pip_versions() -> dict[str, str | None]:
    out = {}
    for name in PIP_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def compiler(environ=os.environ) -> dict:
    """Which tileiras cuda-tile will run, found the way it looks (for ``ozhpc info`` / warmup).

    Returns ``{"tileiras": path or None, "source": str, "pip": {package: version or None}}``.
    """
    pip = _pip_versions()
    if all(pip.values()) and len({tuple(v.split(".")[:2]) for v in pip.values()}) == 1:
        try:
            import nvidia.cu13 as cu13  # the wheels' common package

            found = shutil.which("tileiras", path=os.path.join(cu13.__path__[0], "bin"))
            if found:
                return {"tileiras": found, "source": "pip wheels", "pip": pip}
        except (ImportError, AttributeError, IndexError):
            pass
    found = shutil.which("tileiras", path=environ.get("PATH", ""))
    if found:
        return {"tileiras": found, "source": "PATH", "pip": pip}
    home = environ.get("CUDA_HOME") or environ.get("CUDA_PATH")
    for root, source in ([(home, "CUDA_HOME")] if home else []) + [("/usr/local/cuda", "/usr/local/cuda")]:
        found = shutil.which("tileiras", path=os.path.join(root, "bin"))
        if found:
            return {"tileiras": found, "source": source, "pip": pip}
    return {"tileiras": None, "source": "not found", "pip": pip}


def describe(environ=os.environ) -> str:
    """One line: the tileiras cuda-tile will use and the kernel cache directory."""
    found = compiler(environ)
    where = found["tileiras"] or "none (pip install 'ozhpc[gpu]', or tools/tile-kit.sh for an offline node)"
    return f"tileiras: {where} [{found['source']}]; kernel cache: {environ.get(TILE_CACHE_ENV) or cache_dir(None, environ)}"
