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
* Trust. A process hands the cubins it finds there to the GPU, so whoever can write the cache
  can run code in every job that uses it. As ssh and pip do, the cache is created 0700, and a
  directory (or an ancestor, or an entry inside) that is owned by another user than this one or
  root, or writable by group or others, is not used (:func:`untrusted`) unless
  ``OZHPC_TRUST_CACHE=1`` says it is on purpose: the process says so in one line and uses the
  user's own default cache instead (or no disk cache). An administrator shares a read-only
  cache by making it root's, mode 0755 (ozhpc then writes files 0644 into it).
"""
from __future__ import annotations

import importlib.metadata
import logging
import os
import shutil
import stat
import sys

log = logging.getLogger(__name__)

CACHE_ENV = "OZHPC_CACHE_DIR"
TRUST_ENV = "OZHPC_TRUST_CACHE"
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


def trusted_by_user(environ=os.environ) -> bool:
    """``OZHPC_TRUST_CACHE=1``: use a cache that :func:`untrusted` objects to (a shared one)."""
    return environ.get(TRUST_ENV, "").strip().lower() in ("1", "yes", "true")


def objection(path: str, st: os.stat_result, uid: int | None = None, sticky_ok: bool = False) -> str | None:
    """Why the file or directory ``path`` (``st``: its stat) could be written by another user
    than ``uid`` (default: this one) or root, or None."""
    uid = os.geteuid() if uid is None else uid
    if st.st_uid not in (uid, 0):
        return f"{path} is owned by another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (sticky_ok and st.st_mode & stat.S_ISVTX):
        return f"{path} is writable by {'group and others' if st.st_mode & stat.S_IWOTH else 'its group'} " \
               f"(mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def untrusted(path: str, uid: int | None = None, tree: bool = True) -> str | None:
    """Why another user could plant code in the cache ``path``, or None when only this user (or
    root) can: the directory and every ancestor (a sticky one such as /tmp is fine), and with
    ``tree`` every entry below it, must be owned by ``uid`` (default: this user) or root and not
    writable by group or others."""
    uid = os.geteuid() if uid is None else uid
    real = os.path.realpath(path)
    if not os.path.exists(real):
        return None  # nothing there yet: it is created 0700
    here, sticky_ok = real, False
    while True:  # the directory, then its ancestors up to /
        reason = objection(here, os.stat(here), uid, sticky_ok)
        if reason or here == os.path.dirname(here):
            break
        here, sticky_ok = os.path.dirname(here), True
    if reason or not tree:
        return reason
    for root, dirs, files in os.walk(real):
        for name in dirs + files:
            entry = os.path.join(root, name)
            try:
                reason = objection(entry, os.stat(entry), uid, sticky_ok=False)
            except OSError:
                continue  # removed meanwhile, or a dangling link: nothing loads from it
            if reason:
                return reason
    return None


def make_private_dir(path: str) -> None:
    """Create ``path`` (and missing parents) readable and writable by this user only."""
    os.makedirs(path, mode=0o700, exist_ok=True)


def configure_cache(explicit: str | None = None, environ=os.environ, quiet: bool = False) -> str:
    """Set ``CUDA_TILE_CACHE_DIR`` for this process (and create the directory 0700); returns it.

    A directory that :func:`untrusted` objects to is replaced by the user's default cache, or
    by no disk cache ("off"), with one line that says why (not with ``quiet``, e.g. on ranks
    other than 0). Must run before ``cuda.tile`` is imported, which reads the variable once;
    later calls only log that the running process keeps its cache.
    """
    path = cache_dir(explicit, environ)
    if "cuda.tile" in sys.modules and environ.get(TILE_CACHE_ENV) != path:
        log.warning("cuda.tile is already imported: its kernel cache stays %s", environ.get(TILE_CACHE_ENV))
        return path
    if path.strip().lower() not in OFF:
        path = _trusted_cache(path, environ, quiet)
    environ[TILE_CACHE_ENV] = path
    return path


def _trusted_cache(path: str, environ, quiet: bool) -> str:
    """``path`` created and checked, or the user's default cache / "off" with the reason said."""
    try:
        make_private_dir(path)
    except OSError as exc:  # a read-only home: cuTile then compiles without a disk cache
        log.warning("kernel cache %s cannot be created (%s)", path, exc)
        return path
    reason = None if trusted_by_user(environ) else untrusted(path)
    if reason is None:
        return path
    fallback = cache_dir(None, {k: v for k, v in environ.items() if k not in (CACHE_ENV, TILE_CACHE_ENV)})
    if os.path.realpath(fallback) != os.path.realpath(path):
        try:
            make_private_dir(fallback)
        except OSError:
            fallback = "off"
    else:
        fallback = "off"
    if fallback != "off" and untrusted(fallback) is not None:
        fallback = "off"
    if not quiet:
        instead = "no disk cache" if fallback == "off" else f"the private cache {fallback}"
        log.warning("kernel cache %s not used: %s; compiling with %s instead (set %s=1 to trust it)",
                    path, reason, instead, TRUST_ENV)
    return fallback


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
