#!/usr/bin/env bash
# Benchmark: accounting queries on 1,000,000 recorded jobs, on SQLite and on PostgreSQL,
# through the real portal's API.
#
#   bench/accounting.sh [sqlite|postgres]...      (default: both)
#
# For each database: a fresh one (SQLite: a file in a temporary directory; PostgreSQL:
# a throwaway cluster started by tests/pg-cluster.sh as the `postgres` OS user, unix
# socket only), migrated by `atrium migrate`, then filled in one INSERT … SELECT
# (SQLite: a recursive CTE; PostgreSQL: generate_series) with JOBS jobs over the 12
# months of 2025 (ids in submission order, as a real portal writes them): 1,000 users
# (u0000…u0999) in 20 groups (g00…g19), submissions spread evenly over the year, a wait
# of 0–10 min, run times 1–60 min (60 %), 1–8 h (30 %) or 8–48 h (10 %), GPUs 0 (20 %),
# 1 (40 %), 2 (20 %), 4 (12 %), 8 (6 %) or one 1g.10gb MIG slice (2 %, gpu_milli 143),
# 8 CPUs and 48 GB per GPU; 500 more jobs still running now. Then ANALYZE, an
# administrator `boss` and a read token, and the portal is started on 127.0.0.1.
#
# Timed (curl's time_total, the median of RUNS runs after WARM unrecorded ones):
#   (a) one user's month:     GET /api/v1/accounting?user=u0042&from=2025-06-01&to=2025-07-01
#       (every job of the month with what it used, and the totals)
#   (b) the cluster's month:  GET /api/v1/accounting?from=2025-06-01&to=2025-07-01&group_by=user
#       (the totals and one row per user)
#   (c) the cluster's month as a chart: GET /api/v1/accounting/chart.svg?…&group_by=group
#       (GPU-hours per day stacked by group)
# June is in the middle of the data: the jobs that ended after it are scanned too.
#
# Environment: JOBS=1000000, RUNS=15, WARM=3, BENCH_ATRIUM_BIN (default: builds
# target/release/atrium). Needs sqlite3, psql and PostgreSQL's server binaries
# (tests/install-deps.sh installs them); runs as root (PostgreSQL runs as `postgres`).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

JOBS=${JOBS:-1000000}
RUNS=${RUNS:-15}
WARM=${WARM:-3}
backends=()
for arg in "$@"; do
    case $arg in
        sqlite | postgres) backends+=("$arg") ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "accounting.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done
[[ ${#backends[@]} -gt 0 ]] || backends=(sqlite postgres)

die() { echo "accounting.sh: $*" >&2; exit 1; }
for tool in sqlite3 psql curl; do
    command -v "$tool" >/dev/null || die "$tool is missing: tests/install-deps.sh installs it"
done
if [[ -n "${BENCH_ATRIUM_BIN:-}" ]]; then
    bin=$BENCH_ATRIUM_BIN
else
    cargo build --release --locked -p atrium >/dev/null 2>&1
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/atrium
fi

work=$(mktemp -d -t atrium-acct-bench-XXXXXX)
chmod 0755 "$work"
pid=""
pg_dir="$work/pg"
cleanup() {
    if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    [[ -d "$pg_dir" ]] && "$repo/tests/pg-cluster.sh" stop "$pg_dir" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

year=1735689600000 # 2025-01-01T00:00:00Z
now=$(($(date +%s) * 1000))

# The job rows, from columns i (1…JOBS), a, b, c (random non-negative integers).
jobs_select() {
    local user=$1 # how the dialect spells 'u' || zero-padded (a / 13) % 1000
    cat <<SQL
SELECT i, -1, $user, $user, CASE WHEN c % 10 = 0 THEN 'short' ELSE 'gpu' END,
       'train' || (i % 50),
       CASE WHEN (b / 17) % 100 < 80 THEN 'COMPLETED' WHEN (b / 17) % 100 < 90 THEN 'FAILED'
            WHEN (b / 17) % 100 < 97 THEN 'CANCELLED' ELSE 'TIMEOUT' END,
       '', '{}', '{}', '/home', '/home', submit, submit + wait, submit + wait + dur, 172800,
       'node' || (a % 64), CASE gm WHEN 0 THEN 4 WHEN 143 THEN 2 ELSE gm / 125 END,
       CASE gm WHEN 0 THEN 24576 WHEN 143 THEN 12288 ELSE gm / 125 * 6144 END,
       CASE gm WHEN 0 THEN '' WHEN 143 THEN 'gpu:1g.10gb:1' ELSE 'gpu:' || (gm / 1000) END,
       gm, CASE WHEN (b / 17) % 100 < 80 THEN 0 ELSE 1 END
FROM (SELECT i, a, b, c,
             $year + (i - 1) * (31536000000 / $JOBS) + a % (31536000000 / $JOBS) AS submit,
             b % 600000 AS wait,
             CASE WHEN c % 100 < 60 THEN 60000 + (b / 7) % 3540000
                  WHEN c % 100 < 90 THEN 3600000 + (b / 11) % 25200000
                  ELSE 28800000 + (b / 13) % 144000000 END AS dur,
             CASE WHEN (a / 7) % 100 < 20 THEN 0 WHEN (a / 7) % 100 < 60 THEN 1000
                  WHEN (a / 7) % 100 < 80 THEN 2000 WHEN (a / 7) % 100 < 92 THEN 4000
                  WHEN (a / 7) % 100 < 98 THEN 8000 ELSE 143 END AS gm
      FROM r) AS g
SQL
}

JOB_COLUMNS="id, task, user_name, account, partition, name, state, script, request, environment,
  workdir, submit_dir, submit_time, start_time, end_time, time_limit, nodelist, cpus, memory_mb,
  gpus, gpu_milli, exit_code"

fill_sqlite() {
    sqlite3 "$1" <<SQL
PRAGMA synchronous = OFF;
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999)
INSERT INTO users (username, source, created_at, updated_at) SELECT printf('u%04d', i), 'local', 0, 0 FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 19)
INSERT INTO groups (name, source, created_at) SELECT printf('g%02d', i), 'local', 0 FROM n;
INSERT INTO memberships (user_id, group_id)
  SELECT u.id, g.id FROM users u JOIN groups g
  ON g.name = printf('g%02d', CAST(substr(u.username, 2) AS INTEGER) % 20);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $JOBS),
-- Materialized: each row draws its random numbers once, however often they are used.
r AS MATERIALIZED (SELECT i, abs(random() / 4) AS a, abs(random() / 4) AS b, abs(random() / 4) AS c FROM n)
INSERT INTO jobs ($JOB_COLUMNS)
$(jobs_select "printf('u%04d', (a / 13) % 1000)");
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
INSERT INTO jobs ($JOB_COLUMNS)
  SELECT $JOBS + i, -1, printf('u%04d', i * 7 % 1000), printf('u%04d', i * 7 % 1000), 'gpu', 'running',
         'RUNNING', '', '{}', '{}', '/home', '/home', $now - i * 300000, $now - i * 300000, NULL,
         NULL, 'node1', 8, 49152, 'gpu:1', 1000, NULL FROM n;
COMMIT;
ANALYZE;
SQL
}

fill_postgres() {
    psql -X -q -v ON_ERROR_STOP=1 -d "$1" <<SQL
INSERT INTO users (username, source, created_at, updated_at)
  SELECT 'u' || lpad(i::text, 4, '0'), 'local', 0, 0 FROM generate_series(0, 999) i;
INSERT INTO groups (name, source, created_at)
  SELECT 'g' || lpad(i::text, 2, '0'), 'local', 0 FROM generate_series(0, 19) i;
INSERT INTO memberships (user_id, group_id)
  SELECT u.id, g.id FROM users u JOIN groups g
  ON g.name = 'g' || lpad((substr(u.username, 2)::int % 20)::text, 2, '0');
WITH r AS MATERIALIZED (SELECT i, (random() * 2e9)::bigint AS a, (random() * 2e9)::bigint AS b,
                  (random() * 2e9)::bigint AS c FROM generate_series(1, $JOBS) i)
INSERT INTO jobs ($JOB_COLUMNS)
$(jobs_select "'u' || lpad(((a / 13) % 1000)::text, 4, '0')");
INSERT INTO jobs ($JOB_COLUMNS)
  SELECT $JOBS + i, -1, 'u' || lpad((i * 7 % 1000)::text, 4, '0'), 'u' || lpad((i * 7 % 1000)::text, 4, '0'),
         'gpu', 'running', 'RUNNING', '', '{}', '{}', '/home', '/home', $now - i * 300000,
         $now - i * 300000, NULL, NULL, 'node1', 8, 49152, 'gpu:1', 1000, NULL
  FROM generate_series(1, 500) i;
VACUUM ANALYZE;
SQL
}

# Median of the time_total (ms) of RUNS GETs of $1, after WARM unrecorded ones.
median_ms() {
    local url=$1 times=()
    for _ in $(seq 1 "$WARM"); do
        curl -sf -o /dev/null -H "Authorization: Bearer $token" "$url" || die "GET $url failed"
    done
    for _ in $(seq 1 "$RUNS"); do
        times+=("$(curl -sf -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $token" "$url")")
    done
    printf '%s\n' "${times[@]}" | sort -g | awk '{t[NR] = $1} END {
        m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
        printf "%.1f ms (min %.1f, max %.1f)", m * 1000, t[1] * 1000, t[NR] * 1000 }'
}

bench() {
    local backend=$1 url
    case $backend in
        sqlite) url="sqlite://$work/sqlite/atrium.db?mode=rwc"; mkdir -p "$work/sqlite" ;;
        postgres)
            url=$("$repo/tests/pg-cluster.sh" start "$pg_dir" | sed -n 's/^export ATRIUM_TEST_PG_URL=//p' | tr -d "'\"")
            [[ -n "$url" ]] || die "could not start PostgreSQL"
            psql -X -q -d "$url" -c "CREATE DATABASE atrium_bench"
            url=$(echo "$url" | sed 's|/postgres?|/atrium_bench?|') ;;
        *) die "unknown database $backend (sqlite or postgres)" ;;
    esac
    local config="$work/$backend.toml"
    cat >"$config" <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/var-$backend"
[database]
url = "$url"
[log]
filter = "warn"
TOML
    local cli=(env -u ATRIUM_CONFIG "$bin" --config "$config")
    "${cli[@]}" migrate >/dev/null
    local started=$SECONDS
    case $backend in
        sqlite) fill_sqlite "$work/sqlite/atrium.db" ;;
        postgres) fill_postgres "$url" ;;
    esac
    echo "$backend: $((JOBS + 500)) jobs written and analysed in $((SECONDS - started)) s"
    echo "password-of-the-bench" | "${cli[@]}" user add boss --admin >/dev/null

    "${cli[@]}" serve >"$work/out-$backend" 2>"$work/err-$backend" &
    pid=$!
    for _ in $(seq 1 400); do grep -q "listening on" "$work/out-$backend" 2>/dev/null && break; sleep 0.05; done
    local base
    base=$(sed -n 's/^atrium: listening on //p' "$work/out-$backend")
    [[ -n "$base" ]] || { cat "$work/err-$backend"; die "the portal did not start"; }
    local jar="$work/jar-$backend" csrf session_csrf
    csrf=$(curl -s -c "$jar" -b "$jar" "$base/login" | sed -n 's/.*name="csrf" value="\([^"]*\)".*/\1/p' | head -1)
    curl -s -c "$jar" -b "$jar" -o /dev/null -X POST "$base/login" --data-urlencode "username=boss" \
        --data-urlencode "password=password-of-the-bench" --data-urlencode "csrf=$csrf"
    session_csrf=$(curl -s -b "$jar" "$base/" | sed -n 's/.*name="csrf" value="\([^"]*\)".*/\1/p' | head -1)
    token=$(curl -s -b "$jar" -H "x-csrf-token: $session_csrf" -H 'content-type: application/json' \
        -d '{"name":"bench","scopes":["read"]}' "$base/api/v1/tokens" | sed -n 's/.*"secret":"\([^"]*\)".*/\1/p')
    [[ -n "$token" ]] || die "could not create a token"

    local month="from=2025-06-01&to=2025-07-01"
    local a="$base/api/v1/accounting?user=u0042&$month"
    local b="$base/api/v1/accounting?$month&group_by=user"
    local c="$base/api/v1/accounting/chart.svg?$month&group_by=group&bucket=day"
    echo "$backend: (a) one user's month: $(median_ms "$a"); $(curl -s -H "Authorization: Bearer $token" "$a" | jq -c '.totals')"
    echo "$backend: (b) the cluster's month by user: $(median_ms "$b"); $(curl -s -H "Authorization: Bearer $token" "$b" | jq -c '[.totals, (.rows | length)]')"
    echo "$backend: (c) the cluster's month, chart by group per day: $(median_ms "$c")"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}

for backend in "${backends[@]}"; do
    bench "$backend"
done
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(. /etc/os-release; echo "$PRETTY_NAME"); $(date -u +%Y-%m-%dT%H:%MZ)"
