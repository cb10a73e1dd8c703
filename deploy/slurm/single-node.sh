#!/bin/bash
# A private, single-node Slurm on this host, for trying deploy/slurm/evalcore.sbatch
# without a real cluster (used by deploy/test-here.sh and tests/test_deploy_real.py).
#
#   deploy/slurm/single-node.sh start DIR   # munged + slurmctld + slurmd, all state in DIR
#   export SLURM_CONF=DIR/slurm.conf        # then sbatch/squeue/scancel talk to it
#   deploy/slurm/single-node.sh stop DIR    # stops exactly the daemons started for DIR
#
# Everything lives in DIR: slurm.conf, a fresh munge key and socket, the daemons'
# state, spool, logs and pid files. Nothing under /etc is read or written (the
# Slurm commands find the config through SLURM_CONF, munged gets its key,
# socket and pid file on the command line), and the Debian services "munge",
# "slurmctld" and "slurmd" are neither started nor changed. Needs root (slurmd
# runs jobs as the submitting user) and the Debian packages slurm-wlm and munge.
#
# The node is declared with at least 4 CPUs and 16 GB (SlurmdParameters=
# config_overrides), so that evalcore.sbatch with its defaults (4 tasks: the
# scheduler and 3 workers, --mem=16G) fits on a 2-core machine with less memory;
# the daemons listen on free ports picked at start, so this can run next to
# another Slurm.
set -euo pipefail

usage() { echo "usage: $0 start|stop|status DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
ACTION=$1
DIR=$(realpath -m "$2")

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop_pidfile() {
    local f=$1 pid
    [[ -s "$f" ]] || return 0
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
}

case "$ACTION" in
start)
    for exe in munged slurmctld slurmd sinfo; do
        command -v "$exe" >/dev/null || { echo "$exe not found: apt-get install slurm-wlm munge" >&2; exit 1; }
    done
    [[ $(id -u) -eq 0 ]] || { echo "$0 start must run as root" >&2; exit 1; }
    mkdir -p "$DIR"/{state,spool,log,munge,run}
    chmod 0700 "$DIR/munge"
    if [[ ! -s "$DIR/munge/munge.key" ]]; then
        dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
        chmod 0400 "$DIR/munge/munge.key"
    fi
    NODE=$(hostname -s)
    CPUS=$(nproc)
    (( CPUS < 4 )) && CPUS=4
    MEM_MB=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.8}' /proc/meminfo)
    (( MEM_MB < 16384 )) && MEM_MB=16384
    CTLD_PORT=$(free_port)
    SLURMD_PORT=$(free_port)
    cat > "$DIR/slurm.conf" <<EOF
# Written by deploy/slurm/single-node.sh: one node, this host, all state in $DIR
ClusterName=evalcore-local
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: this host has them in hybrid mode. linuxproc tracks a job's
# processes through /proc, which is enough to find and kill them on scancel.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=10
MinJobAge=600
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=local Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF="$DIR/slurm.conf"
    munged --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
        --seed-file="$DIR/munge/munged.seed" --force
    slurmctld -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF"
    for _ in $(seq 1 60); do
        state=$(sinfo -h -N -o '%t' 2>/dev/null | head -n1 || true)
        if [[ "$state" == idle* ]]; then
            echo "Slurm up: node $NODE ($CPUS CPUs, ${MEM_MB} MB); export SLURM_CONF=$SLURM_CONF"
            exit 0
        fi
        sleep 1
    done
    echo "Slurm did not come up (node state '${state:-none}'); logs in $DIR/log" >&2
    tail -n 20 "$DIR"/log/*.log >&2 || true
    exit 1
    ;;
stop)
    stop_pidfile "$DIR/run/slurmd.pid"
    stop_pidfile "$DIR/run/slurmctld.pid"
    stop_pidfile "$DIR/run/munged.pid"
    ;;
status)
    SLURM_CONF="$DIR/slurm.conf" sinfo -N
    ;;
*)
    usage
    ;;
esac
