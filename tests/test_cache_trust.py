"""The kernel cache is a trust boundary: created 0700 with 0600 files (0755 / 0644 in
an administrator's shared cache), and nothing is loaded from a directory or file another user
could write, unless OZHPC_TRUST_CACHE=1; one line says why a cache was not used. CPU only: the
store's compile step is a counting fake (as in tests/test_kernel_store.py)."""
from __future__ import annotations

import logging
import pathlib
import os
import stat
import sys

import pytest

from ozhpc.engines import toolchain

OTHER = 4242  # a uid that is neither this user nor root


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def give_away(path, uid=OTHER):
    """chown to another user (needs root; skipped elsewhere)."""
    try:
        os.chown(path, uid, -1)
    except PermissionError:
        pytest.skip("chown to another user needs root")


def objection_to(path, uid=None) -> str | None:
    """Why ``uid`` (default: this user) would not use the cache ``path``, whole tree included."""
    try:
        fd, _ = toolchain.open_trusted_dir(str(path), uid, tree=True)
    except toolchain.Untrusted as exc:
        return str(exc)
    os.close(fd)
    return None


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.delitem(sys.modules, "cuda.tile", raising=False)  # configure as a fresh process would


def configure(tmp_path, cache, caplog, **extra):
    env = {"OZHPC_CACHE_DIR": str(cache), "XDG_CACHE_HOME": str(tmp_path / "home-cache"), **extra}
    with caplog.at_level(logging.WARNING, logger=toolchain.__name__):
        got = toolchain.configure_cache(None, env)
    assert env["CUDA_TILE_CACHE_DIR"] == got
    return got, [r.getMessage() for r in caplog.records]


PRIVATE = "home-cache/ozhpc/cutile"


def test_a_new_cache_is_private(tmp_path, caplog, fresh):
    got, said = configure(tmp_path, tmp_path / "node" / "cache", caplog)
    assert got == str(tmp_path / "node" / "cache") and said == []
    assert mode(got) == 0o700


@pytest.mark.parametrize("how,reason", [
    ("group-writable", "is writable by its group (mode 0775)"),
    ("world-writable", "is writable by group and others (mode 0777)"),
    ("other owner", "is owned by another user (uid 4242)"),
    ("planted file", "is owned by another user (uid 4242)"),
    ("writable file", "is writable by group and others (mode 0666)"),
    ("writable parent", "is writable by its group (mode 0770)"),
])
def test_a_cache_others_can_write_is_not_used(tmp_path, caplog, fresh, how, reason):
    parent = tmp_path / "shared"
    cache = parent / "cache"
    cache.mkdir(parents=True, mode=0o700)
    culprit = cache
    if how == "group-writable":
        cache.chmod(0o775)
    elif how == "world-writable":
        cache.chmod(0o777)
    elif how == "other owner":
        give_away(cache)
    elif how in ("planted file", "writable file"):
        culprit = cache / "ozhpc-cubins"
        culprit.mkdir()
        culprit = culprit / "k.cubin"
        culprit.write_bytes(b"x")
        give_away(culprit) if how == "planted file" else culprit.chmod(0o666)
    else:
        parent.chmod(0o770)
        culprit = parent
    got, said = configure(tmp_path, cache, caplog)
    assert got == str(tmp_path / PRIVATE) and mode(got) == 0o700
    assert said == [f"kernel cache {cache} not used: {culprit} {reason}; compiling with the private cache "
                    f"{tmp_path / PRIVATE} instead (set OZHPC_TRUST_CACHE=1 to trust it)"]
    got, said = configure(tmp_path, cache, caplog, OZHPC_TRUST_CACHE="1")
    assert got == str(cache)


def test_a_sticky_parent_is_fine_and_the_fallback_may_be_off(tmp_path, caplog, fresh):
    sticky = tmp_path / "scratch"
    sticky.mkdir()
    sticky.chmod(0o1777)   # as /tmp: others cannot rename or remove our entries
    got, said = configure(tmp_path, sticky / "mine", caplog)
    assert got == str(sticky / "mine") and said == []
    bad = tmp_path / "home-cache" / "ozhpc" / "cutile"
    bad.mkdir(parents=True)
    bad.chmod(0o777)       # the default cache itself is unsafe: no disk cache at all
    got, said = configure(tmp_path, bad, caplog)
    assert got == "off"
    assert said[-1].endswith("compiling with no disk cache instead (set OZHPC_TRUST_CACHE=1 to trust it)")


def test_a_cache_that_cannot_be_made_is_off(tmp_path, caplog, fresh):
    """cuTile never gets a path that was not checked: one it cannot make means no disk cache."""
    (tmp_path / "file").write_text("not a directory")
    got, said = configure(tmp_path, tmp_path / "file" / "cache", caplog)
    assert got == "off"
    assert said == [f"kernel cache {tmp_path}/file/cache cannot be created (Not a directory); compiling with no "
                    "disk cache"]


def test_quiet_ranks_do_not_repeat_the_line(tmp_path, caplog, fresh):
    cache = tmp_path / "c"
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)
    env = {"OZHPC_CACHE_DIR": str(cache), "XDG_CACHE_HOME": str(tmp_path / "home-cache")}
    with caplog.at_level(logging.WARNING):
        assert toolchain.configure_cache(None, env, quiet=True) == str(tmp_path / PRIVATE)
    assert caplog.records == []


def test_an_administrators_read_only_cache_is_trusted(tmp_path):
    """Root's directory, 0755, files 0644: trusted by every user."""
    cache = tmp_path / "site-cache"
    (cache / "ozhpc-cubins").mkdir(parents=True)
    (cache / "ozhpc-cubins" / "k.cubin").write_bytes(b"x")
    for path, m in ((cache, 0o755), (cache / "ozhpc-cubins", 0o755), (cache / "ozhpc-cubins" / "k.cubin", 0o644)):
        path.chmod(m)
        give_away(path, 0)
    tmp_path.chmod(0o755)
    assert objection_to(cache, uid=1000) is None
    (cache / "ozhpc-cubins" / "k.cubin").chmod(0o664)
    assert objection_to(cache, uid=1000) == (f"{cache}/ozhpc-cubins/k.cubin is writable by its group "
                                                         "(mode 0664)")


def test_the_command_says_it_in_one_line(tmp_path):
    """Through the command line (``ozhpc info`` configures the cache too)."""
    from conftest import run_cli

    cache = tmp_path / "c"
    cache.mkdir()
    cache.chmod(0o777)
    r = run_cli(["info"], env={"OZHPC_CACHE_DIR": str(cache), "XDG_CACHE_HOME": str(tmp_path / "home-cache")})
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [f"ozhpc: kernel cache {cache} not used: {cache} is writable by group and "
                                     f"others (mode 0777); compiling with the private cache {tmp_path / PRIVATE} "
                                     "instead (set OZHPC_TRUST_CACHE=1 to trust it)"]
    assert f"kernel cache: {tmp_path / PRIVATE}" in r.stdout


# ------------------------------------------------------------------ ozhpc's kernel store


@pytest.fixture
def store(monkeypatch, tmp_path):
    """A private cache dir with the store; cuda.tile's compile replaced by a counting fake."""
    ct = pytest.importorskip("cuda.tile")
    from ozhpc.engines import cutile as ck
    from ozhpc.engines import kernel_store as ks

    calls = []

    def fake(self, signature, context, compute_capability=None):
        calls.append(signature)
        return b"CUBIN:" + repr(signature).encode(), f"sym_{self._pyfunc.__name__}", None, ()

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setattr(ct.kernel, "_compile", fake)
    monkeypatch.setenv(ks.TILE_CACHE_ENV, str(cache))
    monkeypatch.delenv(toolchain.TRUST_ENV, raising=False)
    monkeypatch.setattr(ks, "_STORE", {})
    return ks, ck.KERNELS["split"], calls, cache


def stored_files(cache):
    return [os.path.join(d, f) for d, _, fs in os.walk(cache / "ozhpc-cubins") for f in fs]


def test_store_files_are_private(store):
    ks, kernel, calls, cache = store
    kernel._compile("sig", None, (9, 0))
    [path] = stored_files(cache)
    assert mode(path) == 0o600
    assert mode(os.path.dirname(path)) == mode(cache / "ozhpc-cubins") == 0o700


def test_store_files_in_a_shared_cache_are_readable(store):
    ks, kernel, calls, cache = store
    cache.chmod(0o755)
    kernel._compile("sig", None, (9, 0))
    [path] = stored_files(cache)
    assert mode(path) == 0o644 and mode(os.path.dirname(path)) == 0o755


@pytest.mark.parametrize("how", ["other owner", "group-writable"])
def test_a_planted_cubin_is_not_loaded(store, caplog, monkeypatch, how):
    ks, kernel, calls, cache = store
    kernel._compile("sig", None, (9, 0))
    [path] = stored_files(cache)
    with open(path, "r+b") as f:           # another user's kernel, with a valid checksum
        blob = f.read()
    if how == "other owner":
        give_away(path)
        reason = f"{path} is owned by another user (uid {OTHER})"
    else:
        os.chmod(path, 0o620)
        reason = f"{path} is writable by its group (mode 0620)"
    monkeypatch.setattr(ks, "_STORE", {})  # a new process
    with caplog.at_level(logging.WARNING, logger=ks.__name__):
        kernel._compile("sig", None, (9, 0))
    assert len(calls) == 2                   # compiled, not loaded
    assert [r.getMessage() for r in caplog.records] == [
        f"kernel store: {reason}; not loading it (compiling instead; OZHPC_TRUST_CACHE=1 trusts it)"]
    st = os.stat(path)                       # and replaced by this user's own, private
    assert (st.st_uid, mode(path), open(path, "rb").read()) == (os.geteuid(), 0o600, blob)
    kernel._compile("sig", None, (9, 0))
    assert len(calls) == 2
    give_away(path) if how == "other owner" else os.chmod(path, 0o620)
    monkeypatch.setenv(toolchain.TRUST_ENV, "1")  # the user says the cache is shared on purpose
    monkeypatch.setattr(ks, "_STORE", {})
    kernel._compile("sig", None, (9, 0))
    assert len(calls) == 2


def test_a_store_directory_others_can_write_is_not_used(store, caplog):
    ks, kernel, calls, cache = store
    (cache / "ozhpc-cubins").mkdir()
    (cache / "ozhpc-cubins").chmod(0o777)
    with caplog.at_level(logging.WARNING, logger=ks.__name__):
        assert ks.active_store() is None
        kernel._compile("sig", None, (9, 0))
        kernel._compile("sig", None, (9, 0))
    assert len(calls) == 2 and stored_files(cache) == []
    assert [r.getMessage() for r in caplog.records] == [
        f"kernel store {cache}/ozhpc-cubins not used: {cache}/ozhpc-cubins is writable by group and others "
        "(mode 0777) (OZHPC_TRUST_CACHE=1 trusts it)"]


@pytest.mark.parametrize("cache_mode,file_mode", [(0o700, 0o600), (0o755, 0o644)])
def test_cutiles_own_cache_files_are_private_whatever_the_umask(store, monkeypatch, cache_mode, file_mode):
    """With umask 002 cuTile's files would be group-writable, and the next run would refuse the cache."""
    ks, kernel, calls, cache = store
    cache.chmod(cache_mode)
    ct = sys.modules["cuda.tile"]
    written = []

    def compile_writing_cutiles_cache(self, signature, context, compute_capability=None):
        path = cache / f"cutile-{len(written)}.bin"   # as cuTile writes its cubins and index
        path.write_bytes(b"x")
        written.append(path)
        return b"CUBIN", "sym", None, ()

    monkeypatch.setattr(ct.kernel, "_compile", compile_writing_cutiles_cache)
    old = os.umask(0o002)
    try:
        kernel._compile("sig", None, (9, 0))
        monkeypatch.setattr(ks, "active_store", lambda: None)   # without ozhpc's store: cuTile's cache alone
        kernel._compile("sig", None, (9, 0))
        assert os.umask(0o002) == 0o002               # restored after each compile
    finally:
        os.umask(old)
    assert [mode(p) for p in written] == [file_mode, file_mode]
    assert objection_to(cache) is None


# ------------------------------------------------- a link another user re-points, and the umask


def pinned_case(base):
    """The victim's private cache reached through a link in another user's directory."""
    victim = base / "victim"
    (victim / "cache").mkdir(parents=True)
    victim.chmod(0o700)
    attacker = base / "att"
    (attacker / "evil").mkdir(parents=True)
    (attacker / "cache").symlink_to(victim / "cache")
    return victim, attacker


def repoint(attacker, uid=OTHER):
    """The link's owner points it at a directory of theirs (a rename: atomic, as ``ln -sfn`` is)."""
    (attacker / "new").symlink_to(attacker / "evil")
    os.lchown(attacker / "new", uid, uid)
    os.replace(attacker / "new", attacker / "cache")


def test_a_link_repointed_after_the_check_changes_nothing(tmp_path, caplog, monkeypatch):
    """The cache is resolved once and checked; cuTile and the kernel store use what was checked."""
    pytest.importorskip("cuda.tile")
    from ozhpc.engines import kernel_store as ks

    monkeypatch.delitem(sys.modules, "cuda.tile")  # configured as a fresh process would be
    victim, attacker = pinned_case(tmp_path / "node")
    for path in (attacker, attacker / "evil"):
        give_away(path)
        path.chmod(0o777)
    os.lchown(attacker / "cache", OTHER, OTHER)
    env = {"OZHPC_CACHE_DIR": str(attacker / "cache"), "XDG_CACHE_HOME": str(tmp_path / "home-cache")}
    with caplog.at_level(logging.WARNING):
        got = toolchain.configure_cache(None, env)
    assert got == env["CUDA_TILE_CACHE_DIR"] == str(victim / "cache") and caplog.records == []
    monkeypatch.setattr(ks, "_STORE", {})
    store = ks.active_store(env)
    repoint(attacker)
    store.save("ab" * 32, b"CUBIN", "sym")
    assert os.listdir(attacker / "evil") == []
    assert os.listdir(victim / "cache" / "ozhpc-cubins" / "ab") == ["ab" * 32 + ".cubin"]
    assert store.load("ab" * 32) == (b"CUBIN", "sym")


def test_a_link_made_while_the_path_is_checked_is_refused(tmp_path, caplog, fresh, monkeypatch):
    """The path is resolved first, then walked without following links: a component that became a
    link in between (here: resolving is made to miss it) is not walked through."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.setattr(toolchain.os.path, "realpath", lambda path: os.path.abspath(path))
    got, said = configure(tmp_path, tmp_path / "link" / "cache", caplog)
    assert got == str(tmp_path / PRIVATE) and not (tmp_path / "real" / "cache").exists()
    assert said == [f"kernel cache {tmp_path}/link/cache not used: {tmp_path}/link changed into a symbolic link "
                    f"while it was checked; compiling with the private cache {tmp_path / PRIVATE} instead (set "
                    "OZHPC_TRUST_CACHE=1 to trust it)"]


VICTIM = """
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("toolchain", sys.argv[1])
toolchain = importlib.util.module_from_spec(spec)
spec.loader.exec_module(toolchain)
print(toolchain.configure_cache(None, os.environ), flush=True)
sys.stdin.readline()              # the link's owner re-points it now
with open(os.path.join(os.environ["CUDA_TILE_CACHE_DIR"], "cache.db"), "w") as f:   # as cuTile writes
    f.write("the victim's kernels")
"""


def as_user(uid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def interpreter_for(uid: int) -> str:
    """A Python that ``uid`` can run (the victim's script needs only the standard library)."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("switching users needs root and setpriv")
    for python in (sys.executable, "/usr/bin/python3"):
        if subprocess.run(as_user(uid) + [python, "-c", "pass"], capture_output=True).returncode == 0:
            return python
    pytest.skip(f"no Python here that uid {uid} can run")


def test_another_users_link_cannot_take_the_cache_over(fresh):
    """uid 2001 is told to use /.../att/cache, a link of uid 2002's to 2001's own private cache; 2002
    re-points it at a directory of theirs after 2001's check: 2001 keeps writing its own cache."""
    import shutil
    import subprocess
    import tempfile

    python = interpreter_for(2001)
    base = tempfile.mkdtemp(prefix="ozhpc-link-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        victim, attacker = pinned_case(pathlib.Path(base))
        for path in (victim, victim / "cache"):
            os.chown(path, 2001, 2001)
        for path in (attacker, attacker / "evil"):
            os.chown(path, 2002, 2002)
            path.chmod(0o777)
        os.lchown(attacker / "cache", 2002, 2002)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(victim), "OZHPC_CACHE_DIR": str(attacker / "cache")}
        child = subprocess.Popen(as_user(2001) + [python, "-c", VICTIM, toolchain.__file__], env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            chosen = child.stdout.readline().strip()
            ln = subprocess.run(as_user(2002) + ["ln", "-sfn", str(attacker / "evil"), str(attacker / "cache")])
            assert ln.returncode == 0
            out, err = child.communicate("\n", timeout=60)
        finally:
            child.kill()
        assert child.returncode == 0, err
        assert chosen == str(victim / "cache") and err == ""
        assert os.listdir(attacker / "evil") == []
        assert (victim / "cache" / "cache.db").read_text() == "the victim's kernels"
    finally:
        shutil.rmtree(base)


def test_a_fresh_home_under_umask_002_gets_a_cache_it_trusts(tmp_path, caplog, fresh, monkeypatch):
    """ozhpc makes every directory of the default cache 0700 itself, whatever the umask, and then
    uses it (it once made ~/.cache/ozhpc 0775 and refused it on every run)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    env = {}
    old = os.umask(0o002)
    try:
        for _ in range(2):
            with caplog.at_level(logging.WARNING):
                got = toolchain.configure_cache(None, env)
            assert got == str(home / ".cache" / "ozhpc" / "cutile") and caplog.records == []
        assert toolchain.make_private_dir(str(home / "rates" / "dir")) == str(home / "rates" / "dir")  # plan's
    finally:
        os.umask(old)
    assert [mode(home / p) for p in (".cache", ".cache/ozhpc", ".cache/ozhpc/cutile", "rates", "rates/dir")] == \
        [0o700] * 5


def test_a_cpu_run_says_nothing_of_a_cache_it_does_not_use(tmp_path):
    """--engine auto on a node without a GPU: a kernel cache ozhpc may not use is not mentioned."""
    from conftest import run_cli

    from ozhpc.run.matrices import standard_matrix

    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["A"] = standard_matrix(8, 8, 0.5, 1)
    bad = tmp_path / "shared"
    bad.mkdir()
    bad.chmod(0o777)
    r = run_cli(["gemm", f"{tmp_path}/in.h5:/A", f"{tmp_path}/in.h5:/A", "-o", f"{tmp_path}/out.h5:/C",
                 "--report", tmp_path / "run.json", "--progress", "off"],
                env={"OZHPC_CACHE_DIR": str(bad), "XDG_CACHE_HOME": str(tmp_path / "home-cache")})
    assert r.returncode == 0, r.stderr
    import json

    if json.loads((tmp_path / "run.json").read_text())["engine"] != "numpy":
        pytest.skip("the GPU engine ran: it uses the cache, and says why not this one")
    assert r.stderr == ""
