#!/usr/bin/env bash
# Start a one-node Slurm on this machine, as root, for the tests marked "slurm"
# (tests/test_slurm.py submits slurm/ozhpc-cpu.sbatch with `sbatch --wait`).
#
# Debian's slurm-wlm and munge; munged, slurmctld and slurmd are started by hand (CI
# machines have no systemd) with a minimal slurm.conf: MpiDefault=pmi2, no cgroups, no
# accounting, one partition "ci" with one node of OZHPC_SLURM_CPUS CPUs (default 4, more
# than the 2 cores CI has: config_overrides lets 4 single-CPU ranks run oversubscribed).
# Idempotent: does nothing when a Slurm already answers. Logs: /var/log/slurm/.
set -euo pipefail
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive

if sinfo -h -o %t 2>/dev/null | grep -qx idle; then
    echo "slurm.sh: a Slurm is already up"; exit 0
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    apt-get update -q
    apt-get install -y -q --no-install-recommends slurm-wlm munge
fi

host=$(hostname -s)
cpus=${OZHPC_SLURM_CPUS:-4}
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
cat > /etc/slurm/slurm.conf <<CONF
# Written by ozhpc .ci/slurm.sh: a throw-away one-node cluster for CI.
ClusterName=ozhpc-ci
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=pmi2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
InactiveLimit=0
KillWait=10
MinJobAge=300
SlurmdTimeout=300
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} State=UNKNOWN
PartitionName=ci Nodes=${host} Default=YES MaxTime=INFINITE State=UP
CONF

# munge: key from the package (or a fresh one), daemon as the munge user.
if [ ! -s /etc/munge/munge.key ]; then mungekey --create --force; fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0700 /etc/munge; chmod 0600 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
fi
for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.2; done
munge -n | unmunge >/dev/null || { echo "slurm.sh: munge does not work" >&2; exit 1; }

pgrep -x slurmctld >/dev/null || slurmctld -c      # -c: fresh state, no old jobs
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 120); do
    state=$(sinfo -h -o %t 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.5
done
if [ "$state" != idle ]; then
    echo "slurm.sh: node not idle (state '${state}') after 60 s" >&2
    tail -n 30 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
    exit 1
fi
# One real step proves PMI-2 + the pip MPICH work before the tests rely on it.
srun --mpi=pmi2 -n 2 python3 -c 'from mpi4py import MPI; c = MPI.COMM_WORLD; assert c.Get_size() == 2, c.Get_size()'
sinfo
echo "slurm.sh: Slurm up after $((SECONDS - start)) s"
