"""Every memory limit that applies is checked before the compute: MemAvailable,
``ulimit -v`` / ``-d``, the cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``, ancestors
too), Slurm's ``--mem`` / ``--mem-per-cpu``; the tightest one, per rank and per node, is named
in the one-line error. A MemoryError the check could not foresee is one line and exit 2 too."""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time

import pytest

from ozhpc.errors import InputError
from ozhpc.run.resources import BASE_BYTES, MemoryEstimate, MemorySources, binding_limit, check_matrix_fits, \
    check_memory, memory_limits

from conftest import REPO
from helpers.inputs import square_inputs

GIB, MIB = 1 << 30, 1 << 20
INF = resource.RLIM_INFINITY


def fake_root(tmp_path, *, available=64 * GIB, cgroup="0::/\n", files=None, status=""):
    """A directory laid out like / for MemorySources: proc/meminfo, proc/self/{cgroup,status} and
    cgroup files (path relative to the root -> content)."""
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/meminfo").write_text(f"MemTotal: 1 kB\nMemAvailable: {available // 1024} kB\n")
    (tmp_path / "proc/self/cgroup").write_text(cgroup)
    (tmp_path / "proc/self/status").write_text(status)
    for path, text in (files or {}).items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return str(tmp_path)


def no_rlimits(which):
    return INF, INF


def sources(root, environ=None, getrlimit=no_rlimits):
    return MemorySources(root=root, environ=environ or {}, getrlimit=getrlimit)


def names(limits):
    return sorted((lim.name, lim.free, lim.per_node) for lim in limits)


def estimate(host):
    return MemoryEstimate(host=host, device=0, planes=8, note="plan")


def test_memavailable_alone(tmp_path):
    src = sources(fake_root(tmp_path, available=8 * GIB))
    assert names(memory_limits(src)) == [("the node's available memory (MemAvailable)", 8 * GIB, True)]
    assert binding_limit(3 * GIB, 2, src) is None
    assert binding_limit(5 * GIB, 2, src).free == 8 * GIB  # two ranks share the node


def test_cgroup_v2_of_the_process_and_its_ancestors(tmp_path):
    root = fake_root(tmp_path, cgroup="0::/job/step\n", files={
        "sys/fs/cgroup/job/memory.max": f"{6 * GIB}\n",
        "sys/fs/cgroup/job/memory.current": f"{1 * GIB}\n",
        "sys/fs/cgroup/job/memory.stat": f"anon 1\ninactive_file {512 * MIB}\n",
        "sys/fs/cgroup/job/step/memory.max": "max\n",
        "sys/fs/cgroup/job/step/memory.current": f"{GIB}\n",
    })
    limits = memory_limits(sources(root))
    cgroup = [lim for lim in limits if "cgroup" in lim.name]
    # 6 GiB less the 1 GiB used, of which 0.5 GiB is page cache the kernel can reclaim
    assert [(lim.name, lim.free) for lim in cgroup] == [("the cgroup limit memory.max of 6 GiB (/job)",
                                                         6 * GIB - GIB + 512 * MIB)]
    with pytest.raises(InputError) as info:
        check_memory(estimate(2 * GIB), 3, sources=sources(root))
    assert str(info.value) == ("not enough memory: peak per rank: host 2 GiB (plan) x 3 rank(s) on this node, "
                               "5.5 GiB available under the cgroup limit memory.max of 6 GiB (/job); use more "
                               "ranks or nodes, or a smaller problem")
    check_memory(estimate(GIB), 3, sources=sources(root))


def test_cgroup_v1_in_a_container_namespace(tmp_path):
    """/proc/self/cgroup names the host's path; the container mounts only its own subtree."""
    root = fake_root(tmp_path, cgroup="4:memory:/process_api/abc\n0::/\n", files={
        "sys/fs/cgroup/memory/abc/memory.limit_in_bytes": f"{4 * GIB}\n",
        "sys/fs/cgroup/memory/abc/memory.usage_in_bytes": f"{GIB}\n",
        "sys/fs/cgroup/memory/abc/memory.stat": "total_inactive_file 0\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",  # v1's "no limit"
    })
    cgroup = [lim for lim in memory_limits(sources(root)) if "cgroup" in lim.name]
    assert [(lim.name, lim.free) for lim in cgroup] == [("the cgroup limit memory.limit_in_bytes of 4 GiB (/abc)",
                                                         3 * GIB)]


@pytest.mark.parametrize("environ,name,free,per_node", [
    ({"SLURM_MEM_PER_NODE": "4096"}, "Slurm's --mem=4096M (SLURM_MEM_PER_NODE)", 4 * GIB, True),
    ({"SLURM_MEM_PER_CPU": "1000", "SLURM_CPUS_ON_NODE": "4"},
     "Slurm's --mem-per-cpu=1000M x 4 CPUs on this node (SLURM_MEM_PER_CPU, SLURM_CPUS_ON_NODE)", 4000 * MIB, True),
    ({"SLURM_MEM_PER_CPU": "1000", "SLURM_CPUS_PER_TASK": "2"},
     "Slurm's --mem-per-cpu=1000M x 2 CPU(s) per task (SLURM_MEM_PER_CPU)", 2000 * MIB, False),
    ({"SLURM_MEM_PER_CPU": "1000"}, "Slurm's --mem-per-cpu=1000M x 1 CPU(s) per task (SLURM_MEM_PER_CPU)",
     1000 * MIB, False),
])
def test_slurm_memory(tmp_path, environ, name, free, per_node):
    limits = memory_limits(sources(fake_root(tmp_path), environ))
    assert (name, free, per_node) in names(limits)


def test_rlimits_less_what_the_process_maps_now(tmp_path):
    root = fake_root(tmp_path, status=f"VmSize:\t{300 * 1024} kB\nVmData:\t{100 * 1024} kB\n")

    def limited(which):
        return {resource.RLIMIT_AS: (GIB, INF), resource.RLIMIT_DATA: (2 * GIB, 2 * GIB)}.get(which, (INF, INF))
    limits = names(memory_limits(sources(root, getrlimit=limited)))
    assert ("ulimit -v (RLIMIT_AS) of 1 GiB", GIB - 300 * MIB, False) in limits
    assert ("ulimit -d (RLIMIT_DATA) of 2 GiB", 2 * GIB - 100 * MIB, False) in limits


def test_the_tightest_limit_per_rank_is_named(tmp_path):
    """A per-node limit is divided among the node's ranks; a per-rank one is not."""
    root = fake_root(tmp_path, available=64 * GIB, status="VmSize:\t0 kB\n")

    def limited(which):
        return (3 * GIB, INF) if which == resource.RLIMIT_AS else (INF, INF)
    src = sources(root, {"SLURM_MEM_PER_NODE": str(16 * 1024)}, limited)
    assert binding_limit(2 * GIB, 4, src) is None
    assert binding_limit(5 * GIB, 2, src).name == "ulimit -v (RLIMIT_AS) of 3 GiB"  # 3 GiB < 16/2
    assert binding_limit(5 * GIB, 8, src).name == "Slurm's --mem=16384M (SLURM_MEM_PER_NODE)"  # 16/8 < 3
    with pytest.raises(InputError) as info:
        check_matrix_fits(20000, 20000, 1, src)
    assert str(info.value) == ("not enough memory for a 20000x20000 matrix: about "
                               f"{(BASE_BYTES + 3 * 8 * 20000 * 20000) / GIB:.3g} GiB needed, 3 GiB available "
                               "under ulimit -v (RLIMIT_AS) of 3 GiB")


def test_unreadable_sources_are_no_limit(tmp_path):
    assert memory_limits(sources(str(tmp_path))) == []
    assert binding_limit(1 << 50, 1, sources(str(tmp_path))) is None


# --------------------------------------------------------------- real processes

N = 1200  # the product's estimate (about 0.45 GiB) is above the room left under the limit below


@pytest.fixture
def d(tmp_path):
    return square_inputs(tmp_path, N)


def env():
    e = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
             OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return e


def limit_address_space(nbytes):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))


GEMM = ["gemm", "in.h5:/A", "in.h5:/B", "-o", "out.h5:/C", "--engine", "numpy", "--progress", "off"]


def test_ulimit_v_is_refused_before_the_compute(d):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "ozhpc", *GEMM], cwd=d, env=env(), capture_output=True, text=True,
                       preexec_fn=limit_address_space(600 * MIB), timeout=120)
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert len(lines) == 1 and lines[0].startswith("ozhpc gemm: error: not enough memory: peak per rank: host "), lines
    assert lines[0].endswith("available under ulimit -v (RLIMIT_AS) of 0.586 GiB; use more ranks or nodes, "
                             "or a smaller problem"), lines
    assert time.monotonic() - t0 < 60
    assert sorted(os.listdir(d)) == ["in.h5"]


UNFORESEEN = """
import sys
import ozhpc.parallel.summa as summa
def fail(*a, **k):   # an allocation under a limit the check cannot see (OpenBLAS would abort in C itself)
    raise MemoryError("Unable to allocate 1.00 TiB for an array with shape (376832, 376832)")
summa.Summa.__call__ = fail
from ozhpc.cli import entry_point
sys.argv = ["ozhpc"] + sys.argv[1:]
entry_point()
"""


def test_memory_error_mid_compute_is_one_line(d):
    script = d / "unforeseen.py"
    script.write_text(UNFORESEEN)
    r = subprocess.run([sys.executable, str(script), *GEMM], cwd=d, env=env(), capture_output=True, text=True,
                       timeout=120)
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert len(lines) == 1 and lines[0].startswith("ozhpc gemm: error: out of memory on rank 0 ("), lines
    assert lines[0].endswith("; use more ranks or nodes, or a smaller problem"), lines
    assert sorted(os.listdir(d)) == ["in.h5", "unforeseen.py"]


ONE_RANK_FAILS = """
import os, sys
import ozhpc.parallel.summa as summa
if os.environ.get("PMI_RANK") == "1":
    def fail(*a, **k):
        raise MemoryError("Unable to allocate 1.00 TiB")
    summa.Summa.__call__ = fail
from ozhpc.cli import entry_point
sys.argv = ["ozhpc"] + sys.argv[1:]
entry_point()
"""


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec not found")
def test_memory_error_on_one_rank_ends_every_rank_with_one_line(d):
    script = d / "one_rank.py"
    script.write_text(ONE_RANK_FAILS)
    r = subprocess.run([shutil.which("mpiexec"), "-n", "3", sys.executable, str(script), *GEMM[:-2], "--progress",
                        "off", "--block", "64"], cwd=d, env=env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.splitlines() == ["ozhpc gemm: error: out of memory on rank 1 "
                                     f"({os.uname().nodename}): Unable to allocate 1.00 TiB; use more ranks or "
                                     "nodes, or a smaller problem"], r.stderr
    assert sorted(os.listdir(d)) == ["in.h5", "one_rank.py"]
