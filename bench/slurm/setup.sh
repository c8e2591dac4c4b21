#!/usr/bin/env bash
# Start a throwaway Slurm (Debian's slurm-wlm: slurmctld + slurmd) with its own munged, for
# the side-by-side benchmarks (bench/jobs.sh, bench/slurm_poll.sh) and by hand.
#
#   bench/slurm/setup.sh [DIR]       # DIR defaults to a new mktemp directory
#   export SLURM_CONF=DIR/etc/slurm.conf   # then sbatch/squeue/scancel talk to it
#   bench/slurm/stop.sh DIR          # stops exactly the daemons started here
#
# SLURM_NODES=3 starts the three-node cluster of the tests (tests/src/support/slurm):
# node1 (gpu:a100:2), node2 (gpu:a100:2 and the MIG-style gpu:1g.10gb:2), node3 (CPUs
# only), each its own slurmd with its own hostname and address in a network and UTS
# namespace of its own, on a private bridge (10.x.y.0/24, its name in DIR/run/bridge);
# slurmctld listens on the host's side of it. SLURM_MAX_JOB_COUNT raises MaxJobCount
# (Slurm's default: 10,000). SLURM_CPUS sets each node's CPUs (16; 4 with SLURM_NODES=3).
# SLURM_ACCT_GATHER=linux samples each job's processes (JobAcctGatherType, default none)
# every SLURM_ACCT_GATHER_FREQUENCY seconds (30, Slurm's default).
#
# The daemons and the jobs resolve users and hosts through nss_wrapper: DIR/passwd and
# DIR/group (copies of /etc/passwd and /etc/group, or of the caller's NSS_WRAPPER_PASSWD
# and NSS_WRAPPER_GROUP) and DIR/hosts. DIR/bin holds Slurm's client commands wrapped
# with the same environment: a portal's `[slurm] bin_dir`.
#
# Everything lives under DIR: munge key, socket, pid and log files; slurm.conf and
# gres.conf; state, spool and logs; and the "GPUs", eight device files DIR/dev/nvidia0..7
# (character devices 195,N when mknod is allowed, plain files otherwise; nothing opens
# them, task/none does not constrain devices). By default one node named after this host,
# 16 CPUs (accepted on a smaller machine through SlurmdParameters=config_overrides), gres
# gpu:8, one partition "gpu". Ports: two free loopback ports;
# CommunicationParameters=NoInAddrAny,NoCtldInAddrAny make slurmd and slurmctld bind
# their own address rather than every address.
#
# Must run as root (SlurmUser=root, munged --force). Prints "SLURM_CONF=..." on its last
# line once sinfo reports the node idle; fails (with the logs' tails) after a deadline.
# Requires slurm-wlm and munge (tests/install-deps.sh installs them).
set -euo pipefail

deadline_s=${SLURM_SETUP_TIMEOUT:-60}

die() { echo "slurm/setup: $*" >&2; exit 1; }
[[ "$(id -u)" -eq 0 ]] || die "must run as root (SlurmUser=root, munged)"
nodes=${SLURM_NODES:-1}
[[ "$nodes" == 1 || "$nodes" == 3 ]] || die "SLURM_NODES must be 1 or 3"
nss_wrapper=""
for lib in /usr/lib/x86_64-linux-gnu/libnss_wrapper.so /usr/lib/aarch64-linux-gnu/libnss_wrapper.so /usr/lib64/libnss_wrapper.so; do
    [[ -f "$lib" ]] && nss_wrapper=$lib && break
done
[[ -n "$nss_wrapper" ]] || die "libnss_wrapper.so is missing: tests/install-deps.sh installs libnss-wrapper"
for bin in munged mungekey slurmctld slurmd sinfo scontrol ip unshare nsenter; do
    command -v "$bin" >/dev/null || die "$bin is missing: tests/install-deps.sh installs slurm-wlm and munge"
done

dir=${1:-$(mktemp -d -t atrium-slurm-XXXXXX)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
[[ ! -e "$dir/run/slurmctld.pid" ]] || die "$dir already has a running Slurm? (run/slurmctld.pid exists; bench/slurm/stop.sh $dir)"
mkdir -p "$dir"/{etc,munge,log,run,state,spool,dev,bin}
chmod 0755 "$dir" "$dir"/{etc,munge,log,run,state,spool,dev,bin}

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

# --- users and hosts (nss_wrapper) ------------------------------------------------------
cp "${NSS_WRAPPER_PASSWD:-/etc/passwd}" "$dir/passwd"
cp "${NSS_WRAPPER_GROUP:-/etc/group}" "$dir/group"
chmod 0644 "$dir/passwd" "$dir/group"
ctld_addr=127.0.0.1
if [[ "$nodes" == 3 ]]; then
    # A /24 of 10.128.0.0/9 that no interface uses, and a bridge on it.
    for _ in $(seq 1 20); do
        net="10.$((128 + RANDOM % 127)).$((RANDOM % 256))"
        ip -4 -o addr show | grep -qF " $net." || break
    done
    bridge=$(printf 'atb%06x' $((RANDOM * 32768 + RANDOM)) | cut -c1-9)
    ip link add "$bridge" type bridge || die "cannot create bridge $bridge"
    echo "$bridge" >"$dir/run/bridge"
    ip addr add "$net.1/24" dev "$bridge"
    ip link set "$bridge" up
    ctld_addr=$net.1
    {
        echo "$net.1 $host"
        for i in 1 2 3; do echo "$net.1$i node$i"; done
    } >"$dir/hosts"
else
    : >"$dir/hosts"
fi
chmod 0644 "$dir/hosts"
export LD_PRELOAD=$nss_wrapper NSS_WRAPPER_PASSWD=$dir/passwd NSS_WRAPPER_GROUP=$dir/group
[[ "$nodes" == 1 ]] || export NSS_WRAPPER_HOSTS=$dir/hosts
nss_exports="export LD_PRELOAD=$LD_PRELOAD NSS_WRAPPER_PASSWD=$NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP=$NSS_WRAPPER_GROUP${NSS_WRAPPER_HOSTS:+ NSS_WRAPPER_HOSTS=$NSS_WRAPPER_HOSTS}"
# The jobs' tasks get the same environment; so do the client commands in DIR/bin.
# (A TaskProlog prints one "export NAME=VALUE" a line.)
{
    echo '#!/bin/sh'
    for var in LD_PRELOAD NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP NSS_WRAPPER_HOSTS; do
        [[ -n "${!var:-}" ]] && echo "echo 'export $var=${!var}'"
    done
} >"$dir/etc/task-prolog"
chmod 0755 "$dir/etc/task-prolog"
for cmd in sbatch squeue scontrol scancel sinfo sacct sacctmgr srun salloc; do
    real=$(command -v "$cmd") || continue
    printf '#!/bin/sh\n%s\nexec %s "$@"\n' "$nss_exports" "$real" >"$dir/bin/$cmd"
    chmod 0755 "$dir/bin/$cmd"
done

for n in 0 1 2 3 4 5 6 7; do
    rm -f "$dir/dev/nvidia$n"
    mknod "$dir/dev/nvidia$n" c 195 "$n" 2>/dev/null || : >"$dir/dev/nvidia$n"
done

if [[ "$nodes" == 3 ]]; then
    cpus=${SLURM_CPUS:-4}
    node_lines="NodeName=node1 NodeAddr=$net.11 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:a100:2 State=UNKNOWN
NodeName=node2 NodeAddr=$net.12 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:a100:2,gpu:1g.10gb:2 State=UNKNOWN
NodeName=node3 NodeAddr=$net.13 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN"
    gres_lines="NodeName=node[1-2] Name=gpu Type=a100 File=$dir/dev/nvidia[0-1]
NodeName=node2 Name=gpu Type=1g.10gb File=$dir/dev/nvidia[2-3]"
else
    node_lines="NodeName=$host NodeAddr=127.0.0.1 CPUs=${SLURM_CPUS:-16} RealMemory=$mem_mb Gres=gpu:8 State=UNKNOWN"
    gres_lines="Name=gpu File=$dir/dev/nvidia[0-7]"
fi

cat >"$dir/etc/slurm.conf" <<CONF
# Throwaway Slurm written by bench/slurm/setup.sh.
ClusterName=atriumbench
SlurmctldHost=$host($ctld_addr)
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
SlurmdPidFile=$dir/run/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
TaskProlog=$dir/etc/task-prolog
MailProg=/bin/true
MaxJobCount=${SLURM_MAX_JOB_COUNT:-10000}
SlurmdTimeout=${SLURMD_TIMEOUT:-300}
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
JobAcctGatherType=jobacct_gather/${SLURM_ACCT_GATHER:-none}
JobAcctGatherFrequency=task=${SLURM_ACCT_GATHER_FREQUENCY:-30}
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
$node_lines
PartitionName=gpu Default=YES Nodes=ALL MaxTime=INFINITE State=UP
CONF

cat >"$dir/etc/gres.conf" <<CONF
$gres_lines
CONF

export SLURM_CONF="$dir/etc/slurm.conf"

# --- daemons --------------------------------------------------------------------------
# Both fork into the background and write their pid files; stop.sh reads those.
slurmctld -f "$SLURM_CONF" -i \
    || die "slurmctld did not start: $(tail -n 20 "$dir/log/slurmctld.log" 2>/dev/null)"
if [[ "$nodes" == 3 ]]; then
    # Each slurmd in namespaces of its own: the shell takes the node's hostname, waits for
    # its address, then starts slurmd (which forks into the background and keeps them).
    for i in 1 2 3; do
        ready="$dir/run/node$i.network"
        unshare --net --uts -- sh -c 'hostname "$1" && while [ ! -e "$2" ]; do sleep 0.02; done && exec slurmd -f "$3" -N "$1"' \
            sh "node$i" "$ready" "$SLURM_CONF" >>"$dir/log/slurmd.node$i.out" 2>&1 &
        pid=$!
        for _ in $(seq 1 200); do
            [[ "$(readlink "/proc/$pid/ns/net")" != "$(readlink /proc/self/ns/net)" ]] && break
            sleep 0.01
        done
        ip link add "${bridge}n$i" type veth peer name eth0 netns "$pid"
        ip link set "${bridge}n$i" master "$bridge" up
        nsenter --target "$pid" --net ip addr add "$net.1$i/24" dev eth0
        nsenter --target "$pid" --net ip link set eth0 up
        nsenter --target "$pid" --net ip link set lo up
        : >"$ready"
    done
else
    slurmd -f "$SLURM_CONF" -N "$host" \
        || die "slurmd did not start: $(tail -n 20 "$dir/log/slurmd.$host.log" 2>/dev/null)"
fi

# --- readiness: the node is idle in partition gpu ---------------------------------------
end=$((SECONDS + deadline_s))
state=""
ready=false
while ((SECONDS < end)); do
    state=$(sinfo -h -N -p gpu -o '%T' 2>/dev/null | sort -u | tr '\n' ' ' || true)
    if [[ "$state" == "idle " && $(sinfo -h -N -p gpu -o '%N' 2>/dev/null | wc -l) -eq "$nodes" ]]; then
        ready=true
        break
    fi
    sleep 0.1
done
if ! $ready; then
    echo "slurm/setup: node not idle after ${deadline_s}s (state: '${state:-no answer}')" >&2
    for log in "$dir"/log/*.log; do
        echo "--- $log" >&2
        tail -n 20 "$log" >&2 2>/dev/null || true
    done
    exit 1
fi
echo "slurm/setup: Slurm $(sinfo -V | awk '{print $2}') ready in $dir ($(sinfo -h -N -o %N | sort -u | tr '\n' ' ')ports $ctld_port/$slurmd_port)" >&2
echo "SLURM_CONF=$SLURM_CONF"
