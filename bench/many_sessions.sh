#!/usr/bin/env bash
# Benchmark: many sessions proxied at once (issue 23). SESSIONS (100) sessions of USERS (10)
# users, each running tests/src/bin/bench-upstream as its server, with every session's
# progress stream (GET /api/v1/sessions/{id}/progress, server-sent events, as the session
# page follows it) held open throughout; wrk across the SESSIONS session URLs, each request
# the next session's (Lua, round-robin), through atrium and through configurable-http-proxy
# (CHP 5.3.0, JupyterHub's proxy) with the same SESSIONS routes, each to a bench-upstream of
# its own on TCP (CHP cannot reach unix sockets).
#
#   bench/many_sessions.sh [--help]
#
# Reports, medians over ROUNDS rounds (CHP then atrium in each): requests/s, p50 and p99
# with wrk -t WRK_THREADS -c CONNECTIONS for WRK_SECONDS s; every answer must be a 200.
# Memory: the portal's RSS idle (after the logins), with the sessions started, and after
# the load with the streams still open; the step supervisors beside it (RSS, PSS); CHP's
# RSS with its routes after the load. The time to start all the sessions (POSTs back to
# back, until every one is ready), and whether every progress stream was still open at the
# end, with the events and keep-alives they carried.
#
# Sizes (environment): SESSIONS=100 USERS=10 CONNECTIONS=100 WRK_THREADS=2 WRK_SECONDS=10
# ROUNDS=3. BENCH_ATRIUM_BIN and BENCH_UPSTREAM_BIN name binaries to use instead of
# building them (cargo build --release). KEEP_WORK=1 keeps the temporary directory.
#
# As root (sessions run as their users, uids 20101 …). CHP comes from npm into
# target/bench-node as for bench/sessions.sh. Everything listens on 127.0.0.1 and lives in
# a temporary directory removed at exit; the sessions are stopped through the portal.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/common.sh
repo=$(pwd)
for arg in "$@"; do
    case $arg in
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "many_sessions.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

SESSIONS=${SESSIONS:-100}
USERS=${USERS:-10}
CONNECTIONS=${CONNECTIONS:-100}
WRK_THREADS=${WRK_THREADS:-2}
WRK_SECONDS=${WRK_SECONDS:-10}
ROUNDS=${ROUNDS:-3}
CHP_VERSION=5.3.0
UID_BASE=20100
POLL=0.05

die() {
    echo "many_sessions.sh: $*" >&2
    if [[ -n "${atrium_pid:-}" && -s "${work:-}/atrium/err" ]]; then
        tail -n 15 "$work/atrium/err" >&2
    fi
    exit 1
}
say() { echo "== $*" >&2; }
for tool in wrk curl node python3; do
    command -v "$tool" >/dev/null || die "$tool is missing: tests/install-deps.sh installs it"
done
[[ "$(id -u)" -eq 0 ]] || die "run as root: the portal starts each session as its user"
((SESSIONS % USERS == 0)) || die "SESSIONS ($SESSIONS) must be a multiple of USERS ($USERS)"
per_user=$((SESSIONS / USERS))

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || b == 0) print "-"; else printf "%.3g\n", a / b}'; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
pss_kb() { awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f\n", k / 1024}'; }

# --- binaries ---------------------------------------------------------------------------
if [[ -n "${BENCH_ATRIUM_BIN:-}" && -n "${BENCH_UPSTREAM_BIN:-}" ]]; then
    bin=$(realpath "$BENCH_ATRIUM_BIN")
    upstream_bin=$(realpath "$BENCH_UPSTREAM_BIN")
else
    say "building target/release/atrium and bench-upstream"
    cargo build --release --locked -p atrium -p atrium-tests --bin atrium --bin bench-upstream >/dev/null 2>&1 ||
        die "cargo build --release failed; set BENCH_ATRIUM_BIN and BENCH_UPSTREAM_BIN to built ones"
    bin="$repo/target/release/atrium"
    upstream_bin="$repo/target/release/bench-upstream"
fi
node_dir="$repo/target/bench-node"
chp_pkg="$node_dir/node_modules/configurable-http-proxy/package.json"
if [[ ! -f "$chp_pkg" ]] || ! grep -q "\"version\": \"$CHP_VERSION\"" "$chp_pkg"; then
    say "installing configurable-http-proxy@$CHP_VERSION into target/bench-node (npm)"
    mkdir -p "$node_dir"
    npm install --prefix "$node_dir" --no-audit --no-fund --loglevel=error "configurable-http-proxy@$CHP_VERSION" >&2 ||
        die "npm install configurable-http-proxy@$CHP_VERSION failed"
fi
chp_bin="$node_dir/node_modules/configurable-http-proxy/bin/configurable-http-proxy"

# --- work directory and cleanup ---------------------------------------------------------
work=$(mktemp -d -t atrium-many-sessions-XXXXXX)
chmod 0711 "$work"
upstream_pids=()
chp_pid=""
atrium_pid=""
holder_pid=""
cleanup() {
    set +e
    [[ -z "$holder_pid" ]] || { kill "$holder_pid" 2>/dev/null; wait "$holder_pid" 2>/dev/null; }
    if [[ -n "$atrium_pid" && -s "$work/sessions.json" ]]; then
        python3 "$work/client.py" stop >/dev/null 2>&1
    fi
    for pid in $atrium_pid $chp_pid "${upstream_pids[@]}"; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    local p
    for p in /proc/[0-9]*; do
        if grep -qF "$work" "$p/cmdline" 2>/dev/null; then
            kill "${p#/proc/}" 2>/dev/null
        fi
    done
    if [[ "${KEEP_WORK:-}" == 1 ]]; then echo "many_sessions.sh: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
load_start=$(loadavg)

# The sessions' names: user benchUU, session sSS.
names=()
for ((u = 1; u <= USERS; u++)); do
    for ((s = 1; s <= per_user; s++)); do
        names+=("$(printf 'bench%02d s%02d' "$u" "$s")")
    done
done

# --- CHP with SESSIONS routes, each to its own upstream ----------------------------------
say "starting $SESSIONS bench-upstreams on TCP and configurable-http-proxy $CHP_VERSION"
mkdir -p "$work/tcp"
for ((i = 0; i < SESSIONS; i++)); do
    "$upstream_bin" --tcp 127.0.0.1:0 >"$work/tcp/$i.out" 2>"$work/tcp/$i.err" &
    upstream_pids+=($!)
done
upstreams_ready() { [[ "$(cat "$work"/tcp/*.out 2>/dev/null | grep -c '^ready')" -eq "$SESSIONS" ]]; }
wait_until 30 upstreams_ready || die "the bench-upstreams did not start within 30 s"
chp_port=$(free_port)
chp_api_port=$(free_port)
chp_secret=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
CONFIGPROXY_AUTH_TOKEN=$chp_secret node "$chp_bin" --ip 127.0.0.1 --port "$chp_port" \
    --api-ip 127.0.0.1 --api-port "$chp_api_port" --log-level warn >"$work/chp.out" 2>"$work/chp.err" &
chp_pid=$!
chp_api() { curl -sf -H "Authorization: token $chp_secret" "$@"; }
chp_up() { chp_api -o /dev/null "http://127.0.0.1:$chp_api_port/api/routes"; }
wait_until 30 chp_up || die "CHP did not answer on its API within 30 s"
for ((i = 0; i < SESSIONS; i++)); do
    read -r user session <<<"${names[$i]}"
    addr=$(sed -n 's|^listening on http://||p' "$work/tcp/$i.out")
    chp_api -o /dev/null -X POST -d "{\"target\": \"http://$addr\"}" \
        "http://127.0.0.1:$chp_api_port/api/routes/user/$user/$session" || die "could not add CHP's route $i"
done
[[ "$(curl -sf "http://127.0.0.1:$chp_port/user/bench01/s01/bench")" == "hello, bench" ]] || die "CHP does not proxy"

# --- atrium -----------------------------------------------------------------------------
say "starting $bin serve"
mkdir -p "$work/atrium" "$work/home"
cat >"$work/atrium/atrium.toml" <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/atrium/data"
[log]
filter = "warn"
[auth.rate_limit]
per_user = 1000000
per_address = 1000000
[jobs]
spool_dir = "$work/atrium/spool"
[accounts]
home_root = "$work/home"
[cluster]
cpus = 1024
memory_mb = 8388608
[[cluster.partitions]]
name = "cpu"
default = true
[sessions]
max_per_user = $per_user

[[environments]]
name = "upstream"
description = "bench upstream"
runtime = "none"
command = ["$upstream_bin", "--unix", "{socket}"]
TOML
env -u ATRIUM_CONFIG "$bin" --config "$work/atrium/atrium.toml" serve >"$work/atrium/out" 2>"$work/atrium/err" &
atrium_pid=$!
listening() { grep -q "listening on" "$work/atrium/out" 2>/dev/null || ! kill -0 "$atrium_pid" 2>/dev/null; }
wait_until 30 listening || die "the portal did not start"
base=$(sed -n 's/^atrium: listening on //p' "$work/atrium/out")
[[ -n "$base" ]] || die "the portal did not start"

say "$USERS users, a token each"
: >"$work/tokens"
for ((u = 1; u <= USERS; u++)); do
    user=$(printf 'bench%02d' "$u")
    password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
    printf '%s\n' "$password" | env -u ATRIUM_CONFIG "$bin" --config "$work/atrium/atrium.toml" \
        user add "$user" --uid $((UID_BASE + u)) --gid $((UID_BASE + u)) --home "$work/home/$user" >/dev/null ||
        die "atrium user add $user failed"
    jar="$work/atrium/jar-$user"
    csrf=$(curl -sf -c "$jar" -H 'content-type: application/json' \
        -d "{\"username\":\"$user\",\"password\":\"$password\"}" "$base/api/v1/login" |
        sed -n 's/.*"csrf_token": *"\([^"]*\)".*/\1/p') || die "login as $user failed"
    answer=$(curl -s -b "$jar" -H "x-csrf-token: $csrf" -H 'content-type: application/json' \
        -d '{"name":"bench","scopes":["read","sessions"]}' "$base/api/v1/tokens")
    token=$(sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p' <<<"$answer")
    [[ "$token" == atr_* ]] || die "no token for $user: $answer"
    echo "$user $token" >>"$work/tokens"
done
rss_idle=$(rss_kb "$atrium_pid")

# The session API client: create (back to back, then until all are ready), hold the
# progress streams, stop.
cat >"$work/client.py" <<'PY'
import http.client, json, os, signal, sys, threading, time, urllib.parse

work = os.environ["WORK"]
url = urllib.parse.urlparse(os.environ["ATRIUM_URL"])
tokens = dict(line.split() for line in open(os.path.join(work, "tokens")))


def connection():
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    conn.connect()
    return conn


def call(conn, token, method, path, body=None):
    headers = {"Authorization": "Bearer " + token}
    if body is not None:
        headers["Content-Type"] = "application/json"
        body = json.dumps(body)
    conn.request(method, path, body, headers)
    response = conn.getresponse()
    data = response.read()
    return response.status, (json.loads(data) if data else None)


def create(names):
    conn, sessions = connection(), []
    t0 = time.monotonic()
    for user, name in names:
        status, session = call(conn, tokens[user], "POST", "/api/v1/sessions",
                               {"name": name, "kind": "notebook", "environment": "upstream", "gpus": 0})
        if status != 201:
            sys.exit(f"POST /api/v1/sessions ({user} {name}) answered {status}: {session}")
        sessions.append({"user": user, "name": name, "id": session["id"]})
    posted = time.monotonic()
    json.dump(sessions, open(os.path.join(work, "sessions.json"), "w"))
    pending = {s["id"]: s for s in sessions}
    deadline = time.monotonic() + 300
    while pending:
        for sid, s in list(pending.items()):
            status, body = call(conn, tokens[s["user"]], "GET", f"/api/v1/sessions/{sid}")
            if status != 200 or body.get("state") == "ended":
                sys.exit(f"session {s} is gone: {status} {body}")
            if body.get("ready"):
                del pending[sid]
        if time.monotonic() > deadline:
            sys.exit(f"{len(pending)} sessions not ready after 300 s")
        time.sleep(0.05)
    ready = time.monotonic()
    print(f"{(posted - t0) * 1000:.0f} {(ready - t0) * 1000:.0f}")


def hold():
    """Follow every session's progress stream until SIGTERM; the status file says how many
    are open and what they carried."""
    sessions = json.load(open(os.path.join(work, "sessions.json")))
    lock = threading.Lock()
    counts = {"open": 0, "closed": 0, "events": 0, "keepalives": 0}

    def follow(s):
        conn = connection()
        conn.request("GET", f"/api/v1/sessions/{s['id']}/progress",
                     headers={"Authorization": "Bearer " + tokens[s["user"]],
                              "Accept": "text/event-stream"})
        response = conn.getresponse()
        if response.status != 200:
            with lock:
                counts["closed"] += 1
            return
        with lock:
            counts["open"] += 1
        while True:
            line = response.readline()
            if not line:
                break
            with lock:
                if line.startswith(b"data:"):
                    counts["events"] += 1
                elif line.startswith(b":"):
                    counts["keepalives"] += 1
        with lock:
            counts["open"] -= 1
            counts["closed"] += 1

    def write_status(*_):
        with lock:
            text = " ".join(f"{k}={v}" for k, v in counts.items())
        with open(os.path.join(work, "streams.tmp"), "w") as f:
            f.write(text + "\n")
        os.replace(os.path.join(work, "streams.tmp"), os.path.join(work, "streams"))

    def stop(*_):
        write_status()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    for s in sessions:
        threading.Thread(target=follow, args=(s,), daemon=True).start()
    while True:
        write_status()
        time.sleep(0.2)


def stop():
    sessions = json.load(open(os.path.join(work, "sessions.json")))
    conn = connection()
    for s in sessions:
        call(conn, tokens[s["user"]], "DELETE", f"/api/v1/sessions/{s['id']}")
    deadline = time.monotonic() + 120
    for s in sessions:
        while time.monotonic() < deadline:
            status, body = call(conn, tokens[s["user"]], "GET", f"/api/v1/sessions/{s['id']}")
            if status == 404 or (body or {}).get("state") == "ended":
                break
            time.sleep(0.05)


command = sys.argv[1]
if command == "create":
    create([tuple(n.split()) for n in sys.argv[2:]])
elif command == "hold":
    hold()
elif command == "stop":
    stop()
PY
export WORK="$work" ATRIUM_URL="$base"
say "starting $SESSIONS sessions ($USERS users × $per_user)"
read -r posted_ms ready_ms < <(python3 "$work/client.py" create "${names[@]}") ||
    die "the sessions did not start"
echo "   $SESSIONS POSTs in $posted_ms ms; all ready $ready_ms ms after the first" >&2
rss_sessions=$(rss_kb "$atrium_pid")

say "holding the $SESSIONS progress streams open"
python3 "$work/client.py" hold &
holder_pid=$!
streams_open() { grep -q "^open=$SESSIONS " "$work/streams" 2>/dev/null; }
wait_until 30 streams_open || die "the progress streams did not all open: $(cat "$work/streams" 2>/dev/null)"

# --- wrk scripts: each request the next session's path (and, for atrium, its user's token)
lua_targets() { # with_tokens(true|false)
    echo "local targets = {"
    local i user session token
    for ((i = 0; i < SESSIONS; i++)); do
        read -r user session <<<"${names[$i]}"
        token=$(awk -v u="$user" '$1 == u {print $2}' "$work/tokens")
        if [[ $1 == true ]]; then
            echo "  {\"/user/$user/$session/bench\", \"Bearer $token\"},"
        else
            echo "  {\"/user/$user/$session/bench\", nil},"
        fi
    done
    echo "}"
    echo "local nthreads = $WRK_THREADS"
    cat <<'LUA'
local index = 0
setup = function(thread)
  index = index + 1
  thread:set("next_target", index - 1)
end
request = function()
  local t = targets[next_target % #targets + 1]
  next_target = next_target + nthreads
  local headers = {}
  if t[2] then headers["Authorization"] = t[2] end
  return wrk.format("GET", t[1], headers)
end
done = function(summary, latency, requests)
  io.write(string.format("result: rps=%.1f p50=%.3f p99=%.3f non2xx=%d errors=%d\n",
    summary.requests / summary.duration * 1e6, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
LUA
}
lua_targets true >"$work/atrium.lua"
lua_targets false >"$work/chp.lua"
declare -A base_url
base_url[atrium]=$base
base_url[chp]="http://127.0.0.1:$chp_port"
first_token=$(awk 'NR == 1 {print $2}' "$work/tokens")
[[ "$(curl -sf -H "Authorization: Bearer $first_token" "$base/user/bench01/s01/bench")" == "hello, bench" ]] ||
    die "the portal does not proxy /user/bench01/s01/bench"

wrk_run() { # TARGET SECONDS -> "rps p50 p99"
    local out line
    out=$(wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"$2s" -s "$work/$1.lua" "${base_url[$1]}")
    line=$(grep '^result:' <<<"$out") || die "$1: wrk printed no result: $out"
    if ! grep -q 'non2xx=0 errors=0' <<<"$line"; then die "$1: $line"; fi
    awk '{for (i = 2; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]} print v["rps"], v["p50"], v["p99"]}' <<<"$line"
}
say "warming up"
wrk_run chp 2 >/dev/null
wrk_run atrium 2 >/dev/null
declare -A samples
for ((r = 1; r <= ROUNDS; r++)); do
    for t in chp atrium; do
        read -r rps p50 p99 < <(wrk_run "$t" "$WRK_SECONDS")
        echo "   round $r/$ROUNDS $t: $rps requests/s, p50 $p50 ms, p99 $p99 ms" >&2
        samples[rps.$t]+="$rps"$'\n'
        samples[p50.$t]+="$p50"$'\n'
        samples[p99.$t]+="$p99"$'\n'
    done
done
fig() { printf '%s' "${samples[$1.$2]}" | median; }

rss_loaded=$(rss_kb "$atrium_pid")
chp_rss=$(rss_kb "$chp_pid")
sup_n=0 sup_rss=0 sup_pss=0
for p in /proc/[0-9]*; do
    [[ "${p#/proc/}" != "$atrium_pid" ]] || continue
    [[ "$(readlink "$p/exe" 2>/dev/null)" == "$bin" ]] || continue
    grep -qF "$work" "$p/cmdline" 2>/dev/null || continue
    sup_n=$((sup_n + 1))
    sup_rss=$((sup_rss + $(rss_kb "${p#/proc/}")))
    sup_pss=$((sup_pss + $(pss_kb "${p#/proc/}")))
done
streams=$(cat "$work/streams")
kill "$holder_pid" 2>/dev/null
wait "$holder_pid" 2>/dev/null || true
holder_pid=""
load_end=$(loadavg)

echo
echo "date: $(date -Iseconds)"
echo "uname: $(uname -a)"
echo "nproc: $(nproc); memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); $(. /etc/os-release; echo "$PRETTY_NAME")"
echo "load average (1/5/15 min): start $load_start; end $load_end"
echo "versions: configurable-http-proxy $CHP_VERSION on node $(node --version), wrk $(wrk -v 2>&1 | awk 'NR == 1 {print $2}'), atrium $("$bin" --version | awk '{print $2}')"
echo "sizes: SESSIONS=$SESSIONS USERS=$USERS CONNECTIONS=$CONNECTIONS WRK_THREADS=$WRK_THREADS WRK_SECONDS=$WRK_SECONDS ROUNDS=$ROUNDS"
echo
echo "| $SESSIONS sessions, wrk -t$WRK_THREADS -c$CONNECTIONS, round-robin over their URLs (median of $ROUNDS) | CHP $CHP_VERSION | atrium | atrium/CHP |"
echo "|---|---|---|---|"
echo "| requests/s | $(fig rps chp) | $(fig rps atrium) | $(ratio "$(fig rps atrium)" "$(fig rps chp)") |"
echo "| p50 (ms) | $(fig p50 chp) | $(fig p50 atrium) | $(ratio "$(fig p50 atrium)" "$(fig p50 chp)") |"
echo "| p99 (ms) | $(fig p99 chp) | $(fig p99 atrium) | $(ratio "$(fig p99 atrium)" "$(fig p99 chp)") |"
echo "| proxy RSS with $SESSIONS routes, after the load (MiB) | $(mib "$chp_rss") | $(mib "$rss_loaded") | $(ratio "$rss_loaded" "$chp_rss") |"
echo
echo "portal RSS: idle after $USERS logins $(mib "$rss_idle") MiB; with $SESSIONS sessions $(mib "$rss_sessions") MiB; after the load, streams open, $(mib "$rss_loaded") MiB"
echo "step supervisors: $sup_n, RSS $(mib "$sup_rss") MiB, PSS $(mib "$sup_pss") MiB (the sessions' servers are counted nowhere)"
echo "starting $SESSIONS sessions: POSTs $posted_ms ms, all ready $ready_ms ms"
echo "progress streams at the end: $streams (of $SESSIONS)"
