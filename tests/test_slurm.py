"""The shipped CPU batch script under a real Slurm: `sbatch --wait`, then output and report.

Skipped unless a Slurm answers (`sinfo` works); .ci/run starts a one-node Slurm
(.ci/slurm.sh) and sets OZHPC_REQUIRE_SLURM=1 so that a missing Slurm fails CI instead.
"""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO, run_cli
from test_jobfile import check_report, sha256_of_dataset

pytestmark = pytest.mark.slurm
SCRIPT = os.path.join(REPO, "slurm", "ozhpc-cpu.sbatch")


def slurm_up() -> bool:
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return False
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and any(s.strip() in ("idle", "mix", "alloc") for s in proc.stdout.splitlines())


@pytest.fixture(scope="module", autouse=True)
def need_slurm():
    if not slurm_up():
        if os.environ.get("OZHPC_REQUIRE_SLURM") == "1":
            pytest.fail("OZHPC_REQUIRE_SLURM=1 but no Slurm answers (sinfo); see .ci/slurm.sh")
        pytest.skip("no Slurm reachable (sinfo does not work)")


def sbatch(args, cwd, timeout=420):
    proc = subprocess.run(["sbatch", "--wait", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    match = re.search(r"Submitted batch job (\d+)", proc.stdout)
    assert match, f"sbatch said: {proc.stdout}\n{proc.stderr}"
    return proc, match.group(1)


def test_cpu_batch_script_runs_a_job_file(tmp_path):
    a, b = tmp_path / "in.h5:/A", tmp_path / "in.h5:/B"
    assert run_cli(["gen", "--shape", "23x31", "--seed", "1", a]).returncode == 0
    assert run_cli(["gen", "--shape", "31x17", "--seed", "2", b]).returncode == 0
    job = tmp_path / "job.toml"
    job.write_text("""
[inputs]
a = "in.h5:/A"
b = "in.h5:/B"
[output]
c = "out.h5:/C"
report = "unused.json"     # the sbatch script's reports/ozhpc-<jobid>.json replaces it
[layout]
grid = "2x2"
block = 5
[ozaki]
engine = "numpy"
""")
    proc, jobid = sbatch([SCRIPT, job], cwd=tmp_path)
    out = tmp_path / f"ozhpc-cpu-{jobid}.out"
    log = out.read_text() if out.exists() else "(no output file)"
    assert proc.returncode == 0, f"sbatch --wait exit {proc.returncode}\n{proc.stderr}\n{log}"

    # The output file: the banner, rank 0's progress lines, one summary.
    assert f"ozhpc: job {jobid}, 4 ranks on 1 node(s)" in log
    assert "ozhpc: panel 2/2 (100%)" in log, log  # k = 31 over a 2x2 grid: default panels of 16
    assert log.count("C = 23x17 (k = 31)") == 1, log
    assert "4 ranks, grid 2x2" in log

    report_path = tmp_path / "reports" / f"ozhpc-{jobid}.json"
    report = json.loads(report_path.read_text())
    check_report(report, 23, 17, 31, 4, (2, 2), (5, 5), tmp_path / "out.h5")
    assert not (tmp_path / "unused.json").exists()

    # Bitwise the same as one process without Slurm.
    proc = run_cli(["gemm", a, b, "-o", tmp_path / "one.h5:/C", "--engine", "numpy", "--progress", "off"])
    assert proc.returncode == 0, proc.stderr
    assert sha256_of_dataset(tmp_path / "one.h5", "/C") == report["sha256"]


def test_bad_job_file_fails_the_batch_job(tmp_path):
    job = tmp_path / "bad.toml"
    job.write_text('[inputs]\na = "missing.h5:/A"\nb = "missing.h5:/B"\n[output]\nc = "out.h5:/C"\n')
    proc, jobid = sbatch([SCRIPT, job], cwd=tmp_path, timeout=180)
    assert proc.returncode != 0
    log = (tmp_path / f"ozhpc-cpu-{jobid}.out").read_text()
    assert f"{job}: inputs.a file {str(tmp_path / 'missing.h5')!r} does not exist" in log
    assert not (tmp_path / "out.h5").exists()
