#!/usr/bin/env bash
# Benchmark: the dashboard (`GET /`) with 100,000 jobs known to the portal (issue 25).
#
# One portal (SQLite, release build), 8 GPUs each taken by a long job, and JOBS jobs in
# all: ENDED jobs that are over, written into the database before the portal starts
# (one INSERT … SELECT, as bench/accounting.sh: 1,000 users, and alice, whose
# dashboard is timed, with 1 in 100 of them), then the rest as pending jobs through
# the API (wrk with bench/lua/fill.lua: half held, half waiting for a GPU) and 20
# held jobs of alice's. The dashboard asks the scheduler for the GPUs free now and
# alice's first queued jobs (its index by user), and the store for her last ended
# jobs (the index on user_name, end_time, with a LIMIT).
#
# Timed, as alice (a browser's cookie), after WARM unrecorded requests:
#   server time   the portal's own histogram, atrium_http_request_duration_seconds
#                 {route="/"} on /metrics: mean (sum / count) and the bucket holding
#                 the median and the 99th percentile, over REQUESTS sequential requests
#   client time   wrk -t1 -c1 for 5 s: requests/s and latency p50 / p99
#   for scale     the same server mean of GET /jobs (alice's queue page)
# There is no reference figure for JupyterHub's or Open OnDemand's home page in
# /work/shared; the goal is ≤ 10 ms of server time.
#
#   bench/dashboard.sh
#
# Environment: JOBS=100000, ENDED=50000, REQUESTS=200, WARM=20, BENCH_ATRIUM_BIN (default:
# builds target/release/atrium). Runs as root (the long jobs run as the admin's uid).
# Everything listens on 127.0.0.1 and lives in a temporary directory removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/common.sh
repo=$(pwd)

JOBS=${JOBS:-100000}
ENDED=${ENDED:-50000}
REQUESTS=${REQUESTS:-200}
WARM=${WARM:-20}
GPUS=8
POLL=0.05

die() { echo "dashboard.sh: $*" >&2; exit 1; }
[[ "$(id -u)" -eq 0 ]] || die "must run as root (the long jobs run as the admin's uid)"
for bin in wrk curl awk sqlite3; do
    command -v "$bin" >/dev/null || die "$bin is missing: tests/install-deps.sh installs it"
done

work=$(mktemp -d -t atrium-dashboard-bench-XXXXXX)
chmod 0711 "$work"
atrium_pid=""
cleanup() {
    set +e
    if [[ -n "$atrium_pid" ]] && kill -0 "$atrium_pid" 2>/dev/null; then
        for id in ${long_jobs:-}; do
            curl -s -o /dev/null -X DELETE -H "$auth" "$base/api/v1/jobs/$id"
        done
        sleep 1
        kill "$atrium_pid" 2>/dev/null
        wait "$atrium_pid" 2>/dev/null
    fi
    for pid in ${step_pids:-}; do
        grep -q "step" "/proc/$pid/cmdline" 2>/dev/null && kill "$pid" 2>/dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT

echo "== load average at the start: $(loadavg)" >&2
load_start=$(loadavg)
if [[ -n "${BENCH_ATRIUM_BIN:-}" ]]; then
    bin=$(realpath "$BENCH_ATRIUM_BIN")
else
    echo "== building target/release/atrium" >&2
    cargo build --release --locked -p atrium >/dev/null 2>&1 || die "cargo build --release -p atrium failed"
    bin="$repo/target/release/atrium"
fi

# --- the portal's configuration and its ended jobs ---------------------------------------
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
max_job_count = 200000
max_submitted_jobs_per_user = 200000
[accounts]
home_root = "$work/atrium/home"
[cluster]
cpus = 16
memory_mb = 16384
TOML
    for ((n = 0; n < GPUS; n++)); do
        printf '[[cluster.gpus]]\nindex = %d\nmodel = "A100-80GB"\nmemory_mb = 81920\n' "$n"
    done
    printf '[[cluster.partitions]]\nname = "gpu"\ndefault = true\ncpus_per_gpu = 2\nmem_per_gpu_mb = 1024\n'
} >"$work/atrium/atrium.toml"
cli=(env -u ATRIUM_CONFIG "$bin" --config "$work/atrium/atrium.toml")
"${cli[@]}" migrate >/dev/null || die "atrium migrate failed"
db="$work/atrium/data/atrium.db"
[[ -f "$db" ]] || die "no database at $db"

echo "== $ENDED ended jobs into the database" >&2
now=$(($(date +%s) * 1000))
JOB_COLUMNS="id, task, user_name, account, partition, name, state, script, request, environment,
  workdir, submit_dir, submit_time, start_time, end_time, time_limit, nodelist, cpus, memory_mb,
  gpus, gpu_milli, exit_code"
sqlite3 "$db" <<SQL
PRAGMA synchronous = OFF;
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $ENDED)
INSERT INTO jobs ($JOB_COLUMNS)
SELECT i, -1, CASE WHEN i % 100 = 0 THEN 'alice' ELSE printf('u%04d', i % 1000) END,
       CASE WHEN i % 100 = 0 THEN 'alice' ELSE printf('u%04d', i % 1000) END, 'gpu',
       'train' || (i % 50), CASE WHEN i % 10 = 0 THEN 'FAILED' ELSE 'COMPLETED' END,
       '', '{}', '{}', '/home', '/home',
       $now - ($ENDED - i) * 60000 - 7200000, $now - ($ENDED - i) * 60000 - 3600000,
       $now - ($ENDED - i) * 60000, 7200, 'head', 2, 1024, 'gpu:1', 1000,
       CASE WHEN i % 10 = 0 THEN 1 ELSE 0 END
FROM n;
COMMIT;
ANALYZE;
SQL

echo "== starting $bin serve" >&2
portal_serve "$work/atrium" 60 "${cli[@]}" || die "the portal did not start"
base=$portal_base
password=$(sed -n 's/^ *password: //p' "$work/atrium/out")

jar="$work/atrium/jar"
admin_token=$(portal_bearer "$base" admin "$password" "$jar") \
    || die "could not log in as admin and create a token"
auth="Authorization: Bearer $admin_token"

alice_password="bench-alice-$$-password"
printf '%s\n' "$alice_password" | "${cli[@]}" user add alice --uid 20201 --gid 20201 \
    --home "$work/atrium/home/alice" >/dev/null 2>&1 || die "could not create user alice"
alice_jar="$work/atrium/alice-jar"
alice_token=$(portal_bearer "$base" alice "$alice_password" "$alice_jar") || die "login as alice failed"
alice_auth="Authorization: Bearer $alice_token"
alice_cookie="Cookie: $(awk '$6 == "atrium_session" {print $6 "=" $7}' "$alice_jar")"
[[ "$alice_cookie" == *atrium_session=* ]] || die "no session cookie for alice"

total() { curl -sf -H "$auth" "$base/api/v1/jobs?per_page=1" | sed -n 's/.*"total": *\([0-9]*\).*/\1/p'; }
pending() { curl -sf -H "$auth" "$base/api/v1/jobs?state=PENDING&per_page=1" | sed -n 's/.*"total": *\([0-9]*\).*/\1/p'; }
running_count() { curl -sf -H "$auth" "$base/api/v1/jobs?state=RUNNING&per_page=1" | sed -n 's/.*"total": *\([0-9]*\).*/\1/p'; }
submit() { curl -sf -H "$1" -H 'content-type: application/json' -d "$2" "$base/api/v1/jobs" | sed -n 's/.*"id": *"\([0-9]*\)".*/\1/p'; }

# --- the queue ----------------------------------------------------------------------------
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
want=$((JOBS - ENDED))
echo "== filling the queue to $want pending jobs" >&2
wrk -t2 -c8 -d600s -H "$auth" -s "$repo/bench/lua/fill.lua" "$base/api/v1/jobs" >"$work/wrk.out" &
wrk_pid=$!
while kill -0 "$wrk_pid" 2>/dev/null && (($(pending) < want)); do sleep 0.2; done
kill -INT "$wrk_pid" 2>/dev/null || true
wait "$wrk_pid" || true
queued=$(pending)
known=$((queued + GPUS + ENDED))
echo "== $queued pending, $GPUS running, $ENDED ended: $known jobs known" >&2
dashboard=$(curl -s -w '\n%{http_code}' -H "$alice_cookie" "$base/")
grep -q 'id="greeting"' <<<"$dashboard" ||
    die "alice's dashboard did not render: $(tail -c 300 <<<"$dashboard"); $(tail -n 5 "$work/atrium/err")"

# --- timing ---------------------------------------------------------------------------------
# sum_count ROUTE: the histogram's sum and count for ROUTE.
sum_count() {
    curl -sf -b "$jar" "$base/metrics" | awk -v r="route=\"$1\"" '
        index($0, "atrium_http_request_duration_seconds_sum{") == 1 && index($0, r) {s = $NF}
        index($0, "atrium_http_request_duration_seconds_count{") == 1 && index($0, r) {c = $NF}
        END {print s + 0, c + 0}'
}
# buckets ROUTE: "le count" lines of the histogram for ROUTE.
buckets() {
    curl -sf -b "$jar" "$base/metrics" | awk -v r="route=\"$1\"" '
        index($0, "atrium_http_request_duration_seconds_bucket{") == 1 && index($0, r) {
            match($0, /le="[^"]*"/); print substr($0, RSTART + 4, RLENGTH - 5), $NF}'
}
# server_time PATH ROUTE: REQUESTS sequential GETs of PATH as alice; prints the mean
# server time (ms) and the buckets of the median and the 99th percentile.
server_time() {
    local i before after
    for ((i = 0; i < WARM; i++)); do curl -sf -o /dev/null -H "$alice_cookie" "$base$1"; done
    before=$(sum_count "$2")
    buckets "$2" >"$work/b0"
    for ((i = 0; i < REQUESTS; i++)); do curl -sf -o /dev/null -H "$alice_cookie" "$base$1"; done
    after=$(sum_count "$2")
    buckets "$2" >"$work/b1"
    paste "$work/b0" "$work/b1" | awk -v before="$before" -v after="$after" '
        BEGIN {split(before, b, " "); split(after, a, " "); n = a[2] - b[2]}
        {le[NR] = $1; c[NR] = $4 - $2}
        END {
            p50 = "?"; p99 = "?"
            for (i = 1; i <= NR; i++) {
                if (p50 == "?" && c[i] >= n * 0.5) p50 = le[i] * 1000
                if (p99 == "?" && c[i] >= n * 0.99) p99 = le[i] * 1000
            }
            printf "%.2f ms mean over %d requests (median <= %s ms, p99 <= %s ms)\n", (a[1] - b[1]) / n * 1000, n, p50, p99
        }'
}
echo "== GET / as alice: server time" >&2
home_server=$(server_time / /)
echo "== GET /jobs as alice: server time" >&2
jobs_server=$(server_time /jobs /jobs)
echo "== GET / as alice: wrk -t1 -c1 -d5s" >&2
wrk -t1 -c1 -d5s --latency -H "$alice_cookie" "$base/" >"$work/wrk-home.out"
home_rps=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' "$work/wrk-home.out")
home_p50=$(awk '$1 == "50%" {print $2}' "$work/wrk-home.out")
home_p99=$(awk '$1 == "99%" {print $2}' "$work/wrk-home.out")
home_kb=$(curl -sf -H "$alice_cookie" "$base/" | wc -c | awk '{printf "%.1f", $1 / 1024}')
load_end=$(loadavg)

echo
echo "atrium $("$bin" --version | awk '{print $2}'), SQLite, $(nproc) cores"
echo "load average: at the start $load_start, at the end $load_end"
printf '%-40s %s\n' \
    "jobs known" "$known ($queued pending, $GPUS running, $ENDED ended; alice: 20 queued, $((ENDED / 100)) ended)" \
    "GET / (dashboard), server" "$home_server" \
    "GET / (dashboard), wrk -c1" "$home_rps requests/s, p50 $home_p50, p99 $home_p99, $home_kb KB" \
    "GET /jobs (alice's queue), server" "$jobs_server" \
    "goal" "dashboard server time <= 10 ms"
