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
  can run code in every job that uses it. As ssh and pip do, the cache is created 0700 (every
  directory ozhpc makes, whatever the umask), and a directory (or an ancestor, or an entry
  inside) that is owned by another user than this one or root, or writable by group or others,
  is not used (:func:`open_trusted_dir`) unless ``OZHPC_TRUST_CACHE=1`` says
  it is on purpose: the process says so in one line and uses the user's own default cache
  instead (or no disk cache). The path is resolved once and opened component by component
  without following links; what was checked is what is used (cuTile gets the resolved path, the
  kernel store the opened directory), so a link that another user re-points later changes
  nothing. An administrator shares a read-only cache by making it root's, mode 0755 (ozhpc then
  writes files 0644 into it).
"""
from __future__ import annotations

import errno
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
    """``OZHPC_TRUST_CACHE=1``: use a cache that :func:`open_trusted_dir` objects to (a shared one)."""
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


class Untrusted(Exception):
    """A cache directory another user could write (the message says which component, and why)."""


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
PATH_FLAGS = DIR_FLAGS & ~os.O_RDONLY | getattr(os, "O_PATH", os.O_RDONLY)
"""An ancestor is opened only to be checked and walked through (O_PATH: a directory this user may
search but not list, such as a home of mode 0711, is fine)."""


def _open_component(parent: int, name: str, create: bool, flags: int = DIR_FLAGS) -> int:
    """``name`` in the directory ``parent`` opened without following a link (made 0700, whatever
    the umask, when it is missing and ``create``)."""
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise
    try:
        os.mkdir(name, 0o700, dir_fd=parent)
        made = True
    except FileExistsError:  # another rank of the node made it meanwhile
        made = False
    fd = os.open(name, DIR_FLAGS, dir_fd=parent)
    if made:
        os.fchmod(fd, 0o700)
    return fd


def _is_link(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_trusted_dir(path: str, uid: int | None = None, create: bool = False, tree: bool = False,
                     trust: bool = False) -> tuple[int, str]:
    """``path`` resolved once and opened, each component from / down without following links
    (missing ones made 0700 with ``create``), every opened component checked as :func:`objection`
    says (an ancestor may be sticky, as /tmp), and with ``tree`` every entry below it; returns
    (descriptor, resolved path).

    The caller uses the descriptor (or the resolved path, which only this user or root can change)
    from then on, never ``path`` again: a link in ``path`` that another user re-points afterwards
    changes nothing. Raises :class:`Untrusted` (unless ``trust``), FileNotFoundError, OSError."""
    uid = os.geteuid() if uid is None else uid
    real = os.path.realpath(path)
    parts = [p for p in real.split(os.sep) if p]
    fd = os.open(os.sep, PATH_FLAGS if parts else DIR_FLAGS)
    try:
        here = os.sep
        for i, name in enumerate([None] + parts):
            if name is not None:
                here = os.path.join(here, name)
                try:
                    child = _open_component(fd, name, create, PATH_FLAGS if i < len(parts) else DIR_FLAGS)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, name):  # made after the resolve
                        raise Untrusted(f"{here} changed into a symbolic link while it was checked") from None
                    raise
                os.close(fd)
                fd = child
            reason = None if trust else objection(here, os.fstat(fd), uid, sticky_ok=i < len(parts))
            if reason:
                raise Untrusted(reason)
        reason = _untrusted_entry(fd, real, uid) if tree and not trust else None
        if reason:
            raise Untrusted(reason)
    except BaseException:
        os.close(fd)
        raise
    return fd, real


def make_private_dir(path: str) -> str:
    """Create ``path`` and its missing parents 0700, whatever the umask; returns it resolved."""
    fd, real = open_trusted_dir(path, create=True, trust=True)
    os.close(fd)
    return real


def _untrusted_entry(fd: int, shown: str, uid: int | None = None) -> str | None:
    """Why an entry below the opened directory ``fd`` (``shown``: its path) could have been written by
    another user, or None."""
    for root, dirs, files, root_fd in os.fwalk(".", dir_fd=fd):
        for name in dirs + files:
            entry = os.path.normpath(os.path.join(shown, root, name))
            try:
                reason = objection(entry, os.stat(name, dir_fd=root_fd), uid)
            except OSError:
                continue  # removed meanwhile, or a dangling link: nothing loads from it
            if reason:
                return reason
    return None


def configure_cache(explicit: str | None = None, environ=os.environ, quiet: bool = False,
                    notes: list[str] | None = None) -> str:
    """Set ``CUDA_TILE_CACHE_DIR`` for this process (and create the directory 0700); returns it.

    The directory is resolved once and checked (:func:`open_trusted_dir`), and cuTile is given the
    resolved path, which only this user or root can change. One that another user could write is
    replaced by the user's default cache, or by no disk cache ("off"), with one line that says why
    (not with ``quiet``, e.g. on ranks other than 0; appended to ``notes`` instead of logged where
    given: a run says it only if it turns out to use the GPU). Must run before ``cuda.tile`` is
    imported, which reads the variable once; later calls only log that the running process keeps
    its cache.
    """
    path = cache_dir(explicit, environ)
    if "cuda.tile" in sys.modules and environ.get(TILE_CACHE_ENV) != path:
        log.warning("cuda.tile is already imported: its kernel cache stays %s", environ.get(TILE_CACHE_ENV))
        return path
    if path.strip().lower() not in OFF:
        say = (lambda line: None) if quiet else log.warning if notes is None else notes.append
        path = _trusted_cache(path, environ, say)
    environ[TILE_CACHE_ENV] = path
    return path


def _checked(path: str, environ) -> str:
    """``path`` created, resolved and checked, whole tree included: its resolved path (Untrusted, OSError)."""
    fd, real = open_trusted_dir(path, create=True, tree=True, trust=trusted_by_user(environ))
    os.close(fd)
    return real


def _trusted_cache(path: str, environ, say) -> str:
    """``path`` created and checked (resolved), or the user's default cache / "off" with the reason said."""
    try:
        return _checked(path, environ)
    except Untrusted as exc:
        reason = str(exc)
    except OSError as exc:  # e.g. a read-only home: cuTile gets no path that was not checked
        say(f"kernel cache {path} cannot be created ({exc.strerror}); compiling with no disk cache")
        return "off"
    fallback = cache_dir(None, {k: v for k, v in environ.items() if k not in (CACHE_ENV, TILE_CACHE_ENV)})
    try:
        same = os.path.realpath(fallback) == os.path.realpath(path)
        fallback = "off" if same else _checked(fallback, {})
    except (Untrusted, OSError):
        fallback = "off"
    instead = "no disk cache" if fallback == "off" else f"the private cache {fallback}"
    say(f"kernel cache {path} not used: {reason}; compiling with {instead} instead (set {TRUST_ENV}=1 to trust it)")
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
