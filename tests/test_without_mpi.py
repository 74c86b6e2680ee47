"""Without a loadable MPI library every command runs as one process (a 1x1 grid); a launch of
several ranks is refused in one line (ozhpc/parallel/mpi.py).

``MPI4PY_LIBMPI`` pointing nowhere makes mpi4py fail as it does on a machine without any MPI
("RuntimeError: cannot load MPI library"); tests/test_install.py runs the same commands from
a fresh venv that has no mpi4py at all.
"""
import hashlib

import pytest

from conftest import run_cli

NO_MPI = {"MPI4PY_LIBMPI": "/nonexistent/libmpi.so"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("nompi")
    for name, shape, seed in (("A", "48x40", 1), ("B", "40x24", 2)):
        r = run_cli(["gen", "--shape", shape, "--seed", seed, f"{d}/in.h5:/{name}"])
        assert r.returncode == 0, r.stderr
    return d / "in.h5"


def test_info_says_one_process_without_mpi():
    r = run_cli(["info"], env=NO_MPI)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert "MPI: none (cannot load MPI library); every command runs as one process" in r.stdout
    assert "MPI ranks: 1 on 1 node(s)" in r.stdout


def test_gen_gemm_check_without_mpi_give_the_bits_of_a_run_with_mpi(inputs, tmp_path):
    digest = hashlib.sha256(inputs.read_bytes()).hexdigest()
    r = run_cli(["gen", "--shape", "48x40", "--seed", "1", f"{tmp_path}/gen.h5:/A"], env=NO_MPI)
    assert r.returncode == 0, r.stderr
    prints = {}
    for name, env in (("serial", NO_MPI), ("mpi", {})):
        r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{tmp_path}/{name}.h5:/C",
                     "--engine", "numpy", "--block", "8", "--panel", "16"], env=env)
        assert r.returncode == 0, r.stderr
        r = run_cli(["check", f"{tmp_path}/{name}.h5:/C", "--a", f"{inputs}:/A", "--b", f"{inputs}:/B",
                     "--fingerprint"], env=env)
        assert r.returncode == 0, r.stderr
        assert "matches its attribute" in r.stdout
        prints[name] = r.stdout.split("fingerprint ")[1].split(":")[0]
    assert prints["serial"] == prints["mpi"]
    r = run_cli(["fingerprint", f"{tmp_path}/gen.h5:/A"])
    assert r.stdout.split()[0] == run_cli(["fingerprint", f"{inputs}:/A"]).stdout.split()[0]
    assert hashlib.sha256(inputs.read_bytes()).hexdigest() == digest


@pytest.mark.parametrize("launcher", [
    {"PMI_SIZE": "3", "PMI_RANK": "{rank}"},                              # MPICH / Intel MPI
    {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "{rank}"},      # Open MPI
    {"SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4", "SLURM_PROCID": "{rank}"},  # srun
])
def test_several_ranks_without_mpi_are_refused_in_one_line(inputs, tmp_path, launcher):
    out = tmp_path / "out.h5"
    for rank in (0, 1):
        env = dict(NO_MPI, **{k: v.format(rank=rank) for k, v in launcher.items()})
        r = run_cli(["gemm", f"{inputs}:/A", f"{inputs}:/B", "-o", f"{out}:/C"], env=env)
        assert r.returncode == 2
        sign = next(f"{k}={v}" for k, v in launcher.items() if k.endswith(("SIZE", "NUM_TASKS")))
        expected = (f"ozhpc gemm: error: this is one of several MPI ranks ({sign}), but there is no MPI "
                    "library to join them (mpi4py: cannot load MPI library); install one (pip install "
                    "'ozhpc[mpich]', or build mpi4py against the site's MPI: README, 'Install'), "
                    "or run one process\n")
        assert r.stderr == (expected if rank == 0 else "")
        assert r.stdout == "" and not out.exists()


def test_info_under_a_launch_without_mpi_says_why_commands_refuse_it():
    r = run_cli(["info"], env=dict(NO_MPI, PMI_SIZE="2", PMI_RANK="0"))
    assert r.returncode == 0, r.stderr
    assert "; this is such a launch (PMI_SIZE=2): other commands refuse it\n" in r.stdout
    r = run_cli(["info"], env=dict(NO_MPI, PMI_SIZE="2", PMI_RANK="1"))
    assert r.returncode == 0 and r.stdout == ""   # rank 1 says nothing


def test_launch_sign():
    from ozhpc.parallel.mpi import launch_sign

    assert launch_sign({}) is None
    assert launch_sign({"PMI_SIZE": "1", "PMI_RANK": "0"}) is None
    assert launch_sign({"PMIX_RANK": "2"}) == "PMIX_RANK=2"
    # a batch script's own shell (sbatch --ntasks=4) is one process, not a rank of a launch
    assert launch_sign({"SLURM_NTASKS": "4", "SLURM_PROCID": "0"}) is None
    assert launch_sign({"SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "0"}) == "SLURM_STEP_NUM_TASKS=4"


def test_serial_comm_collectives_are_the_identity():
    import numpy as np

    from ozhpc.parallel import serial_comm as MPI

    comm = MPI.COMM_WORLD.Create_cart([1, 1])
    assert comm.Get_coords(0) == [0, 0] and comm.Sub([False, True]).Get_size() == 1
    assert comm.allgather(5) == [5] and comm.bcast("x") == "x" and comm.gather(1) == [1]
    buf = np.arange(4.0)
    comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.MAX)
    out = np.zeros(4)
    comm.Allreduce(buf, out, op=MPI.SUM)
    assert out.tolist() == [0.0, 1.0, 2.0, 3.0]
    comm.send("token", dest=0, tag=7)
    assert comm.recv(source=0, tag=7) == "token"
    with pytest.raises(ValueError):
        MPI.COMM_WORLD.Create_cart([2, 1])


def test_only_parallel_mpi_imports_mpi4py():
    """Every module takes MPI from ozhpc.parallel.mpi, so that no MPI library means one process,
    not an ImportError or a "cannot load MPI library" traceback in some command."""
    import ast
    import pathlib

    import ozhpc

    root = pathlib.Path(ozhpc.__file__).parent
    direct = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(name.split(".")[0] == "mpi4py" for name in names):
                direct.append(f"{path.relative_to(root)}:{node.lineno}")
    assert {place.split(":")[0] for place in direct} == {"parallel/mpi.py"}, direct
