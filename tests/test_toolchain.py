"""cuTile toolchain and kernel cache settings, and ``ozhpc warmup`` without a GPU."""
import os
import stat
import sys

from ozhpc.engines import toolchain

from conftest import run_cli


def test_cache_dir_order(tmp_path):
    env = {"HOME": str(tmp_path)}
    assert toolchain.cache_dir(None, env).endswith(os.path.join(".cache", "ozhpc", "cutile"))
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    assert toolchain.cache_dir(None, env) == str(tmp_path / "xdg" / "ozhpc" / "cutile")
    env["CUDA_TILE_CACHE_DIR"] = "/user/choice"
    assert toolchain.cache_dir(None, env) == "/user/choice"
    env["OZHPC_CACHE_DIR"] = "/ozhpc/choice"
    assert toolchain.cache_dir(None, env) == "/ozhpc/choice"
    assert toolchain.cache_dir("/flag", env) == "/flag"


def test_configure_cache_sets_cutile_variable_and_creates_it(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "cuda.tile", raising=False)  # as in a fresh process
    env = {"OZHPC_CACHE_DIR": str(tmp_path / "node" / "cache")}
    assert toolchain.configure_cache(None, env) == str(tmp_path / "node" / "cache")
    assert env["CUDA_TILE_CACHE_DIR"] == str(tmp_path / "node" / "cache") and (tmp_path / "node" / "cache").is_dir()
    env = {}
    toolchain.configure_cache("off", env)
    assert env["CUDA_TILE_CACHE_DIR"] == "off"  # cuTile's own spelling for "no disk cache"


def test_compiler_found_on_path_without_cuda_home(tmp_path):
    fake = tmp_path / "bin" / "tileiras"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    found = toolchain.compiler({"PATH": str(fake.parent)})
    if found["source"] != "pip wheels":  # the wheels come first when installed
        assert found == {"tileiras": str(fake), "source": "PATH", "pip": found["pip"]}
    assert toolchain.compiler({"PATH": ""})["source"] in ("pip wheels", "not found", "/usr/local/cuda")
    assert "kernel cache: /c" in toolchain.describe({"PATH": "", "CUDA_TILE_CACHE_DIR": "/c"})


def test_warmup_without_a_gpu_says_so_and_succeeds(tmp_path):
    r = run_cli(["warmup", "--cache-dir", tmp_path / "kc"])
    assert r.returncode == 0, r.stderr
    if "nothing to compile" in r.stdout:  # no GPU engine here
        assert "cutile engine cannot run here" in r.stdout and r.stdout.count("\n") == 1
    else:
        assert "kernels compiled" in r.stdout
    assert (tmp_path / "kc").is_dir()


def test_foreign_frameworks_blocked_only_when_not_imported():
    modules = {}
    assert toolchain.skip_foreign_frameworks(modules) == ["torch"] and modules["torch"] is None
    loaded = {"torch": object()}
    assert toolchain.skip_foreign_frameworks(loaded) == [] and loaded["torch"] is not None


def test_warmup_runs_every_case_through_the_gemm_path(tmp_path, monkeypatch):
    """The cases of ``ozhpc warmup`` on the NumPy engine: the same runner path, nothing left behind."""
    from ozhpc.commands import warmup

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    done = warmup.warm("numpy", shapes=((20, 30, 24), (16, 32, 48)), log=lambda *a: None)
    assert [name for name, _ in done][:3] == ["20x30x24 ozaki1 auto", "20x30x24 ozaki1 slices=7",
                                              "20x30x24 ozaki1 transa=True transb=True"]
    assert len(done) == 2 * len(warmup.CASES)
    assert any(name.startswith("20x30x24 ozaki2 bits=") and "bits=53" not in name for name, _ in done)
    complex_cases = [name for name, _ in done if name.endswith(" complex")]   # Gaussian kernels of their own
    assert len(complex_cases) == 2 * 4 and "16x32x48 ozaki2 transa=C transb=C complex" in complex_cases
    assert not list(tmp_path.iterdir())
