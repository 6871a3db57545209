#!/usr/bin/env bash
# `make test-cluster`: a real single-node SLURM cluster on 127.0.0.1, two campaign cells
# submitted through `--executor slurm` (submitit), their results checked against a local
# run's (tests/cluster/check.py). Installs Debian's slurm-wlm and munge when missing (as
# root, as on CI); the daemons run from a temporary folder with a generated slurm.conf
# and are stopped on any exit (trap), as is the folder removed.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}

missing=()
command -v slurmctld >/dev/null 2>&1 || [ -x /usr/sbin/slurmctld ] || missing+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || [ -x /usr/sbin/munged ] || missing+=(munge)
if [ ${#missing[@]} -gt 0 ]; then
    echo "test-cluster: installing ${missing[*]} (apt-get)"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
export PATH="$PATH:/usr/sbin:/sbin"

TMP=$(mktemp -d /tmp/swan-slurm.XXXXXX)
PIDS=()
stop() {
    code=$?
    if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
        scancel --quiet --user "$(id -un)" >/dev/null 2>&1 || true
    fi
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    if [ "$code" -ne 0 ]; then
        for log in "$TMP"/*.log "$TMP"/work/*/work/*/submitit/*_log.*; do
            [ -f "$log" ] && { echo "== $log"; tail -n 20 "$log"; }
        done
    fi
    rm -rf "$TMP"
    exit "$code"
}
trap stop EXIT INT TERM

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# munge: its own key, socket and files in $TMP (root may run it with --force)
mkdir -p "$TMP/munge" "$TMP/munge-key" "$TMP/state" "$TMP/spool"
chmod 755 "$TMP" "$TMP/munge"
chmod 700 "$TMP/munge-key"
dd if=/dev/urandom of="$TMP/munge-key/munge.key" bs=1024 count=1 status=none
chmod 400 "$TMP/munge-key/munge.key"
munged --force --foreground --key-file="$TMP/munge-key/munge.key" \
    --socket="$TMP/munge/munge.socket" --pid-file="$TMP/munge-key/munged.pid" \
    --log-file="$TMP/munged.log" --seed-file="$TMP/munge-key/munged.seed" &
PIDS+=($!)
for _ in $(seq 50); do [ -S "$TMP/munge/munge.socket" ] && break; sleep 0.1; done

NODE=$(hostname -s)
export SLURM_CONF="$TMP/slurm.conf"
cat > "$SLURM_CONF" <<CONF
ClusterName=swantest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$TMP/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/slurmctld.log
SlurmdLogFile=$TMP/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=5
JobRequeue=1
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MaxArraySize=100
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=swan Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF

slurmctld -D -i -f "$SLURM_CONF" >"$TMP/slurmctld.out.log" 2>&1 &
PIDS+=($!)
slurmd -D -f "$SLURM_CONF" >"$TMP/slurmd.out.log" 2>&1 &
PIDS+=($!)
up=""
for _ in $(seq 150); do
    if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then up=1; break; fi
    sleep 0.2
done
if [ -z "$up" ]; then
    echo "test-cluster: FAILED: the SLURM node did not come up within 30 s (logs below)"
    exit 1
fi
sinfo -h -o '%P %D %T %C'

# A login node's environment reaches the jobs (sbatch exports it): the CPU backend. A job
# that never runs would leave the check waiting: it is given 10 minutes.
JAX_PLATFORMS=cpu timeout 600 "$PY" -m tests.cluster.check "$TMP/work"
