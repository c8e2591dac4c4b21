#!/usr/bin/env bash
# Benchmark: atrium's scheduler side by side with Slurm (Debian's slurmctld + slurmd, started
# on this machine by bench/slurm/setup.sh), in one run. Four figures for each:
#
#   1. durable submissions/s with 8 concurrent clients, of held 1-GPU jobs (held, so that
#      nothing runs). Slurm: 8 parallel loops of `sbatch` (one process per submission).
#      atrium: wrk 2 threads x 8 connections POSTing /api/v1/jobs (bench/lua/submit.lua),
#      and, apples to apples with Slurm, 8 parallel loops of `atrium sbatch`.
#   2. submit -> RUNNING latency of a 1-GPU job on an idle node: the job's first command
#      writes `date +%s%N` to a file; latency = that minus the clock read just before the
#      submitting command (sbatch; atrium sbatch) starts. Median of LATENCY_RUNS, each
#      waited for until finished.
#   3. end-to-end throughput: E2E_JOBS jobs `--gres=gpu:1 --wrap true` on 8 GPUs,
#      submitted one after the other (Slurm: one sbatch each; atrium: one curl process,
#      sequential POSTs on one connection); from the first submission until the queue is
#      empty (polled every 50 ms), in jobs/s.
#   4. queue listing with LIST_JOBS pending (held) jobs: median of LIST_RUNS runs of
#      `squeue`; of `atrium squeue` (both whole processes), and the portal's answer to
#      GET /api/v1/jobs as curl's time_total measures it. Measured first, on an
#      empty controller: Slurm keeps finished jobs in memory for MinJobAge (300 s) and
#      squeue transfers them too, so after the other three it would take twice as long.
#
#   bench/jobs.sh [--slurm-only | --atrium-only]   (one side only: for development; the
#                                                    recorded figures come from one run of both)
#
# Sizes (environment): SUBMISSIONS=2000 (per client kind, for the loops), WRK_SECONDS=10,
# LATENCY_RUNS=10, E2E_JOBS=500, LIST_JOBS=1000, LIST_RUNS=20.
#
# Runs as root (the throwaway Slurm runs as root; atrium runs jobs as the admin's POSIX
# uid). Builds target/release/atrium unless --slurm-only or BENCH_ATRIUM_BIN=path names a binary
# to use instead. Everything listens on 127.0.0.1 and lives in a temporary directory
# removed at exit. Figures are only meaningful on a quiet machine: the load average is
# printed at the start and after each side.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/common.sh
repo=$(pwd)

slurm_only=false
atrium_only=false
for arg in "$@"; do
    case $arg in
        --slurm-only) slurm_only=true ;;
        --atrium-only) atrium_only=true ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "jobs.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

SUBMISSIONS=${SUBMISSIONS:-2000}
WRK_SECONDS=${WRK_SECONDS:-10}
LATENCY_RUNS=${LATENCY_RUNS:-10}
E2E_JOBS=${E2E_JOBS:-500}
LIST_JOBS=${LIST_JOBS:-1000}
LIST_RUNS=${LIST_RUNS:-20}
CLIENTS=8
POLL=0.05

die() { echo "jobs.sh: $*" >&2; exit 1; }
[[ "$(id -u)" -eq 0 ]] || die "must run as root (the throwaway Slurm runs as root)"
for bin in sbatch squeue scancel wrk curl python3; do
    command -v "$bin" >/dev/null || die "$bin is missing: tests/install-deps.sh installs it"
done

work=$(mktemp -d -t atrium-jobs-bench-XXXXXX)
chmod 0711 "$work" # atrium's jobs run as another uid and write their stamps below
mkdir -m 1777 "$work/stamps"
mkdir "$work/jobs"
slurm_dir="$work/slurm"
atrium_pid=""
cleanup() {
    if [[ -n "$atrium_pid" ]]; then
        kill "$atrium_pid" 2>/dev/null || true
        wait "$atrium_pid" 2>/dev/null || true
    fi
    if [[ -d "$slurm_dir/run" ]]; then
        SLURM_CONF="$slurm_dir/etc/slurm.conf" scancel -u root 2>/dev/null || true
        "$repo/bench/slurm/stop.sh" "$slurm_dir" || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# --- helpers ----------------------------------------------------------------------------
now_ns() { echo "${EPOCHREALTIME/./}000"; }           # wall clock, same as `date +%s%N`
# ratio A B: A/B with 3 significant digits, or "-" when either is missing.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || a == "-" || b == "-" || b == 0) print "-"; else printf "%.3g\n", a / b}'; }
# time_ms CMD...: run CMD (output discarded) and print its wall time in ms.
time_ms() {
    local t0 t1
    t0=${EPOCHREALTIME/./}
    "$@" >/dev/null 2>&1 || return 1
    t1=${EPOCHREALTIME/./}
    awk -v d=$((t1 - t0)) 'BEGIN {printf "%.2f\n", d / 1000}'
}

# latency_runs SIDE DIR EMPTY SUBMIT...: LATENCY_RUNS times, write a 1-GPU job script whose
# first command stamps the time into DIR, submit it with `SUBMIT... SCRIPT`, wait for the
# stamp and then for EMPTY to succeed; prints each latency (ms) on a line.
latency_runs() {
    local side=$1 dir=$2 empty=$3 i stamp t0
    shift 3
    for ((i = 0; i < LATENCY_RUNS; i++)); do
        stamp="$dir/stamp-$side-$i"
        printf '#!/bin/bash\n#SBATCH --gres=gpu:1\ndate +%%s%%N >%s\n' "$stamp" >"$dir/stamp-$side.sh"
        t0=$(now_ns)
        "$@" "$dir/stamp-$side.sh" >/dev/null || die "$side refused latency job $i"
        wait_until 120 test -s "$stamp" || die "$side latency job $i did not start within 120 s"
        awk -v a="$(<"$stamp")" -v b="$t0" 'BEGIN {printf "%.1f\n", (a - b) / 1e6}'
        wait_until 120 "$empty" || die "$side latency job $i did not finish"
    done
}
# latencies NAME OUTPUT: check that OUTPUT (of latency_runs) has LATENCY_RUNS lines; print
# them and their median on stderr; the median on stdout.
latencies() {
    local name=$1 out=$2 m
    [[ $(grep -c . <<<"$out") -eq $LATENCY_RUNS ]] || die "$name latency runs failed"
    m=$(median <<<"$out")
    echo "   ms: $(tr '\n' ' ' <<<"$out")(median $m)" >&2
    echo "$m"
}

declare -A slurm atrium
# Wait (up to 3 minutes) for the machine to calm down: figures under load mean little.
quiet() { awk -v l="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {exit !(l <= 0.5)}'; }
for ((i = 0; i < 180; i++)); do quiet && break; sleep 1; done
load_start=$(loadavg)
if awk -v l="${load_start%% *}" 'BEGIN {exit !(l > 0.5)}'; then
    echo "jobs.sh: WARNING: load average $load_start at the start: something else is running, these figures are not final" >&2
fi

# The held job both sides' command-line clients submit (Slurm also honours #SBATCH --hold).
cat >"$work/jobs/held.sh" <<'JOB'
#!/bin/bash
#SBATCH --gres=gpu:1
#SBATCH --hold
true
JOB

# =======================================================================================
# Slurm
# =======================================================================================
slurm_version="not run (--atrium-only)"
load_slurm="-"
if ! $atrium_only; then
    echo "== Slurm: starting slurmctld + slurmd (bench/slurm/setup.sh)" >&2
    "$repo/bench/slurm/setup.sh" "$slurm_dir" >/dev/null
    export SLURM_CONF="$slurm_dir/etc/slurm.conf"
    cd "$work/jobs"

    slurm_queue_len() { squeue -h -o %i | wc -l; }
    slurm_queue_empty() { [[ "$(slurm_queue_len)" -eq 0 ]]; }
    slurm_cancel_all() {
        scancel -u root
        wait_until 120 slurm_queue_empty || die "Slurm queue not empty 120 s after scancel"
    }
    # slurm_submit_loops TOTAL: CLIENTS parallel loops of sbatch held.sh; prints accepted count.
    slurm_submit_loops() {
        local total=$1 c pids=()
        for ((c = 0; c < CLIENTS; c++)); do
            (
                ok=0
                for ((i = c; i < total; i += CLIENTS)); do
                    if sbatch -Q -o /dev/null "$work/jobs/held.sh" >/dev/null; then ok=$((ok + 1)); fi
                done
                echo "$ok" >"$work/slurm-client-$c"
            ) &
            pids+=($!)
        done
        wait "${pids[@]}"
        cat "$work"/slurm-client-* | awk '{s += $1} END {print s}'
        rm -f "$work"/slurm-client-*
    }

    # 1. queue listing, first: on a fresh controller (finished jobs stay in slurmctld's memory
    # for MinJobAge, 300 s, and squeue transfers them too, so measured later it would be slower)
    echo "== Slurm: squeue with $LIST_JOBS pending jobs, $LIST_RUNS runs" >&2
    accepted=$(slurm_submit_loops "$LIST_JOBS")
    [[ "$(slurm_queue_len)" -eq "$LIST_JOBS" ]] || die "Slurm queue holds $(slurm_queue_len) jobs, not $LIST_JOBS"
    times=()
    for ((i = 0; i < LIST_RUNS; i++)); do times+=("$(time_ms squeue)"); done
    slurm[list]=$(printf '%s\n' "${times[@]}" | median)
    echo "   ms: ${times[*]} (median ${slurm[list]})" >&2
    slurm_cancel_all

    # 2. submissions/s
    echo "== Slurm: $SUBMISSIONS held submissions from $CLIENTS parallel sbatch loops" >&2
    t0=${EPOCHREALTIME/./}
    accepted=$(slurm_submit_loops "$SUBMISSIONS")
    t1=${EPOCHREALTIME/./}
    queued=$(slurm_queue_len)
    slurm[submit]=$(awk -v n="$accepted" -v d=$((t1 - t0)) 'BEGIN {printf "%.0f\n", n / (d / 1e6)}')
    echo "   accepted $accepted of $SUBMISSIONS, $queued in the queue, ${slurm[submit]}/s" >&2
    slurm_cancel_all

    # 3. submit -> RUNNING latency
    echo "== Slurm: submit -> running, $LATENCY_RUNS runs" >&2
    slurm[latency]=$(latencies Slurm "$(latency_runs Slurm "$work/stamps" slurm_queue_empty sbatch -Q -o /dev/null)")

    # 4. end-to-end throughput
    echo "== Slurm: $E2E_JOBS jobs --gres=gpu:1 --wrap true, end to end" >&2
    t0=${EPOCHREALTIME/./}
    for ((i = 0; i < E2E_JOBS; i++)); do
        sbatch -Q -o /dev/null --gres=gpu:1 --wrap true >/dev/null
    done
    t_sub=${EPOCHREALTIME/./}
    wait_until 3600 slurm_queue_empty || die "Slurm did not finish $E2E_JOBS jobs within an hour"
    t1=${EPOCHREALTIME/./}
    slurm[e2e]=$(awk -v n="$E2E_JOBS" -v d=$((t1 - t0)) 'BEGIN {printf "%.2f\n", n / (d / 1e6)}')
    echo "   submitted in $(((t_sub - t0) / 1000)) ms, all done in $(((t1 - t0) / 1000)) ms: ${slurm[e2e]} jobs/s" >&2

    slurm_version=$(sbatch --version | awk '{print $2}')
    load_slurm=$(loadavg)
    "$repo/bench/slurm/stop.sh" "$slurm_dir"
    cd "$repo"
fi

# =======================================================================================
# atrium
# =======================================================================================
if ! $slurm_only; then
    if [[ -n "${BENCH_ATRIUM_BIN:-}" ]]; then
        bin=$(realpath "$BENCH_ATRIUM_BIN")
    else
        echo "== atrium: building target/release/atrium" >&2
        cargo build --release --locked -p atrium >/dev/null 2>&1 || die "cargo build --release -p atrium failed"
        bin="$repo/target/release/atrium"
    fi
    echo "== atrium: starting $bin serve" >&2
    mkdir -p "$work/atrium"
    {
        cat <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/atrium/data"
[log]
filter = "warn"
[jobs]
spool_dir = "$work/atrium/spool"
# wrk's 10 s of submissions leave tens of thousands of held jobs: above the
# default MaxJobCount (10,000) and per-user default (5,000).
max_job_count = 10000000
max_submitted_jobs_per_user = 0
[accounts]
home_root = "$work/atrium/home"
[cluster]
cpus = 16
memory_mb = 16384
TOML
        for n in 0 1 2 3 4 5 6 7; do
            printf '[[cluster.gpus]]\nindex = %d\nmodel = "A100-80GB"\nmemory_mb = 81920\n' "$n"
        done
        printf '[[cluster.partitions]]\nname = "gpu"\ndefault = true\ncpus_per_gpu = 2\nmem_per_gpu_mb = 1024\n'
    } >"$work/atrium/atrium.toml"
    # The admin's jobs run as its allocated uid in its home: make one it can write.
    mkdir -p "$work/atrium/home/admin" && chmod 1777 "$work/atrium/home/admin"
    env -u ATRIUM_CONFIG "$bin" --config "$work/atrium/atrium.toml" serve >"$work/atrium/out" 2>"$work/atrium/err" &
    atrium_pid=$!
    listening() { grep -q "listening on" "$work/atrium/out" 2>/dev/null || ! kill -0 "$atrium_pid" 2>/dev/null; }
    wait_until 30 listening || true
    base=$(sed -n 's/^atrium: listening on //p' "$work/atrium/out")
    password=$(sed -n 's/^ *password: //p' "$work/atrium/out")
    if [[ -z "$base" ]]; then
        tail -n 20 "$work/atrium/err" >&2
        die "atrium did not start with a [jobs]/[cluster] configuration (job scheduler not in this build?); run bench/jobs.sh --slurm-only"
    fi

    # A personal token with scope jobs: log in (JSON), then POST /api/v1/tokens with the
    # session cookie and its CSRF token.
    jar="$work/atrium/jar"
    csrf=$(curl -sf -c "$jar" -H 'content-type: application/json' \
        -d "{\"username\":\"admin\",\"password\":\"$password\"}" "$base/api/v1/login" \
        | sed -n 's/.*"csrf_token": *"\([^"]*\)".*/\1/p') || die "login as admin failed"
    token=$(curl -sf -b "$jar" -H "x-csrf-token: $csrf" -H 'content-type: application/json' \
        -d '{"name":"bench","scopes":["read","jobs"]}' "$base/api/v1/tokens" \
        | sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p') || die "could not create a token"
    [[ "$token" == atr_* ]] || die "could not create a token"
    auth="Authorization: Bearer $token"
    export ATRIUM_URL="$base" ATRIUM_TOKEN="$token"

    code=$(curl -s -o /dev/null -w '%{http_code}' -H "$auth" "$base/api/v1/jobs")
    [[ "$code" != 404 ]] || die "atrium answers 404 for GET /api/v1/jobs: the job API has not landed in this build; run bench/jobs.sh --slurm-only"
    [[ "$code" == 200 ]] || die "GET /api/v1/jobs answered $code"
    "$bin" sbatch --help >/dev/null 2>&1 || die "this atrium build has no 'sbatch' command (job CLI not landed); run bench/jobs.sh --slurm-only"

    atrium_total() { curl -sf -H "$auth" "$base/api/v1/jobs" | sed -n 's/.*"total": *\([0-9]*\).*/\1/p'; }
    atrium_queue_empty() { [[ "$(atrium_total)" == 0 ]]; }
    # atrium_post N BODY_FILE: N sequential POST /api/v1/jobs from one curl process (one
    # connection); prints how many were accepted.
    atrium_post() {
        local n=$1 body=$2 i
        {
            printf 'silent\nheader = "%s"\nheader = "Content-Type: application/json"\ndata = "@%s"\n' "$auth" "$body"
            for ((i = 0; i < n; i++)); do printf 'url = "%s/api/v1/jobs"\n' "$base"; done
        } >"$work/atrium/post.curl"
        curl -K "$work/atrium/post.curl" | grep -o '"job_id"' | wc -l
    }
    # Cancel every active job (DELETE /api/v1/jobs/ID, one curl process per batch listed).
    atrium_cancel_all() {
        local ids round
        for ((round = 0; round < 1000; round++)); do
            ids=$(curl -sf -H "$auth" "$base/api/v1/jobs" | grep -o '"id": *"[0-9]*"' | grep -o '[0-9]\+' || true)
            [[ -n "$ids" ]] || break
            {
                printf 'silent\nrequest = "DELETE"\nheader = "%s"\noutput = "/dev/null"\n' "$auth"
                for id in $ids; do printf 'url = "%s/api/v1/jobs/%s"\n' "$base" "$id"; done
            } >"$work/atrium/cancel.curl"
            curl -K "$work/atrium/cancel.curl" >/dev/null || true
        done
        wait_until 120 atrium_queue_empty || die "atrium queue not empty 120 s after cancelling"
    }

    # 1. queue listing, first, as for Slurm
    echo "== atrium: listing with $LIST_JOBS pending jobs, $LIST_RUNS runs each" >&2
    echo '{"wrap":"true","options":{"gres":"gpu:1","hold":true}}' >"$work/atrium/held.json"
    accepted=$(atrium_post "$LIST_JOBS" "$work/atrium/held.json")
    [[ "$(atrium_total)" -eq "$LIST_JOBS" ]] || die "atrium lists $(atrium_total) active jobs, not $LIST_JOBS"
    times=()
    for ((i = 0; i < LIST_RUNS; i++)); do times+=("$(time_ms "$bin" squeue)"); done
    atrium[list_cli]=$(printf '%s\n' "${times[@]}" | median)
    echo "   atrium squeue ms: ${times[*]} (median ${atrium[list_cli]})" >&2
    # The HTTP answer alone, as curl times it from connect to the last byte: curl's own
    # start (some 8 ms of library set-up here) is not the portal's.
    times=()
    for ((i = 0; i < LIST_RUNS; i++)); do
        times+=("$(curl -sf -o /dev/null -w '%{time_total}' -H "$auth" "$base/api/v1/jobs" | awk '{printf "%.2f\n", $1 * 1000}')")
    done
    atrium[list_http]=$(printf '%s\n' "${times[@]}" | median)
    echo "   GET /api/v1/jobs (curl time_total) ms: ${times[*]} (median ${atrium[list_http]})" >&2
    atrium_cancel_all

    # 2a. submissions/s over HTTP, wrk
    echo "== atrium: held submissions, wrk -t2 -c$CLIENTS -d${WRK_SECONDS}s (bench/lua/submit.lua)" >&2
    out=$(wrk -t2 -c"$CLIENTS" -d"${WRK_SECONDS}s" -H "$auth" -s "$repo/bench/lua/submit.lua" "$base/api/v1/jobs")
    line=$(grep '^submit:' <<<"$out") || die "wrk printed no summary: $out"
    atrium[submit_http]=$(awk '{for (i = 2; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]} printf "%.0f\n", (v["requests"] - v["non2xx"]) / v["seconds"]}' <<<"$line")
    echo "   $line; listed active: $(atrium_total); ${atrium[submit_http]}/s" >&2
    atrium_cancel_all

    # 2b. submissions/s from the CLI, one process per submission, like sbatch
    echo "== atrium: $SUBMISSIONS held submissions from $CLIENTS parallel 'atrium sbatch' loops" >&2
    pids=()
    t0=${EPOCHREALTIME/./}
    for ((c = 0; c < CLIENTS; c++)); do
        (
            ok=0
            for ((i = c; i < SUBMISSIONS; i += CLIENTS)); do
                if "$bin" sbatch "$work/jobs/held.sh" >/dev/null; then ok=$((ok + 1)); fi
            done
            echo "$ok" >"$work/atrium-client-$c"
        ) &
        pids+=($!)
    done
    wait "${pids[@]}" # not the server
    t1=${EPOCHREALTIME/./}
    accepted=$(cat "$work"/atrium-client-* | awk '{s += $1} END {print s}')
    atrium[submit_cli]=$(awk -v n="$accepted" -v d=$((t1 - t0)) 'BEGIN {printf "%.0f\n", n / (d / 1e6)}')
    echo "   accepted $accepted of $SUBMISSIONS, listed active: $(atrium_total); ${atrium[submit_cli]}/s" >&2
    atrium_cancel_all

    # 3. submit -> RUNNING latency, submitted with `atrium sbatch` as Slurm's is with sbatch
    echo "== atrium: submit -> running, $LATENCY_RUNS runs" >&2
    # From the home, as a user would: a job runs where it was submitted from, and gets a
    # private /tmp.
    home_sbatch() { (cd "$work/atrium/home/admin" && "$bin" sbatch "$@"); }
    atrium[latency]=$(latencies atrium "$(latency_runs atrium "$work/atrium/home/admin" atrium_queue_empty home_sbatch)")
    # The same over HTTP from a client already running (no process start to pay).
    echo "   over HTTP from one running client (bench/py/submit_latency.py):" >&2
    atrium[latency_http]=$(latencies "atrium HTTP" "$(python3 "$repo/bench/py/submit_latency.py" "$LATENCY_RUNS" "$work/atrium/home/admin")")

    # 4. end-to-end throughput
    echo "== atrium: $E2E_JOBS jobs gres gpu:1 wrap true, end to end" >&2
    echo '{"wrap":"true","options":{"gres":"gpu:1"}}' >"$work/atrium/true.json"
    t0=${EPOCHREALTIME/./}
    accepted=$(atrium_post "$E2E_JOBS" "$work/atrium/true.json")
    t_sub=${EPOCHREALTIME/./}
    [[ "$accepted" -eq "$E2E_JOBS" ]] || die "atrium accepted $accepted of $E2E_JOBS jobs"
    wait_until 3600 atrium_queue_empty || die "atrium did not finish $E2E_JOBS jobs within an hour"
    t1=${EPOCHREALTIME/./}
    atrium[e2e]=$(awk -v n="$E2E_JOBS" -v d=$((t1 - t0)) 'BEGIN {printf "%.2f\n", n / (d / 1e6)}')
    echo "   submitted in $(((t_sub - t0) / 1000)) ms, all done in $(((t1 - t0) / 1000)) ms: ${atrium[e2e]} jobs/s" >&2

    atrium_version=$("$bin" --version | awk '{print $2}')
    load_atrium=$(loadavg)
fi

# =======================================================================================
# Report
# =======================================================================================
echo
echo "date: $(date -Iseconds)"
echo "uname: $(uname -a)"
echo "nproc: $(nproc); memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); $(. /etc/os-release; echo "$PRETTY_NAME")"
echo "load average (1/5/15 min): start $load_start; after Slurm $load_slurm${load_atrium:+; after atrium $load_atrium}"
echo "versions: Slurm $slurm_version, munge $(munged -V 2>&1 | awk '{print $1}' | sed 's/^munge-//'), wrk $(wrk -v 2>&1 | awk 'NR == 1 {print $2}'), curl $(curl -V | awk 'NR == 1 {print $2}'), atrium ${atrium_version:-not run (--slurm-only)}"
echo "sizes: SUBMISSIONS=$SUBMISSIONS WRK_SECONDS=$WRK_SECONDS LATENCY_RUNS=$LATENCY_RUNS E2E_JOBS=$E2E_JOBS LIST_JOBS=$LIST_JOBS LIST_RUNS=$LIST_RUNS"
echo
row() { printf '| %s | %s | %s | %s | %s |\n' "$1" "$2" "${3:--}" "$(ratio "${3:-}" "$2")" "$4"; }
echo "| metric | Slurm $slurm_version | atrium | atrium/Slurm | atrium goal |"
echo "|---|---|---|---|---|"
row "submissions/s, $CLIENTS clients (Slurm: sbatch loops; atrium: HTTP, wrk)" "${slurm[submit]:-}" "${atrium[submit_http]:-}" "≥ 4,000"
row "submissions/s, $CLIENTS clients, CLI, one process per submission" "${slurm[submit]:-}" "${atrium[submit_cli]:-}" "-"
row "submit → RUNNING, 1 GPU, idle node, median of $LATENCY_RUNS (ms): sbatch / atrium sbatch" "${slurm[latency]:-}" "${atrium[latency]:-}" "≤ 20 ms"
row "submit → RUNNING, as above: sbatch / POST /api/v1/jobs from a running client" "${slurm[latency]:-}" "${atrium[latency_http]:-}" "≤ 20 ms"
row "end to end, $E2E_JOBS one-GPU \`true\` jobs on 8 GPUs (jobs/s)" "${slurm[e2e]:-}" "${atrium[e2e]:-}" "≥ 100"
row "listing $LIST_JOBS pending: squeue / atrium squeue, median of $LIST_RUNS (ms)" "${slurm[list]:-}" "${atrium[list_cli]:-}" "≤ 5 ms"
row "listing $LIST_JOBS pending: squeue / GET /api/v1/jobs answered (curl time_total), median (ms)" "${slurm[list]:-}" "${atrium[list_http]:-}" "≤ 5 ms"
echo
echo "atrium/Slurm: for rates higher is better; for times (ms) lower is better (below 1: atrium is faster)."
