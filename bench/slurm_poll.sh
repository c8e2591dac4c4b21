#!/usr/bin/env bash
# Benchmark: the Slurm backend at cluster scale, against Slurm alone, in one run.
#
# A throwaway Slurm (bench/slurm/setup.sh, MaxJobCount raised) holds QUEUE jobs: OTHERS held
# jobs of root's submitted with sbatch (8 loops), and ATRIUM_JOBS held jobs of user
# `pollbench` submitted through a portal's API. Then, each over WINDOW seconds:
#
#   1. slurmctld's CPU time (utime + stime of /proc/PID/stat, all its threads), in ms per
#      second: with no portal running (the anchor), then with each portal polling at its
#      default interval (5 s): the binary BENCH_ATRIUM_BEFORE names, if any, then this one.
#   2. the portal's own CPU per poll interval (everything it does while idle: the poll,
#      the nodes' refresh every 30 s), and that of its children (the squeue/sacct/scontrol
#      processes it runs, as reaped: cutime + cstime), divided by the polls in the window;
#      the wall time of each poll from the portal's own log ("Slurm poll", elapsed_ms;
#      this build only), median and max.
#   3. submit -> RUNNING of a `sleep 3` job of pollbench's on an idle node, median of RUNS:
#      Slurm alone: `sbatch --parsable` then `squeue -h -j ID -o %T` every 20 ms until
#      RUNNING; atrium: POST /api/v1/jobs then GET /api/v1/jobs/ID every 20 ms until its
#      state is RUNNING. Both from the clock read just before the submission.
#   4. the API while Slurm hangs: slurmctld stopped with SIGSTOP (its connections hang
#      rather than fail, and the poll's squeue waits out its command timeout), then
#      `GET /api/v1/jobs?per_page=50` timed by curl, median of 10, against the same with
#      slurmctld running.
#
#   bench/slurm_poll.sh [--help]
#
# Sizes (environment): QUEUE=20000, ATRIUM_JOBS=1000 (part of QUEUE), WINDOW=60, RUNS=10.
# Runs as root. BENCH_ATRIUM_BIN names the binary (default target/release/atrium, built if
# missing). Everything lives in a temporary directory removed at exit, listens on
# 127.0.0.1, and is stopped at exit.
set -euo pipefail
trap 'echo "slurm_poll.sh: failed at line $LINENO" >&2' ERR
cd "$(dirname "$0")/.."
. bench/lib/common.sh
repo=$(pwd)
case "${1:-}" in
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) echo "slurm_poll.sh: unknown argument: $1 (try --help)" >&2; exit 2 ;;
esac

QUEUE=${QUEUE:-20000}
ATRIUM_JOBS=${ATRIUM_JOBS:-1000}
WINDOW=${WINDOW:-60}
RUNS=${RUNS:-10}
OTHERS=$((QUEUE - ATRIUM_JOBS))
USER_NAME=pollbench
USER_UID=29999
PASSWORD=poll-bench-password-1

die() { echo "slurm_poll.sh: $*" >&2; exit 1; }
[[ "$(id -u)" -eq 0 ]] || die "must run as root (the throwaway Slurm runs as root)"
for bin in sbatch squeue curl setpriv; do
    command -v "$bin" >/dev/null || die "$bin is missing: tests/install-deps.sh installs it"
done
bin=${BENCH_ATRIUM_BIN:-$repo/target/release/atrium}
if [[ -z "${BENCH_ATRIUM_BIN:-}" && ! -x "$bin" ]]; then
    cargo build --release --locked -p atrium >&2
fi
[[ -x "$bin" ]] || die "no atrium binary at $bin"
before=${BENCH_ATRIUM_BEFORE:-}

work=$(mktemp -d -t atrium-poll-bench-XXXXXX)
chmod 0711 "$work"
portal_pid=""
stop_portal() {
    if [[ -n "$portal_pid" ]]; then
        kill "$portal_pid" 2>/dev/null || true
        wait "$portal_pid" 2>/dev/null || true
        portal_pid=""
    fi
}
cleanup() {
    stop_portal
    [[ -d "$work/slurm/run" ]] && "$repo/bench/slurm/stop.sh" "$work/slurm" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

now_ns() { echo "${EPOCHREALTIME/./}000"; }
child_ticks() { awk '{print $16 + $17}' "/proc/$1/stat"; }  # reaped children's CPU
hz=$(getconf CLK_TCK)

# --- Slurm, with the bench user known to it --------------------------------------------
home="$work/home/$USER_NAME"
mkdir -p "$home" && chown "$USER_UID:$USER_UID" "$home"
cp /etc/passwd "$work/passwd" && cp /etc/group "$work/group"
echo "$USER_NAME:x:$USER_UID:$USER_UID::$home:/bin/bash" >>"$work/passwd"
echo "$USER_NAME:x:$USER_UID:" >>"$work/group"
echo "== Slurm: starting (bench/slurm/setup.sh, MaxJobCount $((QUEUE + 1000)))" >&2
NSS_WRAPPER_PASSWD="$work/passwd" NSS_WRAPPER_GROUP="$work/group" SLURM_MAX_JOB_COUNT=$((QUEUE + 1000)) \
    "$repo/bench/slurm/setup.sh" "$work/slurm" >/dev/null
slurm_bin="$work/slurm/bin"
export SLURM_CONF="$work/slurm/etc/slurm.conf"
ctld=$(<"$work/slurm/run/slurmctld.pid")
slurm_version=$(sinfo -V | awk '{print $2}')

echo "== Slurm: $OTHERS held jobs of root's (8 sbatch loops)" >&2
t0=$SECONDS
for c in 0 1 2 3 4 5 6 7; do
    (
        for ((i = c; i < OTHERS; i += 8)); do
            sbatch -Q --hold -o /dev/null --wrap true >/dev/null || exit 1
        done
    ) &
done
wait
echo "   $((SECONDS - t0)) s" >&2

# --- the portal ---------------------------------------------------------------------------
cat >"$work/atrium.toml" <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/data"
[log]
filter = "warn,atrium::sched::slurm=debug"
[scheduler]
backend = "slurm"
[slurm]
conf = "$SLURM_CONF"
bin_dir = "$slurm_bin"
[jobs]
spool_dir = "$work/spool"
[accounts]
home_root = "$work/home"
TOML
start_portal() {
    local which=$1 log=$2
    env -u ATRIUM_CONFIG "$which" --config "$work/atrium.toml" serve >"$log.out" 2>"$log.err" &
    portal_pid=$!
    for _ in $(seq 1 300); do
        grep -q "listening on" "$log.out" 2>/dev/null && break
        kill -0 "$portal_pid" 2>/dev/null || die "the portal exited: $(tail -n 5 "$log.err")"
        sleep 0.1
    done
    base=$(sed -n 's/^atrium: listening on //p' "$log.out")
    [[ -n "$base" ]] || die "the portal did not start: $(tail -n 5 "$log.err")"
}
start_portal "$bin" "$work/first"
"$bin" --config "$work/atrium.toml" user add "$USER_NAME" --uid "$USER_UID" --gid "$USER_UID" \
    --home "$home" <<<"$PASSWORD" >/dev/null 2>&1 || die "atrium user add failed"
jar="$work/jar"
csrf=$(curl -sf -c "$jar" -H 'content-type: application/json' \
    -d "{\"username\":\"$USER_NAME\",\"password\":\"$PASSWORD\"}" "$base/api/v1/login" \
    | sed -n 's/.*"csrf_token": *"\([^"]*\)".*/\1/p') || die "login failed"
token=$(curl -sf -b "$jar" -H "x-csrf-token: $csrf" -H 'content-type: application/json' \
    -d '{"name":"bench","scopes":["read","jobs"]}' "$base/api/v1/tokens" \
    | sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p') || die "could not create a token"
auth="Authorization: Bearer $token"

echo "== atrium: $ATRIUM_JOBS held jobs of $USER_NAME's through the API" >&2
echo '{"wrap":"true","options":{"hold":true,"output":"/dev/null"}}' >"$work/held.json"
{
    printf 'silent\nheader = "%s"\nheader = "Content-Type: application/json"\ndata = "@%s"\n' "$auth" "$work/held.json"
    for ((i = 0; i < ATRIUM_JOBS; i++)); do printf 'url = "%s/api/v1/jobs"\n' "$base"; done
} >"$work/post.curl"
accepted=$(curl -K "$work/post.curl" | grep -o '"job_id"' | wc -l)
[[ "$accepted" -eq "$ATRIUM_JOBS" ]] || die "atrium accepted $accepted of $ATRIUM_JOBS"
in_slurm=$(squeue -h -t all -o %i | wc -l)
echo "   Slurm holds $in_slurm jobs" >&2
stop_portal

# --- 1 and 2: CPU over the window ---------------------------------------------------------
# window NAME [PORTAL_BINARY]: slurmctld's ms/s, and the portal's ms per poll (own, children).
declare -A ctld_ms own_ms child_ms polls_med polls_max
window() {
    local name=$1 which=${2:-} c0 c1 p0 p1 k0 k1 log="$work/$1"
    if [[ -n "$which" ]]; then
        start_portal "$which" "$log"
        sleep 10 # its first poll (a sweep of the whole queue) and start-up are over
        p0=$(cpu_ticks "$portal_pid")
        k0=$(child_ticks "$portal_pid")
    fi
    : >"$log.mark"
    c0=$(cpu_ticks "$ctld")
    sleep "$WINDOW"
    c1=$(cpu_ticks "$ctld")
    ctld_ms[$name]=$(awk -v d=$((c1 - c0)) -v hz="$hz" -v w="$WINDOW" 'BEGIN {printf "%.2f", d * 1000 / hz / w}')
    if [[ -n "$which" ]]; then
        p1=$(cpu_ticks "$portal_pid")
        k1=$(child_ticks "$portal_pid")
        local n=$((WINDOW / 5))
        own_ms[$name]=$(awk -v d=$((p1 - p0)) -v hz="$hz" -v n="$n" 'BEGIN {printf "%.1f", d * 1000 / hz / n}')
        child_ms[$name]=$(awk -v d=$((k1 - k0)) -v hz="$hz" -v n="$n" 'BEGIN {printf "%.1f", d * 1000 / hz / n}')
        local walls
        # Only builds that log their polls ("Slurm poll") give these.
        walls=$({ grep -a "Slurm poll" "$log.err" || true; } | { grep -a "sweep=false" || true; } \
            | sed -n 's/.*elapsed_ms=\([0-9.]*\).*/\1/p' | tail -n 20)
        if [[ -n "$walls" ]]; then
            polls_med[$name]=$(median <<<"$walls" | awk '{printf "%.1f", $1}')
            polls_max[$name]=$(sort -n <<<"$walls" | tail -n 1 | awk '{printf "%.1f", $1}')
        else
            polls_med[$name]="-"
            polls_max[$name]="-"
        fi
        stop_portal
    else
        own_ms[$name]="-"
        child_ms[$name]="-"
        polls_med[$name]="-"
        polls_max[$name]="-"
    fi
    echo "   $name: slurmctld ${ctld_ms[$name]} ms/s; portal ${own_ms[$name]} ms/poll (+ ${child_ms[$name]} ms in its commands); poll wall median ${polls_med[$name]} ms, max ${polls_max[$name]} ms" >&2
}
echo "== slurmctld's CPU, ${WINDOW} s each" >&2
window none
if [[ -n "$before" ]]; then window before "$before"; fi
window after "$bin"

# --- 3: submit -> RUNNING -----------------------------------------------------------------
echo "== submit -> RUNNING, $RUNS runs each" >&2
as_user() { setpriv --reuid "$USER_UID" --regid "$USER_UID" --clear-groups -- "$@"; }
slurm_runs=()
for ((i = 0; i < RUNS; i++)); do
    t0=$(now_ns)
    id=$(cd "$home" && as_user "$slurm_bin/sbatch" --parsable -o /dev/null --wrap 'sleep 3')
    until [[ "$(squeue -h -j "$id" -o %T 2>/dev/null)" == RUNNING ]]; do sleep 0.02; done
    slurm_runs+=("$(awk -v a="$(now_ns)" -v b="$t0" 'BEGIN {printf "%.0f", (a - b) / 1e6}')")
    while [[ -n "$(squeue -h -j "$id" -t pending,running,completing -o %T 2>/dev/null)" ]]; do sleep 0.1; done
done
start_portal "$bin" "$work/latency"
sleep 5
echo '{"wrap":"sleep 3","options":{"output":"/dev/null"}}' >"$work/run.json"
atrium_runs=()
for ((i = 0; i < RUNS; i++)); do
    t0=$(now_ns)
    id=$(curl -sf -H "$auth" -H 'content-type: application/json' -d "@$work/run.json" "$base/api/v1/jobs" \
        | sed -n 's/.*"id": *"\([0-9]*\)".*/\1/p')
    [[ -n "$id" ]] || die "atrium refused the latency job"
    until curl -sf -H "$auth" "$base/api/v1/jobs/$id" | grep -q '"state": *"RUNNING"'; do sleep 0.02; done
    atrium_runs+=("$(awk -v a="$(now_ns)" -v b="$t0" 'BEGIN {printf "%.0f", (a - b) / 1e6}')")
    while [[ -n "$(squeue -h -j "$id" -t pending,running,completing -o %T 2>/dev/null)" ]]; do sleep 0.1; done
done

# --- 4: the API while Slurm hangs -----------------------------------------------------------
list_ms() {
    local t=() i
    for ((i = 0; i < 10; i++)); do
        t+=("$(curl -s -o /dev/null -w '%{time_total}' -H "$auth" "$base/api/v1/jobs?per_page=50" | awk '{printf "%.1f", $1 * 1000}')")
    done
    printf '%s\n' "${t[@]}" | median
}
echo "== GET /api/v1/jobs?per_page=50 with slurmctld running, then stopped (SIGSTOP)" >&2
list_running=$(list_ms)
kill -STOP "$ctld"
sleep 6 # a poll is waiting on slurmctld now
list_hung=$(list_ms)
kill -CONT "$ctld"
echo "   ${list_running} ms running, ${list_hung} ms hung" >&2
stop_portal
slurm_latency=$(printf '%s\n' "${slurm_runs[@]}" | median)
atrium_latency=$(printf '%s\n' "${atrium_runs[@]}" | median)
echo "   sbatch + squeue: ${slurm_runs[*]} (median $slurm_latency ms)" >&2
echo "   atrium API:      ${atrium_runs[*]} (median $atrium_latency ms)" >&2

cat <<REPORT

Slurm $slurm_version, $in_slurm jobs in Slurm ($ATRIUM_JOBS of them atrium's), window $WINDOW s, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)
| figure | no portal | ${before:+before | }this build |
|---|---|${before:+---|}---|
| slurmctld CPU, ms per s | ${ctld_ms[none]} | ${before:+${ctld_ms[before]} | }${ctld_ms[after]} |
| portal CPU per poll (own + its commands), ms | - | ${before:+${own_ms[before]} + ${child_ms[before]} | }${own_ms[after]} + ${child_ms[after]} |
| poll wall time, median / max, ms | - | ${before:+- | }${polls_med[after]} / ${polls_max[after]} |
| submit -> RUNNING, median ms | sbatch + squeue: $slurm_latency | ${before:+- | }atrium API: $atrium_latency |
| GET /api/v1/jobs?per_page=50, median ms, slurmctld running / hung | - | ${before:+- | }$list_running / $list_hung |
REPORT
