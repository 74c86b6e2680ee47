"""The source distribution, installed as a user without MPI would: a fresh venv with NumPy,
h5py and tqdm but no mpi4py and no MPI library, then ``ozhpc info``, ``gen``, ``gemm``,
``check`` as one process with the NumPy engine.

About a minute (pip from PyPI or its cache); skipped when no venv can be made or pip cannot
reach a package index. The repository is copied first, so the build leaves nothing in it.
"""
import hashlib
import json
import pathlib
import platform
import shutil
import subprocess
import tarfile
import venv

import pytest

from conftest import REPO, run_cli

pytestmark = pytest.mark.venv

SDIST_DIRS = ("docs", "examples", "jobs", "slurm", "bench", "tools", "tests")
PIP_OFFLINE = ("--retries", "1", "--timeout", "20")
CUDA_TOOLCHAIN = ("cuda-toolkit", "nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-tileiras", "nvidia-nvjitlink")
"""The wheels of the GPU extra's CUDA toolchain, which must share one CUDA minor version."""


def _run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def sdist_venv(tmp_path_factory):
    """(venv's bin directory, the sdist), with the venv holding ozhpc from the sdist, --no-deps."""
    root = tmp_path_factory.mktemp("install")
    src = root / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.egg-info", "build", "dist", ".tile", ".whl", ".venv", "*.h5",
        ".pytest_cache", ".hypothesis"))
    try:
        venv.create(root / "venv", with_pip=True)
    except Exception as exc:  # noqa: BLE001 -- e.g. no ensurepip on this Python
        pytest.skip(f"cannot create a venv here: {exc}")
    bin_dir = root / "venv" / "bin"
    pip = [bin_dir / "python", "-m", "pip", "--disable-pip-version-check", *PIP_OFFLINE]
    r = _run([*pip, "install", "-q", "numpy", "h5py", "tqdm", "build", "tomli; python_version < '3.11'"])
    if r.returncode:
        pytest.skip(f"pip cannot install numpy, h5py, tqdm, build here (offline?): {r.stderr.strip()[-300:]}")
    r = _run([bin_dir / "python", "-m", "build", "--sdist", "--outdir", root / "dist", src])
    if r.returncode and "Could not find a version" in r.stderr + r.stdout:
        pytest.skip(f"the build backend cannot be installed here (offline?): {r.stderr.strip()[-300:]}")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (sdist,) = (root / "dist").glob("ozhpc-*.tar.gz")
    r = _run([*pip, "install", "-q", "--no-deps", sdist])
    assert r.returncode == 0, r.stderr[-2000:]
    return bin_dir, sdist


def source_files() -> list[str]:
    """The files this tree is made of: ``git ls-files`` in a git checkout, the sdist's own list
    (``*.egg-info/SOURCES.txt``) in an unpacked sdist; skips in any other copy."""
    if (pathlib.Path(REPO) / ".git").exists():
        r = _run(["git", "-C", REPO, "ls-files"])
        assert r.returncode == 0, r.stderr
        return r.stdout.split()
    listed = sorted(pathlib.Path(REPO).glob("*.egg-info/SOURCES.txt"))
    if (pathlib.Path(REPO) / "PKG-INFO").exists() and listed:
        return listed[0].read_text().split()
    pytest.skip(f"{REPO} is neither a git checkout nor an unpacked sdist: no list of its files to compare")


def test_sdist_holds_the_license_docs_examples_jobs_and_slurm(sdist_venv):
    _, sdist = sdist_venv
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
        top = sdist.name[:-len(".tar.gz")]
        pkg_info = tar.extractfile(f"{top}/PKG-INFO").read().decode()
    assert "LICENSE" in names
    files = source_files()
    for folder in SDIST_DIRS:
        tracked = [f for f in files if f.startswith(folder + "/")]
        assert tracked and set(tracked) <= names, folder
    assert "License-Expression: BSD-3-Clause" in pkg_info
    assert not any(name.endswith((".h5", ".pyc")) for name in names)


def test_commands_without_mpi_from_the_installed_sdist(sdist_venv, tmp_path):
    bin_dir, _ = sdist_venv
    ozhpc = bin_dir / "ozhpc"
    r = _run([bin_dir / "python", "-c", "import mpi4py"])
    assert r.returncode == 1 and "No module named 'mpi4py'" in r.stderr   # really without MPI
    r = _run([ozhpc, "info"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "MPI: none (No module named 'mpi4py'); every command runs as one process" in r.stdout
    for name, shape, seed in (("A", "64x48", 1), ("B", "48x32", 2)):
        r = _run([ozhpc, "gen", "--shape", shape, "--seed", seed, f"in.h5:/{name}"], cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    digest = hashlib.sha256((tmp_path / "in.h5").read_bytes()).hexdigest()
    r = _run([ozhpc, "gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5:/C", "--engine", "numpy",
              "--report", "run.json"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and (tmp_path / "run.json").exists()
    r = _run([ozhpc, "check", "out.h5:/C", "--a", "in.h5:/A", "--b", "in.h5:/B", "--fingerprint"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "matches its attribute" in r.stdout
    # the same bits as this checkout's ozhpc (with MPI) computes from the same inputs
    r = run_cli(["gemm", "in.h5:/A", "in.h5:/B", "-o", "mine.h5:/C", "--engine", "numpy"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    theirs = _run([ozhpc, "fingerprint", "out.h5:/C"], cwd=tmp_path).stdout.split()[0]
    assert theirs == run_cli(["fingerprint", "mine.h5:/C"], cwd=tmp_path).stdout.split()[0]
    assert hashlib.sha256((tmp_path / "in.h5").read_bytes()).hexdigest() == digest


@pytest.mark.skipif(platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"),
                    reason="the gpu extra's CUDA wheels are for Linux x86_64 / aarch64")
def test_gpu_extra_resolves_with_nccl_and_one_cuda_minor(sdist_venv, tmp_path):
    """``pip install "ozhpc[gpu]"`` as pip would resolve it (``--dry-run``: metadata only, not the
    GBs of wheels): NCCL is among the packages, and the toolchain's wheels share one CUDA minor."""
    bin_dir, sdist = sdist_venv
    report = tmp_path / "gpu.json"
    r = _run([bin_dir / "python", "-m", "pip", "--disable-pip-version-check", *PIP_OFFLINE, "install", "--dry-run",
              "--ignore-installed", "--quiet", "--report", report, f"ozhpc[gpu] @ {sdist.as_uri()}"])
    assert r.returncode == 0, r.stderr[-2000:]
    install = {i["metadata"]["name"].lower(): i["metadata"] for i in json.loads(report.read_text())["install"]}
    assert any(req.startswith("nvidia-nccl-cu13") and 'extra == "gpu"' in req
               for req in install["ozhpc"]["requires_dist"])
    assert "nvidia-nccl-cu13" in install and "cupy-cuda13x" in install
    minors = {name: ".".join(install[name]["version"].split(".")[:2]) for name in CUDA_TOOLCHAIN}
    assert len(set(minors.values())) == 1, minors


def test_gpu_install_brings_nccl_and_info_says_it_in_one_line(sdist_venv, tmp_path):
    """A fresh venv with ``pip install "ozhpc[gpu]"`` (the real wheels, about 1.3 GB; skipped where
    they cannot be fetched): ``import cupy.cuda.nccl`` works without a GPU, and ``ozhpc info``
    lists nccl as available, with no third-party warning or traceback."""
    _, sdist = sdist_venv
    try:
        venv.create(tmp_path / "gpu", with_pip=True)
    except Exception as exc:  # noqa: BLE001 -- e.g. no ensurepip on this Python
        pytest.skip(f"cannot create a venv here: {exc}")
    py = tmp_path / "gpu" / "bin" / "python"
    r = _run([py, "-m", "pip", "--disable-pip-version-check", *PIP_OFFLINE, "install", "-q",
              f"ozhpc[gpu] @ {sdist.as_uri()}"])
    if r.returncode and ("Could not find a version" in r.stderr or "No matching distribution" in r.stderr
                         or "Network is unreachable" in r.stderr or "connection" in r.stderr.lower()):
        pytest.skip(f"the gpu extra's wheels cannot be fetched here: {r.stderr.strip()[-300:]}")
    assert r.returncode == 0, r.stderr[-2000:]
    r = _run([py, "-c", "import cupy.cuda.nccl as nccl; print(nccl.get_version())"])
    assert r.returncode == 0 and int(r.stdout) >= 22700, r.stdout + r.stderr[-2000:]
    r = _run([tmp_path / "gpu" / "bin" / "ozhpc", "info"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    transports = next(line for line in r.stdout.splitlines() if line.startswith("transports:"))
    assert "nccl available" in transports, r.stdout
    assert "Traceback" not in r.stdout + r.stderr and "Warning" not in r.stdout + r.stderr, r.stdout + r.stderr
