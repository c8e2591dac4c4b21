#!/usr/bin/env bash
# Start a throwaway single-node Slurm (Debian's slurm-wlm: slurmctld + slurmd) with its own
# munged, on loopback, for the side-by-side benchmark bench/jobs.sh.
#
#   bench/slurm/setup.sh [DIR]       # DIR defaults to a new mktemp directory
#   export SLURM_CONF=DIR/etc/slurm.conf   # then sbatch/squeue/scancel talk to it
#   bench/slurm/stop.sh DIR          # stops exactly the daemons started here
#
# Everything lives under DIR: munge key, socket, pid and log files; slurm.conf and
# gres.conf; state, spool and logs; and the "GPUs", eight device files DIR/dev/nvidia0..7
# (character devices 195,N when mknod is allowed, plain files otherwise; nothing opens
# them, task/none does not constrain devices). One node named after this host, 16 CPUs
# (accepted on a smaller machine through SlurmdParameters=config_overrides), gres gpu:8,
# one partition "gpu". Ports: two free loopback ports; CommunicationParameters=NoInAddrAny,
# NoCtldInAddrAny make slurmd and slurmctld bind 127.0.0.1 rather than every address.
#
# Must run as root (SlurmUser=root, munged --force). Prints "SLURM_CONF=..." on its last
# line once sinfo reports the node idle; fails (with the logs' tails) after a deadline.
# Requires slurm-wlm and munge (tests/install-deps.sh installs them).
set -euo pipefail

deadline_s=${SLURM_SETUP_TIMEOUT:-60}

die() { echo "slurm/setup: $*" >&2; exit 1; }
[[ "$(id -u)" -eq 0 ]] || die "must run as root (SlurmUser=root, munged)"
for bin in munged mungekey slurmctld slurmd sinfo scontrol; do
    command -v "$bin" >/dev/null || die "$bin is missing: tests/install-deps.sh installs slurm-wlm and munge"
done

dir=${1:-$(mktemp -d -t atrium-slurm-XXXXXX)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
[[ ! -e "$dir/run/slurmctld.pid" ]] || die "$dir already has a running Slurm? (run/slurmctld.pid exists; bench/slurm/stop.sh $dir)"
mkdir -p "$dir"/{etc,munge,log,run,state,spool,dev}
chmod 0700 "$dir/munge"
chmod 0755 "$dir" "$dir"/{etc,log,run,state,spool,dev}

# --- munge: own key, socket, pid, log, seed ------------------------------------------
mungekey --create --force --keyfile="$dir/munge/munge.key" 2>/dev/null \
    || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$dir/munge/munge.key"
socket="$dir/munge/munge.socket"
munged --force \
    --socket="$socket" \
    --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/run/munged.pid" \
    --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" \
    --num-threads=4 \
    || die "munged did not start: $(tail -n 5 "$dir/log/munged.log" 2>/dev/null)"

# --- configuration --------------------------------------------------------------------
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [[ "$slurmd_port" == "$ctld_port" ]]; do slurmd_port=$(free_port); done

host=$(hostname -s)
mem_mb=$(awk '/^MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)

for n in 0 1 2 3 4 5 6 7; do
    rm -f "$dir/dev/nvidia$n"
    mknod "$dir/dev/nvidia$n" c 195 "$n" 2>/dev/null || : >"$dir/dev/nvidia$n"
done

cat >"$dir/etc/slurm.conf" <<CONF
# Throwaway single-node Slurm written by bench/slurm/setup.sh.
ClusterName=atriumbench
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd.%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=16 RealMemory=$mem_mb Gres=gpu:8 State=UNKNOWN
PartitionName=gpu Default=YES Nodes=ALL MaxTime=INFINITE State=UP
CONF

cat >"$dir/etc/gres.conf" <<CONF
Name=gpu File=$dir/dev/nvidia[0-7]
CONF

export SLURM_CONF="$dir/etc/slurm.conf"

# --- daemons --------------------------------------------------------------------------
# Both fork into the background and write their pid files; stop.sh reads those.
slurmctld -f "$SLURM_CONF" -i \
    || die "slurmctld did not start: $(tail -n 20 "$dir/log/slurmctld.log" 2>/dev/null)"
slurmd -f "$SLURM_CONF" -N "$host" \
    || die "slurmd did not start: $(tail -n 20 "$dir/log/slurmd.log" 2>/dev/null)"

# --- readiness: the node is idle in partition gpu ---------------------------------------
end=$((SECONDS + deadline_s))
state=""
while ((SECONDS < end)); do
    state=$(sinfo -h -p gpu -n "$host" -o '%T' 2>/dev/null || true)
    [[ "$state" == "idle" ]] && break
    sleep 0.1
done
if [[ "$state" != "idle" ]]; then
    echo "slurm/setup: node not idle after ${deadline_s}s (state: '${state:-no answer}')" >&2
    for log in slurmctld slurmd munged; do
        echo "--- $dir/log/$log.log" >&2
        tail -n 20 "$dir/log/$log.log" >&2 2>/dev/null || true
    done
    exit 1
fi
echo "slurm/setup: Slurm $(sinfo -V | awk '{print $2}') ready in $dir (node $host, ports $ctld_port/$slurmd_port)" >&2
echo "SLURM_CONF=$SLURM_CONF"
