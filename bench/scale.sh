#!/usr/bin/env bash
# Benchmark: atrium's internal scheduler through the whole portal with a queue of
# JOBS (100,000) pending jobs (issue 23). One portal (SQLite, or PostgreSQL with
# --postgres), 8 GPUs, each taken by a long job first, then a queue of pending jobs,
# half held, half runnable but waiting for a GPU (bench/lua/fill.lua). Figures:
#
#   submit/s, empty queue   wrk -t2 -c8 for MEASURE_SECONDS (5) from an empty queue,
#                           accepted submissions per second (each answered once durable)
#   submit/s, near JOBS     the same, for the last MEASURE_SECONDS of the fill (the queue
#                           goes from about JOBS - 5 s of submissions to about JOBS); and
#                           its ratio to the empty queue's
#   GET /api/v1/jobs        ?per_page=50, the first page of the whole queue, as the
#                           administrator (curl's time_total: connect to last byte), median of 5
#   one user's jobs         GET /api/v1/jobs?per_page=50 as alice, a user with 20 jobs
#                           among the queue (she sees only hers), median of 5
#   /jobs page              the administrator's own queue page (100 jobs a page), median of 5
#   /cluster page           nodes, partitions, GPUs and what is pending, median of 5
#   /metrics                a Prometheus scrape (the queue counted by partition, state and
#                           reason, the GPUs, the sessions), as the administrator, median of 5
#   atrium squeue           the command line, the whole queue (a process), median of 3
#   RSS with the queue      the portal's VmRSS once the queue is full
#   restart: listening      after `kill -9` of the portal, from starting it again until it
#                           prints `listening on` (serving HTTP)
#   restart: jobs API       … until GET /api/v1/jobs?per_page=1 answers 200 with the same
#                           number of jobs as before the kill (checked: a difference fails)
#   RSS after restart       VmRSS once the jobs API answers, and 5 s later with VmHWM (the
#                           peak since the restart, background work included)
#
#   bench/scale.sh [--postgres]
#
# Sizes (environment): JOBS=100000, MEASURE_SECONDS=5, CLIENTS=8. BENCH_SAVE_DB=DIR keeps a
# copy of the SQLite database as the kill -9 left it (to profile a restart by hand).
# BENCH_HOLD=SECONDS pauses that long with the queue full, before the restart, and prints
# the portal's address, pid and an administrator's token (to profile requests by hand).
#
# Runs as root (the long jobs run as the admin's POSIX uid; PostgreSQL, with --postgres,
# runs as the `postgres` user: initdb into the temporary directory, unix socket only,
# default durability settings). Builds target/release/atrium unless BENCH_ATRIUM_BIN=path
# names a binary to use instead. Everything listens on 127.0.0.1 and lives in a temporary
# directory removed at exit; the portal, its jobs and PostgreSQL are stopped at exit.
# Figures are only meaningful on a quiet machine: the load average is printed at the start
# and at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/common.sh
repo=$(pwd)

postgres=false
for arg in "$@"; do
    case $arg in
        --postgres) postgres=true ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "scale.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

JOBS=${JOBS:-100000}
MEASURE_SECONDS=${MEASURE_SECONDS:-5}
CLIENTS=${CLIENTS:-8}
GPUS=8
POLL=0.02

die() { echo "scale.sh: $*" >&2; exit 1; }
[[ "$(id -u)" -eq 0 ]] || die "must run as root (jobs run as the admin's uid; PostgreSQL as postgres)"
for bin in wrk curl awk; do
    command -v "$bin" >/dev/null || die "$bin is missing: tests/install-deps.sh installs it"
done

work=$(mktemp -d -t atrium-scale-bench-XXXXXX)
chmod 0711 "$work"
atrium_pid=""
pg_pid=""
cleanup() {
    set +e
    if [[ -n "$atrium_pid" ]] && kill -0 "$atrium_pid" 2>/dev/null; then
        # Cancel the long jobs (their step supervisors outlive the portal), then stop it.
        if [[ -n "${auth:-}" ]]; then
            for id in ${long_jobs:-}; do
                curl -s -o /dev/null -X DELETE -H "$auth" "$base/api/v1/jobs/$id"
            done
            for ((i = 0; i < 250; i++)); do
                [[ "$(running_count)" == 0 ]] && break
                sleep 0.1
            done
        fi
        kill "$atrium_pid" 2>/dev/null
        wait "$atrium_pid" 2>/dev/null
    fi
    # Whatever is left of the long jobs' step supervisors (a portal that died first).
    for pid in ${step_pids:-}; do
        grep -q "step" "/proc/$pid/cmdline" 2>/dev/null && kill "$pid" 2>/dev/null
    done
    if [[ -n "$pg_pid" ]]; then
        kill -INT "$pg_pid" 2>/dev/null
        wait "$pg_pid" 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# --- helpers ----------------------------------------------------------------------------
# time_ms CMD...: run CMD (output discarded) and print its wall time in ms.
time_ms() {
    local t0 t1
    t0=${EPOCHREALTIME/./}
    "$@" >/dev/null 2>&1 || return 1
    t1=${EPOCHREALTIME/./}
    awk -v d=$((t1 - t0)) 'BEGIN {printf "%.1f\n", d / 1000}'
}
# http_ms ARGS...: curl's time_total in ms for one GET (fails unless 200).
http_ms() {
    curl -sf -o /dev/null -w '%{time_total}' "$@" | awk '{printf "%.2f\n", $1 * 1000}'
}
# median_of N CMD...: the median of N runs of CMD, each printing one figure; the runs on stderr.
median_of() {
    local n=$1 i v all=()
    shift
    for ((i = 0; i < n; i++)); do
        v=$("$@") || return 1
        all+=("$v")
    done
    echo "   ${all[*]}" >&2
    printf '%s\n' "${all[@]}" | median
}
# rss_mb PID FIELD: VmRSS or VmHWM of PID in MB.
rss_mb() { awk -v f="$2:" '$1 == f {printf "%.0f\n", $2 / 1024}' "/proc/$1/status"; }

echo "== load average at the start: $(loadavg)" >&2
load_start=$(loadavg)

if [[ -n "${BENCH_ATRIUM_BIN:-}" ]]; then
    bin=$(realpath "$BENCH_ATRIUM_BIN")
else
    echo "== building target/release/atrium" >&2
    cargo build --release --locked -p atrium >/dev/null 2>&1 || die "cargo build --release -p atrium failed"
    bin="$repo/target/release/atrium"
fi

# --- PostgreSQL (--postgres) ----------------------------------------------------------
database_url=""
if $postgres; then
    pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [[ -x "$pg_bin/initdb" ]] || die "PostgreSQL is missing: tests/install-deps.sh installs it"
    id postgres >/dev/null 2>&1 || die "no postgres user: tests/install-deps.sh creates it"
    mkdir "$work/pg" && chown postgres: "$work/pg"
    as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
    as_postgres "$pg_bin/initdb" -D "$work/pg/data" -A trust -U postgres -E UTF8 \
        --locale=C.UTF-8 --no-instructions >"$work/pg/initdb.log" 2>&1 || die "initdb failed: $(tail -5 "$work/pg/initdb.log")"
    # Not through the function: $! must be postgres itself (setpriv execs it).
    setpriv --reuid=postgres --regid=postgres --init-groups "$pg_bin/postgres" -D "$work/pg/data" \
        -c listen_addresses= -c "unix_socket_directories=$work/pg" -c max_connections=100 \
        >"$work/pg/log" 2>&1 &
    pg_pid=$!
    pg_ready() { [[ -S "$work/pg/.s.PGSQL.5432" ]] && "$pg_bin/pg_isready" -q -h "$work/pg"; }
    wait_until 60 pg_ready || die "PostgreSQL did not start: $(tail -5 "$work/pg/log")"
    as_postgres "$pg_bin/createdb" -h "$work/pg" -U postgres atrium || die "createdb failed"
    database_url="postgres://postgres@localhost/atrium?host=$work/pg"
    echo "== PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') at $work/pg" >&2
fi

# --- the portal -----------------------------------------------------------------------
mkdir -p "$work/atrium/home/admin" "$work/atrium/home/alice"
chmod 1777 "$work/atrium/home/admin" "$work/atrium/home/alice"
{
    cat <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/atrium/data"
[log]
filter = "warn"
[jobs]
spool_dir = "$work/atrium/spool"
# Above the queue this fills (Slurm's MaxJobCount and the per-user limit).
max_job_count = 200000
max_submitted_jobs_per_user = 200000
[accounts]
home_root = "$work/atrium/home"
[cluster]
cpus = 16
memory_mb = 16384
TOML
    if $postgres; then printf '[database]\nurl = "%s"\n' "$database_url"; fi
    for ((n = 0; n < GPUS; n++)); do
        printf '[[cluster.gpus]]\nindex = %d\nmodel = "A100-80GB"\nmemory_mb = 81920\n' "$n"
    done
    printf '[[cluster.partitions]]\nname = "gpu"\ndefault = true\ncpus_per_gpu = 2\nmem_per_gpu_mb = 1024\n'
} >"$work/atrium/atrium.toml"

start_portal() {
    env -u ATRIUM_CONFIG "$bin" --config "$work/atrium/atrium.toml" serve >"$work/atrium/out" 2>>"$work/atrium/err" &
    atrium_pid=$!
}
listening() { grep -q "listening on" "$work/atrium/out" 2>/dev/null || ! kill -0 "$atrium_pid" 2>/dev/null; }

echo "== starting $bin serve" >&2
start_portal
wait_until 60 listening || true
base=$(sed -n 's/^atrium: listening on //p' "$work/atrium/out")
password=$(sed -n 's/^ *password: //p' "$work/atrium/out")
[[ -n "$base" ]] || { tail -n 20 "$work/atrium/err" >&2; die "the portal did not start"; }

# login NAME PASSWORD JAR: a browser login (JSON); prints the CSRF token.
login() {
    curl -sf -c "$3" -H 'content-type: application/json' \
        -d "{\"username\":\"$1\",\"password\":\"$2\"}" "$base/api/v1/login" |
        sed -n 's/.*"csrf_token": *"\([^"]*\)".*/\1/p'
}
jar="$work/atrium/jar"
csrf=$(login admin "$password" "$jar") || die "login as admin failed"
# token JAR CSRF: a personal token with scopes read and jobs.
token() {
    curl -sf -b "$1" -H "x-csrf-token: $2" -H 'content-type: application/json' \
        -d '{"name":"bench","scopes":["read","jobs"]}' "$base/api/v1/tokens" |
        sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p'
}
token=$(token "$jar" "$csrf")
[[ "$token" == atr_* ]] || die "could not create a token"
auth="Authorization: Bearer $token"
export ATRIUM_URL="$base" ATRIUM_TOKEN="$token"

# A second user with a few jobs of her own among the queue.
alice_password="bench-alice-$$-password"
printf '%s\n' "$alice_password" | env -u ATRIUM_CONFIG "$bin" --config "$work/atrium/atrium.toml" \
    user add alice --uid 20201 --gid 20201 --home "$work/atrium/home/alice" >/dev/null 2>&1 ||
    die "could not create user alice"
alice_jar="$work/atrium/alice-jar"
alice_csrf=$(login alice "$alice_password" "$alice_jar") || die "login as alice failed"
alice_auth="Authorization: Bearer $(token "$alice_jar" "$alice_csrf")"

total() { curl -sf -H "$auth" "$base/api/v1/jobs?per_page=1" | sed -n 's/.*"total": *\([0-9]*\).*/\1/p'; }
running_count() { curl -sf -H "$auth" "$base/api/v1/jobs?state=RUNNING&per_page=1" | sed -n 's/.*"total": *\([0-9]*\).*/\1/p'; }
submit() { curl -sf -H "$1" -H 'content-type: application/json' -d "$2" "$base/api/v1/jobs" | sed -n 's/.*"id": *"\([0-9]*\)".*/\1/p'; }

# Every GPU taken by a long job, so that the runnable jobs of the fill stay pending.
long_jobs=""
for ((n = 0; n < GPUS; n++)); do
    id=$(submit "$auth" '{"wrap":"sleep 1200","options":{"gres":"gpu:1","time":"20"}}') || die "could not submit a long job"
    long_jobs="$long_jobs $id"
done
all_running() { [[ "$(running_count)" == "$GPUS" ]]; }
wait_until 60 all_running || die "the $GPUS long jobs did not start (running: $(running_count))"
step_pids=$(pgrep -P "$atrium_pid" || true)
for ((n = 0; n < 20; n++)); do
    submit "$alice_auth" '{"wrap":"true","options":{"gres":"gpu:1","hold":true}}' >/dev/null || die "alice could not submit"
done

# fill SECONDS [UNTIL]: wrk with bench/lua/fill.lua for SECONDS, or until the queue holds
# UNTIL jobs (polled; wrk is then interrupted and reports); prints accepted submissions/s.
fill() {
    local out line wrk_pid
    wrk -t2 -c"$CLIENTS" -d"$1s" -H "$auth" -s "$repo/bench/lua/fill.lua" "$base/api/v1/jobs" >"$work/wrk.out" &
    wrk_pid=$!
    if [[ -n "${2:-}" ]]; then
        while kill -0 "$wrk_pid" 2>/dev/null && (($(total) < $2)); do sleep 0.1; done
        kill -INT "$wrk_pid" 2>/dev/null || true
    fi
    wait "$wrk_pid" || true
    out=$(<"$work/wrk.out")
    line=$(grep '^submit:' <<<"$out") || die "wrk printed no summary: $out"
    echo "   $line; in the queue: $(total)" >&2
    awk '{for (i = 2; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]} printf "%.0f\n", (v["requests"] - v["non2xx"]) / v["seconds"]}' <<<"$line"
}

echo "== submissions from an empty queue, ${MEASURE_SECONDS} s" >&2
rate_empty=$(fill "$MEASURE_SECONDS")
# Fill up to about one measurement short of JOBS, measure, then top up to JOBS.
(($(total) >= JOBS - rate_empty * MEASURE_SECONDS)) || fill 3600 $((JOBS - rate_empty * MEASURE_SECONDS)) >/dev/null
echo "== submissions near $JOBS jobs, ${MEASURE_SECONDS} s" >&2
rate_full=$(fill "$MEASURE_SECONDS")
(($(total) >= JOBS)) || fill 600 "$JOBS" >/dev/null
queued=$(total)
echo "== $queued jobs in the queue ($GPUS running)" >&2

echo "== GET /api/v1/jobs?per_page=50, 5 runs (ms)" >&2
list_ms=$(median_of 5 http_ms -H "$auth" "$base/api/v1/jobs?per_page=50")
echo "== GET /api/v1/jobs?per_page=50 as alice, 5 runs (ms)" >&2
user_ms=$(median_of 5 http_ms -H "$alice_auth" "$base/api/v1/jobs?per_page=50")
echo "== /jobs page, 5 runs (ms)" >&2
jobs_page_ms=$(median_of 5 http_ms -b "$jar" "$base/jobs")
jobs_page_kb=$(curl -sf -b "$jar" "$base/jobs" | wc -c | awk '{printf "%.0f\n", $1 / 1024}')
echo "== /cluster page, 5 runs (ms)" >&2
cluster_ms=$(median_of 5 http_ms -b "$jar" "$base/cluster")
cluster_kb=$(curl -sf -b "$jar" "$base/cluster" | wc -c | awk '{printf "%.0f\n", $1 / 1024}')
echo "== /metrics, 5 runs (ms)" >&2
metrics_ms=$(median_of 5 http_ms -b "$jar" "$base/metrics")
echo "== atrium squeue, 3 runs (ms)" >&2
squeue_ms=$(median_of 3 time_ms "$bin" squeue)
rss_queue=$(rss_mb "$atrium_pid" VmRSS)
if [[ -n "${BENCH_HOLD:-}" ]]; then
    echo "== holding ${BENCH_HOLD} s: ATRIUM_URL=$base ATRIUM_TOKEN=$token pid $atrium_pid" >&2
    sleep "$BENCH_HOLD"
fi

# --- restart after kill -9 --------------------------------------------------------------
echo "== kill -9 and restart" >&2
before=$(total)
kill -9 "$atrium_pid"
wait "$atrium_pid" 2>/dev/null || true
if [[ -n "${BENCH_SAVE_DB:-}" && -f "$work/atrium/data/atrium.db" ]]; then
    mkdir -p "$BENCH_SAVE_DB" && cp "$work/atrium/data"/atrium.db* "$BENCH_SAVE_DB"/
fi
: >"$work/atrium/out"
t0=${EPOCHREALTIME/./}
start_portal
wait_until 120 listening || die "the portal did not listen again within 120 s"
t_listen=${EPOCHREALTIME/./}
grep -q "listening on" "$work/atrium/out" || { tail -n 20 "$work/atrium/err" >&2; die "the portal died restarting"; }
base=$(sed -n 's/^atrium: listening on //p' "$work/atrium/out")
answering() { [[ "$(total)" == "$before" ]]; }
wait_until 120 answering || die "after the restart the jobs API lists $(total) jobs, not $before"
t_api=${EPOCHREALTIME/./}
rss_after=$(rss_mb "$atrium_pid" VmRSS)
listen_s=$(awk -v d=$((t_listen - t0)) 'BEGIN {printf "%.2f\n", d / 1e6}')
api_s=$(awk -v d=$((t_api - t0)) 'BEGIN {printf "%.2f\n", d / 1e6}')
# Later, once whatever the restart does in the background (a snapshot) is done.
sleep 5
rss_settled=$(rss_mb "$atrium_pid" VmRSS)
rss_peak=$(rss_mb "$atrium_pid" VmHWM)
load_end=$(loadavg)

# --- report -----------------------------------------------------------------------------
echo
echo "atrium $("$bin" --version | awk '{print $2}'), $($postgres && echo PostgreSQL || echo SQLite), $(nproc) cores"
echo "load average: at the start $load_start, at the end $load_end"
printf '%-44s %s\n' \
    "jobs in the queue (pending; $GPUS running)" "$queued" \
    "submissions/s, empty queue" "$rate_empty" \
    "submissions/s, near $JOBS" "$rate_full ($(awk -v a="$rate_full" -v b="$rate_empty" 'BEGIN {printf "%.2f", a / b}') of empty)" \
    "GET /api/v1/jobs?per_page=50" "$list_ms ms" \
    "one user's jobs (alice, per_page=50)" "$user_ms ms" \
    "/jobs page" "$jobs_page_ms ms, $jobs_page_kb KB" \
    "/cluster page" "$cluster_ms ms, $cluster_kb KB" \
    "/metrics scrape" "$metrics_ms ms" \
    "atrium squeue, whole queue" "$squeue_ms ms" \
    "RSS with the queue" "$rss_queue MB" \
    "restart after kill -9: listening" "$listen_s s" \
    "restart after kill -9: jobs API, same count" "$api_s s ($before jobs)" \
    "RSS when the jobs API answers again" "$rss_after MB" \
    "RSS 5 s later (peak since the restart)" "$rss_settled MB ($rss_peak MB)"
