#!/usr/bin/env bash
# Benchmark: what sampling a running job's use costs (issue 24), atrium's step
# supervisor against Slurm's slurmstepd gathering the same (jobacct_gather/linux), with
# JOBS (100) jobs running `sleep` at once. For each setting, the CPU time (user + system,
# from /proc/PID/stat) spent over WINDOW (120) seconds once every job runs and has been
# sampled once:
#
#   atrium, interval 0    [jobs] usage_interval_seconds = 0: the supervisors watch their
#                         job (and its memory, every 250 ms, without a cgroup) but take no
#                         usage sample; the baseline
#   atrium, interval 30   the default: a walk of /proc and the usage file every 30 s
#   atrium, interval 5    six times as often
#   Slurm, none / linux   slurmstepd with JobAcctGatherType=jobacct_gather/none, then
#                         /linux at JobAcctGatherFrequency=task=30
#
# printed as milliseconds of CPU per running job per minute: the supervisors' (or the
# slurmstepds') and the portal's (or slurmctld's + slurmd's), and the sampling's own cost
# (interval 30 minus interval 0; linux minus none) with its ratio to Slurm's.
#
#   bench/usage_sampling.sh
#
# Sizes (environment): JOBS=100, WINDOW=120. Runs as root (the jobs run as the portal's
# administrator; Slurm's as root). Builds target/release/atrium unless BENCH_ATRIUM_BIN
# names a binary. Everything lives in a temporary directory removed at exit; the portals,
# the jobs and Slurm are stopped at exit. No GPU here: the GPU part of a sample (one
# nvidia-smi run per job) is not in these figures.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/common.sh
repo=$(pwd)

JOBS=${JOBS:-100}
WINDOW=${WINDOW:-120}
POLL=0.1

die() { echo "usage_sampling.sh: $*" >&2; exit 1; }
[[ "$(id -u)" -eq 0 ]] || die "must run as root"
for bin in curl awk pgrep; do
    command -v "$bin" >/dev/null || die "$bin is missing: tests/install-deps.sh installs it"
done

work=$(mktemp -d -t atrium-usage-bench-XXXXXX)
chmod 0711 "$work"
atrium_pid=""
slurm_dir=""
cleanup() {
    set +e
    stop_portal
    [[ -n "$slurm_dir" ]] && bench/slurm/stop.sh "$slurm_dir" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

# per_job_minute TICKS: ms of CPU per job per minute over the window.
per_job_minute() { awk -v t="$1" -v j="$JOBS" -v w="$WINDOW" 'BEGIN {printf "%.1f", t * 10 / j / (w / 60)}'; }

if [[ -n "${BENCH_ATRIUM_BIN:-}" ]]; then
    bin=$(realpath "$BENCH_ATRIUM_BIN")
else
    echo "== building target/release/atrium" >&2
    cargo build --release --locked -p atrium >/dev/null 2>&1 || die "cargo build --release -p atrium failed"
    bin="$repo/target/release/atrium"
fi
echo "== load average at the start: $(cut -d' ' -f1-3 /proc/loadavg); $JOBS jobs, ${WINDOW} s windows" >&2

# --- atrium ---------------------------------------------------------------------------
stop_portal() {
    if [[ -n "${atrium_pid:-}" ]] && kill -0 "$atrium_pid" 2>/dev/null; then
        for id in ${job_ids:-}; do
            curl -s -o /dev/null -X DELETE -H "$auth" "$base/api/v1/jobs/$id"
        done
        wait_until 60 no_supervisors || true
        kill "$atrium_pid" 2>/dev/null
        wait "$atrium_pid" 2>/dev/null
    fi
    atrium_pid=""
    job_ids=""
    pkill -f -- "step run $work/" 2>/dev/null || true
}
supervisors() { pgrep -f -- "step run $run/spool/" || true; }
no_supervisors() { [[ -z "$(supervisors)" ]]; }
running_count() {
    curl -sf -H "$auth" "$base/api/v1/jobs?state=RUNNING&per_page=1" | sed -n 's/.*"total": *\([0-9]*\).*/\1/p'
}
all_running() { [[ "$(running_count)" == "$JOBS" ]]; }

# measure_atrium INTERVAL: prints "supervisor-ms portal-ms" per job per minute.
measure_atrium() {
    local interval=$1
    run="$work/atrium-$interval"
    mkdir -p "$run/home/admin"
    chmod 0755 "$run/home"
    chmod 1777 "$run/home/admin"
    cat >"$run/atrium.toml" <<TOML
listen = "127.0.0.1:0"
data_dir = "$run/data"
[log]
filter = "warn"
[jobs]
spool_dir = "$run/spool"
usage_interval_seconds = $interval
[accounts]
home_root = "$run/home"
[cluster]
cpus = $((JOBS + 8))
memory_mb = $((JOBS * 64 + 4096))
discover_gpus = false
TOML
    env -u ATRIUM_CONFIG "$bin" --config "$run/atrium.toml" serve >"$run/out" 2>>"$run/err" &
    atrium_pid=$!
    wait_until 60 grep -qs "listening on" "$run/out" || die "the portal did not start: $(tail -5 "$run/err")"
    base=$(sed -n 's/^atrium: listening on //p' "$run/out")
    local password jar="$run/jar" csrf token
    password=$(sed -n 's/^ *password: //p' "$run/out")
    csrf=$(curl -sf -c "$jar" -H 'content-type: application/json' \
        -d "{\"username\":\"admin\",\"password\":\"$password\"}" "$base/api/v1/login" |
        sed -n 's/.*"csrf_token": *"\([^"]*\)".*/\1/p')
    token=$(curl -sf -b "$jar" -H "x-csrf-token: $csrf" -H 'content-type: application/json' \
        -d '{"name":"bench","scopes":["read","jobs"]}' "$base/api/v1/tokens" |
        sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p')
    [[ "$token" == atr_* ]] || die "could not create a token"
    auth="Authorization: Bearer $token"
    local i id
    for ((i = 0; i < JOBS; i++)); do
        id=$(curl -sf -H "$auth" -H 'content-type: application/json' \
            -d '{"script":"#!/bin/bash\nexec sleep 3600\n","options":{"cpus-per-task":1,"mem":"64M","output":"/dev/null"},"working_directory":"'"$run/home/admin"'"}' \
            "$base/api/v1/jobs" | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')
        [[ -n "$id" ]] || die "a submission failed: $(tail -3 "$run/err")"
        job_ids+=" $id"
    done
    wait_until 120 all_running || die "not every job started ($(running_count) of $JOBS)"
    # Every job sampled once (the first sample comes one interval in), and settled.
    sleep $((interval > 0 ? interval + 5 : 10))
    local pids before_s before_p after_s after_p
    pids=$(supervisors)
    [[ $(wc -w <<<"$pids") == "$JOBS" ]] || die "$(wc -w <<<"$pids") supervisors for $JOBS jobs"
    before_s=$(cpu_ticks $pids)
    before_p=$(cpu_ticks "$atrium_pid")
    sleep "$WINDOW"
    after_s=$(cpu_ticks $pids)
    after_p=$(cpu_ticks "$atrium_pid")
    echo "$(per_job_minute $((after_s - before_s))) $(per_job_minute $((after_p - before_p)))"
    stop_portal
}

# --- Slurm ----------------------------------------------------------------------------
# measure_slurm GATHER: prints "slurmstepd-ms daemons-ms" per job per minute.
measure_slurm() {
    local gather=$1 out
    slurm_dir="$work/slurm-$gather"
    mkdir -p "$slurm_dir"
    out=$(SLURM_ACCT_GATHER=$gather SLURM_CPUS=$((JOBS + 8)) bench/slurm/setup.sh "$slurm_dir" 2>&1) ||
        die "Slurm did not start: $out"
    export SLURM_CONF="$slurm_dir/etc/slurm.conf"
    local i
    for ((i = 0; i < JOBS; i++)); do
        sbatch -Q -c 1 --mem=64M -o /dev/null -D "$slurm_dir" --wrap "exec sleep 3600" >/dev/null || die "sbatch failed"
    done
    slurm_all_running() { [[ "$(squeue -h -t R | wc -l)" == "$JOBS" ]]; }
    wait_until 120 slurm_all_running || die "not every Slurm job started"
    sleep 35
    local steps daemons before_s before_d after_s after_d
    steps=$(pgrep -x slurmstepd | tr '\n' ' ')
    daemons="$(cat "$slurm_dir"/run/slurmctld.pid) $(cat "$slurm_dir"/run/slurmd*.pid)"
    before_s=$(cpu_ticks $steps)
    before_d=$(cpu_ticks $daemons)
    sleep "$WINDOW"
    after_s=$(cpu_ticks $steps)
    after_d=$(cpu_ticks $daemons)
    echo "$(per_job_minute $((after_s - before_s))) $(per_job_minute $((after_d - before_d)))"
    scancel -u root >/dev/null 2>&1 || true
    bench/slurm/stop.sh "$slurm_dir" >/dev/null 2>&1 || true
    slurm_dir=""
    unset SLURM_CONF
}

declare -A result
for interval in 0 30 5; do
    echo "== atrium, usage_interval_seconds = $interval" >&2
    result[a$interval]=$(measure_atrium "$interval")
    echo "   ${result[a$interval]}" >&2
done
for gather in none linux; do
    echo "== Slurm, jobacct_gather/$gather" >&2
    result[s$gather]=$(measure_slurm "$gather")
    echo "   ${result[s$gather]}" >&2
done

read -r a0s a0p <<<"${result[a0]}"
read -r a30s a30p <<<"${result[a30]}"
read -r a5s a5p <<<"${result[a5]}"
read -r sns snd <<<"${result[snone]}"
read -r sls sld <<<"${result[slinux]}"
printf '%-34s %14s %14s\n' "ms of CPU per running job per minute" "per job" "portal/daemons"
printf '%-34s %14s %14s\n' "atrium, no sampling" "$a0s" "$a0p"
printf '%-34s %14s %14s\n' "atrium, every 30 s (default)" "$a30s" "$a30p"
printf '%-34s %14s %14s\n' "atrium, every 5 s" "$a5s" "$a5p"
printf '%-34s %14s %14s\n' "Slurm 22.05, jobacct_gather/none" "$sns" "$snd"
printf '%-34s %14s %14s\n' "Slurm 22.05, jobacct_gather/linux 30 s" "$sls" "$sld"
awk -v a="$a30s" -v a0="$a0s" -v ap="$a30p" -v ap0="$a0p" -v s="$sls" -v s0="$sns" 'BEGIN {
    own = a - a0 + ap - ap0; slurm = s - s0
    printf "sampling every 30 s: atrium %.1f ms/job/min (supervisor and portal), Slurm %.1f; ratio Slurm/atrium %s\n",
        own, slurm, (own > 0 ? sprintf("%.1f", slurm / own) : "n/a (below the tick)")
    printf "whole cost of watching a job: atrium %.1f ms/job/min, Slurm slurmstepd %.1f: ratio %.1f\n",
        a + ap, s, (a + ap > 0 ? s / (a + ap) : 0)
}'
echo "== load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
