#!/usr/bin/env bash
# Stop the throwaway Slurm started by bench/slurm/setup.sh DIR: each slurmd, slurmctld,
# munged, each by the pid in its DIR/run/*.pid file (and only if that pid is still the
# daemon started with DIR's configuration), the jobs still running, and the bridge of a
# three-node cluster. Leaves DIR in place; add --rm to delete it.
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

SLURM_CONF="$dir/etc/slurm.conf" scancel --full --user=root 2>/dev/null || true
for pidfile in "$dir"/run/slurmd.*.pid; do
    [[ -e "$pidfile" ]] || continue
    name=$(basename "$pidfile" .pid)
    stop "$name" "$dir/etc/slurm.conf"
done
# Job steps live in their own sessions: kill what is left of them (by their spool).
for pid in $(pgrep -x slurmstepd); do
    case $(readlink "/proc/$pid/cwd" 2>/dev/null) in "$dir"/*) ;; *) continue ;; esac
    sid=$(cut -d' ' -f6 "/proc/$pid/stat" 2>/dev/null) || continue
    [[ "${sid:-0}" -gt 1 ]] && pkill -KILL -s "$sid" || true
done
stop slurmctld "$dir/etc/slurm.conf"
stop munged "$dir/munge/munge.socket"
if [[ -s "$dir/run/bridge" ]]; then
    ip link del "$(<"$dir/run/bridge")" 2>/dev/null || true
    rm -f "$dir/run/bridge"
fi

if [[ "${2:-}" == "--rm" ]]; then
    rm -rf "$dir"
fi
