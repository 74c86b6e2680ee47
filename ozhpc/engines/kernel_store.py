"""Compiled cuTile kernels kept on disk by ozhpc, so that a new process skips cuTile's front end.

cuda.tile keeps cubins on disk too, but finds them by their TileIR bytecode: every new process
first runs the Python front end for each kernel variant (0.05-0.35 s each) and starts tileiras
twice (a version probe), about 1.5-2.5 s per process on the H200 nodes before the first product
(cProfile of ``ozhpc gemm``, ``MODE=startup bash bench/gpu.sh``). ozhpc's kernels are fixed code, so a
variant's cubin is a function of the source of the engines package (:func:`package_digest`, its
subpackages included), the kernel (module and name), its signature (argument types, constants, array specialisation), the GPU architecture,
the compile hints, cuda-tile's version and the tileiras binary. :class:`StoredKernel` keys
cubins by exactly that and hands a stored one straight to cuTile's dispatcher; a miss compiles
the usual way and stores the result.

Files live in ``<kernel cache>/ozhpc-cubins`` (``CUDA_TILE_CACHE_DIR``, set by
:mod:`ozhpc.engines.toolchain`; "off" turns the store off too), one file per variant, written
to a temporary name and renamed into place, so concurrent ranks never read a partial file,
all through the store directory's descriptor, opened and checked once; each
file carries the SHA-256 of its cubin, and a file that does not match is ignored and rewritten.
The hook is cuda.tile's ``kernel._compile``: used only with the cuda-tile release it was
written for (:data:`SUPPORTED_CUDA_TILE`), any other release compiles the usual way.

The SHA-256 guards against damage, not against another user: a store directory, or a file,
owned by another user than this one or root, or writable by group or others, is not loaded from
(:func:`ozhpc.engines.toolchain.open_trusted_dir`; ``OZHPC_TRUST_CACHE=1`` overrides), and says so in
one line. Files are written 0600 in directories 0700, or 0644 / 0755 where the cache directory
itself is readable by others (an administrator's shared cache).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import secrets
import stat

import cuda.tile as ct

from .toolchain import DIR_FLAGS, OFF, TILE_CACHE_ENV, Untrusted, compiler, objection, open_trusted_dir, trusted_by_user

log = logging.getLogger(__name__)

SUPPORTED_CUDA_TILE = ("1.7.",)
"""cuda-tile releases whose ``kernel._compile`` returns ``(cubin, symbol, None, providers)``."""
SUBDIR = "ozhpc-cubins"
ENGINES_DIR = os.path.dirname(os.path.abspath(__file__))
"""The package whose source every stored kernel's key covers (``ozhpc/engines``)."""
MAGIC = b"ozhpc-cubin-1\n"


def _version() -> str:
    return getattr(ct, "__version__", "unknown")


def _compiler_identity() -> str:
    """The tileiras binary cuda-tile will run: path, size and modification time (no subprocess)."""
    path = compiler().get("tileiras")
    if not path:
        return "none"
    st = os.stat(path)
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


class KernelStore:
    """One directory of cubins keyed by :meth:`key` (see the module docstring), used through its
    descriptor ``fd`` (opened and checked once: :func:`active_store`); ``directory`` only names it."""

    def __init__(self, fd: int, directory: str, shared: int = 0, trust: bool = False):
        self.fd, self.directory = fd, directory
        self.shared = shared             # the read bits others have on the cache: 0, or 0o055
        self.trust = trust               # OZHPC_TRUST_CACHE: load files whoever owns them
        self.hits = self.misses = 0
        self.compiled: list[str] = []    # :func:`describe_variant` of each miss, for the report
        self._fixed: str | None = None
        self._refused = False            # a file was not loaded (said once)

    def _fixed_part(self) -> str:
        if self._fixed is None:
            debug = os.environ.get("EXPERIMENTAL_CUDA_TILE_DEBUG_BUILD", "")
            self._fixed = f"{_version()}|{_compiler_identity()}|debug={debug}"
        return self._fixed

    def key(self, kern: "StoredKernel", signature, capability) -> str:
        h = hashlib.sha256()
        for part in (self._fixed_part(), kern.source_digest, kern._pyfunc.__module__, kern._pyfunc.__qualname__,
                     repr(kern._compiler_options), repr(signature), f"sm_{capability[0]}{capability[1]}"):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, key[:2], key + ".cubin")

    def _subdir(self, key: str, create: bool) -> int:
        """The descriptor of the key's subdirectory (made 0700, or 0755 in a shared cache)."""
        try:
            return os.open(key[:2], DIR_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            if not create:
                raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(key[:2], 0o700, dir_fd=self.fd)
            fd = os.open(key[:2], DIR_FLAGS, dir_fd=self.fd)
            os.fchmod(fd, 0o700 | self.shared)
            return fd
        return os.open(key[:2], DIR_FLAGS, dir_fd=self.fd)

    def load(self, key: str) -> tuple[bytes, str] | None:
        """(cubin, symbol) stored under ``key``, or None (absent, unreadable, damaged, or a file
        another user could have written: see the module docstring)."""
        path = self._path(key)
        try:
            sub = self._subdir(key, create=False)
            try:
                fd = os.open(key + ".cubin", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=sub)
            finally:
                os.close(sub)
            with open(fd, "rb") as f:
                reason = None if self.trust else objection(path, os.fstat(f.fileno()))
                blob = b"" if reason else f.read()
        except OSError:
            return None
        if reason:
            if not self._refused:
                log.warning("kernel store: %s; not loading it (compiling instead; %s=1 trusts it)", reason,
                            "OZHPC_TRUST_CACHE")
            self._refused = True
            return None
        if not blob.startswith(MAGIC):
            return None
        header, sep, cubin = blob[len(MAGIC):].partition(b"\n")
        try:
            meta = json.loads(header) if sep else {}
        except ValueError:
            return None
        if meta.get("sha256") != hashlib.sha256(cubin).hexdigest() or not meta.get("symbol"):
            log.warning("kernel store: %s is damaged; compiling again", path)
            return None
        return cubin, meta["symbol"]

    def save(self, key: str, cubin: bytes, symbol: str) -> None:
        """Store atomically (temporary file + rename, both in the opened directory); a failure
        only costs the next process a compile."""
        path = self._path(key)
        meta = json.dumps({"symbol": symbol, "sha256": hashlib.sha256(cubin).hexdigest()}).encode()
        try:
            sub = self._subdir(key, create=True)
            try:
                tmp = f".tmp-{os.getpid()}-{secrets.token_hex(8)}"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=sub)
                try:
                    os.fchmod(fd, 0o600 | (self.shared & 0o044))
                    with os.fdopen(fd, "wb") as f:
                        f.write(MAGIC + meta + b"\n" + bytes(cubin))
                    os.replace(tmp, key + ".cubin", src_dir_fd=sub, dst_dir_fd=sub)
                except BaseException:
                    os.unlink(tmp, dir_fd=sub)
                    raise
            finally:
                os.close(sub)
        except OSError as exc:
            log.warning("kernel store: cannot write %s (%s)", path, exc)


_STORE: dict[str, KernelStore | None] = {}


def active_store(environ=os.environ) -> KernelStore | None:
    """The store in this process's kernel cache directory, or None (cache off, other cuda-tile,
    or a directory another user could write: said once). The directory is opened and checked
    once (:func:`ozhpc.engines.toolchain.open_trusted_dir`); the store then uses its descriptor."""
    cache = environ.get(TILE_CACHE_ENV, "")
    if not cache or cache.strip().lower() in OFF or not _version().startswith(SUPPORTED_CUDA_TILE):
        return None
    directory = os.path.join(cache, SUBDIR)
    if directory not in _STORE:
        _STORE[directory] = _open_store(directory, trusted_by_user(environ))
    return _STORE[directory]


def _open_store(directory: str, trust: bool) -> KernelStore | None:
    try:
        fd, real = open_trusted_dir(directory, create=True, trust=trust)
    except Untrusted as exc:
        log.warning("kernel store %s not used: %s (OZHPC_TRUST_CACHE=1 trusts it)", directory, exc)
        return None
    except OSError as exc:  # e.g. a file where the directory should be: compiling costs only time
        log.warning("kernel store: cannot write %s (%s)", directory, exc.strerror)
        return None
    shared = stat.S_IMODE(os.stat(os.path.dirname(real)).st_mode) & 0o055
    if shared and stat.S_IMODE(os.fstat(fd).st_mode) & 0o055 != shared:
        os.fchmod(fd, 0o700 | shared)   # made just now in an administrator's shared cache
    return KernelStore(fd, directory, shared, trust)


_DIGESTS: dict[str, str] = {}


def package_digest(directory: str = ENGINES_DIR) -> str:
    """SHA-256 over every ``.py`` file under ``directory`` (relative paths and contents, sorted;
    subpackages included).

    Not only the kernel module: the constants and tile maths a kernel reads from other modules
    (digit bits in ``digits.py``, CRT piece widths in ``crt.py``, ``cutile/tile_math.py``) are
    compiled into the cubin without appearing in its signature, so any change in the package
    makes every variant a new one."""
    if directory not in _DIGESTS:
        files = sorted(os.path.relpath(os.path.join(root, f), directory)
                       for root, dirs, names in os.walk(directory) for f in names if f.endswith(".py"))
        h = hashlib.sha256()
        for name in files:
            with open(os.path.join(directory, name), "rb") as f:
                h.update(name.replace(os.sep, "/").encode() + b"\0" + f.read() + b"\0")
        _DIGESTS[directory] = h.hexdigest()
    return _DIGESTS[directory]


def describe_variant(name: str, signature) -> str:
    """``name(arg, ...)``: constants by value, arrays as dtype, rank and what cuTile specialised
    them on per axis (``6``: extent divisible by 16; stride ``1``: contiguous, ``a``: 16-byte
    multiple), so a user sees why a variant was new."""
    parts = []
    for p in getattr(signature, "parameters", ()):
        kind = type(p).__name__
        if kind == "ConstantConstraint":
            parts.append(repr(p.value))
        elif kind == "ArrayConstraint":
            shape = "".join("6" if d % 16 == 0 else "_" for d in p.shape_divisible_by)
            stride = "".join("1" if c == 1 else "a" if d > 1 else "_"
                             for c, d in zip(p.stride_constant, p.stride_divisible_by))
            parts.append(f"{p.dtype} {p.ndim}d extents%16:{shape} strides:{stride}")
        else:
            parts.append(kind.replace("Constraint", "").lower())
    return f"{name}({', '.join(parts)})" if parts else f"{name}({signature!r})"


@contextlib.contextmanager
def cache_umask(environ=os.environ):
    """cuTile writes its own cache files as the umask says: with a umask such as 002 they would be
    group-writable, and the next process would refuse the cache. While it compiles, the umask
    gives what the store's files get: 0600, or 0644 in a cache directory others may read."""
    cache = environ.get(TILE_CACHE_ENV, "")
    try:
        shared = stat.S_IMODE(os.stat(cache).st_mode) & 0o055 if cache else 0
    except OSError:
        shared = 0
    old = os.umask(0o077 & ~shared)
    try:
        yield
    finally:
        os.umask(old)


class StoredKernel(ct.kernel):
    """A ``ct.kernel`` whose compiled variants are served from the :class:`KernelStore`."""

    def __init__(self, function=None, /, **hints):
        super().__init__(function, **hints)
        self.source_digest = package_digest(ENGINES_DIR)

    def _compile(self, signature, context, compute_capability=None):
        store = active_store()
        if store is None:
            with cache_umask():
                return super()._compile(signature, context, compute_capability)
        from cuda.tile._cext import get_compute_capability

        key = store.key(self, signature, compute_capability or get_compute_capability())
        found = store.load(key)
        if found is not None:
            store.hits += 1
            return found[0], found[1], None, ()
        store.misses += 1
        store.compiled.append(describe_variant(self._pyfunc.__name__, signature))
        with cache_umask():
            result = super()._compile(signature, context, compute_capability)
        cubin, symbol, extra, providers = result
        if extra is None and not providers and cubin:
            store.save(key, cubin, symbol)
        return result

    def replace_hints(self, **hints):
        return StoredKernel(self._pyfunc, **dict(dataclasses.asdict(self._compiler_options), **hints))


def stored_kernel(function=None, /, **hints):
    """Decorator like ``@ct.kernel`` / ``@ct.kernel(**hints)``, giving a :class:`StoredKernel`."""
    if function is None:
        return lambda f: StoredKernel(f, **hints)
    return StoredKernel(function, **hints)
