#!/usr/bin/env bash
# Stop the throwaway Slurm started by bench/slurm/setup.sh DIR: slurmd, slurmctld, munged,
# each by the pid in its DIR/run/*.pid file (and only if that pid is still the daemon
# started with DIR's configuration). Leaves DIR in place; add --rm to delete it.
#
#   bench/slurm/stop.sh DIR [--rm]
set -euo pipefail

dir=${1:?usage: bench/slurm/stop.sh DIR [--rm]}
[[ -d "$dir" ]] || { echo "slurm/stop: no such directory: $dir" >&2; exit 1; }
dir=$(cd "$dir" && pwd)

# stop NAME MARKER: SIGTERM the pid in run/NAME.pid if its command line mentions MARKER,
# wait up to 10 s for it to exit, then SIGKILL it.
stop() {
    local name=$1 marker=$2 pidfile="$dir/run/$1.pid" pid
    [[ -s "$pidfile" ]] || return 0
    pid=$(<"$pidfile")
    if [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$marker"; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            [[ -e "/proc/$pid" ]] || break
            sleep 0.1
        done
        if [[ -e "/proc/$pid" ]]; then
            echo "slurm/stop: $name (pid $pid) ignored SIGTERM; killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$pidfile"
}

stop slurmd "$dir/etc/slurm.conf"
stop slurmctld "$dir/etc/slurm.conf"
stop munged "$dir/munge/munge.socket"

if [[ "${2:-}" == "--rm" ]]; then
    rm -rf "$dir"
fi
