#!/usr/bin/env bash
# Benchmark: the sessions' reverse proxy next to configurable-http-proxy (CHP 5.3.0,
# JupyterHub's proxy) on the same upstream in the same run, session start -> ready, and
# the portal's memory with sessions running.
#
#   bench/sessions.sh [--proxy-only] [--without-atrium]
#
#   --proxy-only      the proxy figures alone: no session starts, no memory with sessions
#   --without-atrium  the upstream directly and through CHP only (atrium is not built)
#
# 1. HTTP through the proxy: wrk (WRK_THREADS threads, CONNECTIONS connections, WRK_SECONDS
#    s) on GET /user/bench/s/bench against tests/src/bin/bench-upstream (13-byte answers, one
#    thread): directly over TCP, through CHP (route /user/bench/s -> the upstream's TCP
#    port: CHP cannot reach unix sockets) and through atrium (a session whose command is
#    bench-upstream on the session's unix socket, authenticated by an API token with the
#    `sessions` scope). Requests/s, p50 and p99; the added latency is proxied minus direct,
#    also measured unloaded (wrk -t1 -c1, LATENCY_SECONDS s).
# 2. Websockets through the proxy: tests/src/bin/bench-ws, WS_CONNECTIONS connections each
#    sending a 32-byte message and awaiting its echo, WRK_SECONDS s: messages/s (round
#    trips), p50 and p99; same three paths, and a fourth, the floor: tests/src/bin/
#    bench-relay, which only copies bytes between a TCP connection and the upstream's
#    unix socket (no HTTP, no authentication), the most any proxy on these cores can do.
#    Both are run ROUNDS times, the three paths one after the other in each round; the
#    figures are the medians over the rounds.
# 3. Session start -> ready (POST /api/v1/sessions until the progress stream says ready),
#    median of STARTS: with the bench upstream as the session's command, and with a real
#    JupyterLab (the venv at /opt/atrium-test/jupyter, in bubblewrap). The portal's own
#    share is the first minus the upstream's own start (exec -> first HTTP answer on its
#    socket, measured alone, median of STARTS).
# 4. The portal's RSS (VmRSS) idle, after the proxy load, with 10 upstream sessions and
#    with JUPYTER_SESSIONS (10; 0: skip) JupyterLab sessions; beside it the step
#    supervisors' (one per session) RSS and PSS. The 10 sessions are created back to
#    back; a POST answered 5xx is retried and reported (NOTE). A failure in 3 or 4 is
#    reported (FAILED) after the figures, and the script exits with 1.
#
# Sizes (environment): WRK_THREADS=2 CONNECTIONS=8 WS_CONNECTIONS=8 WRK_SECONDS=10 LATENCY_SECONDS=5
# ROUNDS=3 STARTS=5 JUPYTER_SESSIONS=10 QUIET_WAIT=60 (seconds to wait for a calm machine).
# BENCH_ATRIUM_BIN, BENCH_UPSTREAM_BIN, BENCH_WS_BIN, BENCH_RELAY_BIN name binaries to use
# instead of building them (cargo build --release). KEEP_WORK=1 keeps the temporary directory.
#
# atrium runs as root (it starts each session as the user, uid 20050). Without root, or
# while the session API has not landed in this build, the atrium figures are left out
# and the script says so; the direct and CHP figures are still measured and printed.
# CHP comes from npm into target/bench-node (npm install, once). Everything listens on
# 127.0.0.1 and lives in a temporary directory removed at exit. Figures are only
# meaningful on a quiet machine: the load average is printed at the start and the end.
# On a machine with few cores, wrk, the proxy and the upstream share them: the ratio
# atrium/CHP is the figure to compare across machines.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/common.sh
repo=$(pwd)

proxy_only=false
without_atrium=false
for arg in "$@"; do
    case $arg in
        --proxy-only) proxy_only=true ;;
        --without-atrium) without_atrium=true ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "sessions.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

WRK_THREADS=${WRK_THREADS:-2}
CONNECTIONS=${CONNECTIONS:-8}
WS_CONNECTIONS=${WS_CONNECTIONS:-8}
WRK_SECONDS=${WRK_SECONDS:-10}
LATENCY_SECONDS=${LATENCY_SECONDS:-5}
ROUNDS=${ROUNDS:-3}
STARTS=${STARTS:-5}
JUPYTER_SESSIONS=${JUPYTER_SESSIONS:-10}
QUIET_WAIT=${QUIET_WAIT:-60}
CHP_VERSION=5.3.0
JUPYTER_VENV=/opt/atrium-test/jupyter
BENCH_UID=20050
POLL=0.05
# The JupyterHub figures quoted by issue 6 for this machine (not rerun here).
JH_SPAWN_MS=3600
JH_ADDED_MS=0.57
JH_RSS_MB=215

die() {
    echo "sessions.sh: $*" >&2
    if [[ -n "${atrium_pid:-}" && -s "${work:-}/atrium/err" ]]; then
        echo "sessions.sh: the portal's last log lines:" >&2
        tail -n 15 "$work/atrium/err" >&2
    fi
    exit 1
}
say() { echo "== $*" >&2; }
for tool in wrk curl node python3; do
    command -v "$tool" >/dev/null || die "$tool is missing: tests/install-deps.sh installs it"
done

# --- helpers ----------------------------------------------------------------------------
# ratio A B: A/B with 3 significant digits, or "-" when either is missing.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || a == "-" || b == "-" || b == 0) print "-"; else printf "%.3g\n", a / b}'; }
# minus A B: A-B in ms (3 decimals), or "-".
minus() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || a == "-" || b == "-") print "-"; else printf "%.3f\n", a - b}'; }
# free_port: a port free on 127.0.0.1 right now.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
pss_kb() { awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
mib() { awk -v k="$1" 'BEGIN {if (k == "" || k == "-") print "-"; else printf "%.1f\n", k / 1024}'; }
# to_ms VALUE: wrk's 238.00us / 3.44ms / 1.20s in ms.
to_ms() { awk -v v="$1" 'BEGIN {n = v + 0; u = v; sub(/^[0-9.]+/, "", u); if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000; printf "%.3f\n", n}'; }

# --- binaries ---------------------------------------------------------------------------
if [[ -n "${BENCH_UPSTREAM_BIN:-}" && -n "${BENCH_WS_BIN:-}" && -n "${BENCH_RELAY_BIN:-}" ]]; then
    upstream_bin=$(realpath "$BENCH_UPSTREAM_BIN")
    ws_bin=$(realpath "$BENCH_WS_BIN")
    relay_bin=$(realpath "$BENCH_RELAY_BIN")
else
    say "building target/release/bench-upstream, bench-ws and bench-relay"
    cargo build --release --locked -p atrium-tests --bin bench-upstream --bin bench-ws --bin bench-relay >/dev/null 2>&1 ||
        die "cargo build --release -p atrium-tests --bin bench-upstream --bin bench-ws --bin bench-relay failed (the tests crate builds the atrium library too); set BENCH_UPSTREAM_BIN, BENCH_WS_BIN and BENCH_RELAY_BIN to built ones"
    upstream_bin="$repo/target/release/bench-upstream"
    ws_bin="$repo/target/release/bench-ws"
    relay_bin="$repo/target/release/bench-relay"
fi

# Why atrium is left out, if it is; empty: measured.
atrium_off=""
if $without_atrium; then
    atrium_off="--without-atrium"
elif [[ "$(id -u)" -ne 0 ]]; then
    atrium_off="not running as root (the portal starts sessions as their user)"
elif ! grep -q '"/sessions"' server/src/http/api/mod.rs; then
    atrium_off="the session API (/api/v1/sessions) has not landed in this build"
elif [[ -n "${BENCH_ATRIUM_BIN:-}" ]]; then
    bin=$(realpath "$BENCH_ATRIUM_BIN")
else
    say "building target/release/atrium"
    if cargo build --release --locked -p atrium >/dev/null 2>&1; then
        bin="$repo/target/release/atrium"
    else
        atrium_off="cargo build --release -p atrium failed"
    fi
fi
node_dir="$repo/target/bench-node"
chp_pkg="$node_dir/node_modules/configurable-http-proxy/package.json"
if [[ ! -f "$chp_pkg" ]] || ! grep -q "\"version\": \"$CHP_VERSION\"" "$chp_pkg"; then
    say "installing configurable-http-proxy@$CHP_VERSION into target/bench-node (npm)"
    command -v npm >/dev/null || die "npm is missing: tests/install-deps.sh installs it"
    mkdir -p "$node_dir"
    npm install --prefix "$node_dir" --no-audit --no-fund --loglevel=error "configurable-http-proxy@$CHP_VERSION" >&2 ||
        die "npm install configurable-http-proxy@$CHP_VERSION failed"
fi
chp_bin="$node_dir/node_modules/configurable-http-proxy/bin/configurable-http-proxy"

# --- work directory and cleanup ---------------------------------------------------------
work=$(mktemp -d -t atrium-sessions-bench-XXXXXX)
chmod 0711 "$work" # the sessions run as uid $BENCH_UID and have their home below
upstream_pid=""
relay_pid=""
chp_pid=""
atrium_pid=""
base=""
token=""
cleanup() {
    set +e
    # Sessions outlive the portal by design: stop them through it first.
    if [[ -n "$atrium_pid" && -n "$token" && -f "$work/sessions.py" ]]; then
        python3 "$work/sessions.py" stop-all >/dev/null 2>&1
    fi
    for pid in $atrium_pid $chp_pid $relay_pid $upstream_pid; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    # Whatever this run's portal started and is still there (its command line names $work).
    local p
    for p in /proc/[0-9]*; do
        if grep -qF "$work" "$p/cmdline" 2>/dev/null; then
            kill "${p#/proc/}" 2>/dev/null
        fi
    done
    if [[ "${KEEP_WORK:-}" == 1 ]]; then
        echo "sessions.sh: kept $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

# Wait (up to QUIET_WAIT s) for the machine to calm down: figures under load mean little.
quiet() { awk -v l="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {exit !(l <= 0.5)}'; }
for ((i = 0; i < QUIET_WAIT; i++)); do quiet && break; sleep 1; done
load_start=$(loadavg)
if ! quiet; then
    echo "sessions.sh: WARNING: load average $load_start at the start: something else is running, these figures are not final" >&2
fi

# --- the upstream, directly -------------------------------------------------------------
say "starting bench-upstream on TCP and on a unix socket"
"$upstream_bin" --tcp 127.0.0.1:0 --unix "$work/upstream.sock" >"$work/upstream.out" 2>"$work/upstream.err" &
upstream_pid=$!
upstream_ready() { grep -q '^ready' "$work/upstream.out" 2>/dev/null || ! kill -0 "$upstream_pid" 2>/dev/null; }
wait_until 10 upstream_ready || die "bench-upstream did not start within 10 s"
upstream_addr=$(sed -n 's|^listening on http://||p' "$work/upstream.out")
[[ -n "$upstream_addr" ]] || die "bench-upstream did not start: $(cat "$work/upstream.err")"
path=/user/bench/s
direct_url="http://$upstream_addr$path/bench"
[[ "$(curl -sf "$direct_url")" == "hello, bench" ]] || die "the upstream does not answer on $direct_url"
[[ "$(curl -sf --unix-socket "$work/upstream.sock" "http://upstream$path/bench")" == "hello, bench" ]] ||
    die "the upstream does not answer on its unix socket"

# --- the floor: bytes copied to the upstream's socket, nothing else ------------------------
say "starting bench-relay (TCP -> the upstream's unix socket)"
"$relay_bin" --listen 127.0.0.1:0 --to "$work/upstream.sock" >"$work/relay.out" 2>"$work/relay.err" &
relay_pid=$!
relay_ready() { grep -q '^listening on' "$work/relay.out" 2>/dev/null || ! kill -0 "$relay_pid" 2>/dev/null; }
wait_until 10 relay_ready || die "bench-relay did not start within 10 s"
relay_addr=$(sed -n 's|^listening on ||p' "$work/relay.out")
[[ -n "$relay_addr" ]] || die "bench-relay did not start: $(cat "$work/relay.err")"
[[ "$(curl -sf "http://$relay_addr$path/bench")" == "hello, bench" ]] || die "bench-relay does not relay"

# --- CHP --------------------------------------------------------------------------------
say "starting configurable-http-proxy $CHP_VERSION (route $path -> http://$upstream_addr)"
chp_port=$(free_port)
chp_api_port=$(free_port)
chp_secret=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
CONFIGPROXY_AUTH_TOKEN=$chp_secret node "$chp_bin" --ip 127.0.0.1 --port "$chp_port" \
    --api-ip 127.0.0.1 --api-port "$chp_api_port" --log-level warn \
    >"$work/chp.out" 2>"$work/chp.err" &
chp_pid=$!
chp_api() { curl -sf -H "Authorization: token $chp_secret" "$@"; }
chp_up() { chp_api -o /dev/null "http://127.0.0.1:$chp_api_port/api/routes" || ! kill -0 "$chp_pid" 2>/dev/null; }
wait_until 30 chp_up || die "CHP did not answer on its API within 30 s"
kill -0 "$chp_pid" 2>/dev/null || die "CHP did not start: $(tail -n 20 "$work/chp.err")"
chp_api -o /dev/null -X POST -d "{\"target\": \"http://$upstream_addr\"}" \
    "http://127.0.0.1:$chp_api_port/api/routes$path" || die "could not add CHP's route"
chp_url="http://127.0.0.1:$chp_port$path/bench"
[[ "$(curl -sf "$chp_url")" == "hello, bench" ]] || die "CHP does not proxy $chp_url"

# --- atrium -----------------------------------------------------------------------------
# The session API client: start (POST, then the progress stream until ready), stop,
# wait for sessions, and the upstream's own start, timed from Python over kept-alive
# connections so that no process start is counted.
cat >"$work/sessions.py" <<'PY'
import http.client, json, os, re, socket, statistics, subprocess, sys, time, urllib.parse

READY = re.compile(r'"ready"\s*:\s*true|\bready:\s*true')


def connection():
    url = urllib.parse.urlparse(os.environ["ATRIUM_URL"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    conn.connect()
    return conn


def call(conn, method, path, body=None):
    headers = {"Authorization": "Bearer " + os.environ["ATRIUM_TOKEN"]}
    if body is not None:
        headers["Content-Type"] = "application/json"
        body = json.dumps(body)
    conn.request(method, path, body, headers)
    response = conn.getresponse()
    data = response.read()
    try:
        return response.status, json.loads(data) if data else None
    except ValueError:
        return response.status, data.decode(errors="replace")


def start(environment, name):
    """POST a session and read its progress until ready; one JSON line."""
    post, progress = connection(), connection()
    t0 = time.monotonic()
    status, session = call(post, "POST", "/api/v1/sessions",
                           {"name": name, "kind": "notebook", "environment": environment, "gpus": 0})
    if status != 201:
        sys.exit(f"POST /api/v1/sessions answered {status}: {session}")
    posted = time.monotonic()
    sid = session["id"]
    progress.request("GET", f"/api/v1/sessions/{sid}/progress",
                     headers={"Authorization": "Bearer " + os.environ["ATRIUM_TOKEN"],
                              "Accept": "text/event-stream"})
    response = progress.getresponse()
    if response.status != 200:
        sys.exit(f"GET /api/v1/sessions/{sid}/progress answered {response.status}: {response.read()!r}")
    events, ready = [], None
    while True:
        line = response.readline()
        if not line:
            break
        now = time.monotonic()
        line = line.decode(errors="replace").rstrip("\r\n")
        if line:
            events.append([round((now - t0) * 1000, 1), line])
        if READY.search(line):
            ready = now
            break
    progress.close()
    _, final = call(post, "GET", f"/api/v1/sessions/{sid}")
    out = {"id": sid, "post_ms": round((posted - t0) * 1000, 2),
           "ms": round((ready - t0) * 1000, 2) if ready else None, "events": events, "session": final}
    print(json.dumps(out))
    if ready is None:
        sys.exit(f"session {sid}: the progress stream ended without ready")


def state(conn, sid):
    status, body = call(conn, "GET", f"/api/v1/sessions/{sid}")
    if status == 404:
        return "ended"
    if status != 200:
        sys.exit(f"GET /api/v1/sessions/{sid} answered {status}: {body}")
    return body["state"]


def wait_for(ids, want, timeout):
    conn = connection()
    deadline = time.monotonic() + timeout
    while True:
        states = {sid: state(conn, sid) for sid in ids}
        if all(s == want for s in states.values()):
            return
        if want == "ready" and "ended" in states.values():
            sys.exit(f"a session ended before it was ready: {states}")
        if time.monotonic() > deadline:
            sys.exit(f"sessions not {want} after {timeout} s: {states}")
        time.sleep(0.05)


def listed(conn):
    status, body = call(conn, "GET", "/api/v1/sessions")
    if status != 200:
        return []
    items = body if isinstance(body, list) else body.get("sessions", body.get("items", []))
    return [s["id"] for s in items if s.get("state") != "ended"]


def stop(ids):
    conn = connection()
    for sid in ids:
        status, body = call(conn, "DELETE", f"/api/v1/sessions/{sid}")
        if status not in (200, 202, 204, 404):
            sys.exit(f"DELETE /api/v1/sessions/{sid} answered {status}: {body}")
    wait_for(ids, "ended", 120)


def create(environment, names):
    """POST the sessions back to back; a 5xx is retried (up to 5 times each) and counted."""
    conn, retried = connection(), []
    for name in names:
        for attempt in range(6):
            status, session = call(conn, "POST", "/api/v1/sessions",
                                   {"name": name, "kind": "notebook", "environment": environment, "gpus": 0})
            if status < 500 or attempt == 5:
                break
            retried.append(f"{status} {session}")
            time.sleep(0.05)
        if status != 201:
            sys.exit(f"POST /api/v1/sessions ({name}) answered {status}: {session}")
        print(session["id"])
    if retried:
        print(f"retried {len(retried)}: {retried[0]}", file=sys.stderr)


def upstream_start(binary, directory, runs):
    """exec -> first HTTP answer on its unix socket, alone; one value (ms) per line."""
    for i in range(runs):
        path = os.path.join(directory, f"alone-{i}.sock")
        t0 = time.monotonic()
        child = subprocess.Popen([binary, "--unix", path], stdout=subprocess.PIPE)
        try:
            for line in child.stdout:
                if line.startswith(b"ready"):
                    break
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(path)
                s.sendall(b"GET / HTTP/1.1\r\nHost: upstream\r\n\r\n")
                answer = b""
                while b"\r\n\r\n" not in answer:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    answer += chunk
            t1 = time.monotonic()
            if not answer.startswith(b"HTTP/1.1 "):
                sys.exit(f"the upstream did not answer on {path}")
            print(f"{(t1 - t0) * 1000:.2f}")
        finally:
            child.terminate()
            child.wait()


command, args = sys.argv[1], sys.argv[2:]
if command == "start":
    start(args[0], args[1])
elif command == "create":
    create(args[0], args[1:])
elif command == "wait-ready":
    wait_for([int(a) for a in args[1:]], "ready", float(args[0]))
elif command == "stop":
    stop([int(a) for a in args])
elif command == "stop-all":
    stop(listed(connection()))
elif command == "upstream-start":
    upstream_start(args[0], args[1], int(args[2]))
else:
    sys.exit(f"unknown command {command}")
PY
sessions_py() { python3 "$work/sessions.py" "$@"; }

declare -A rss
# supervisors_kb: "COUNT RSS_KB PSS_KB" of this run's step supervisors (the atrium binary,
# other than the portal, with this run's directory on its command line).
supervisors_kb() {
    local p n=0 r=0 s=0
    for p in /proc/[0-9]*; do
        [[ "${p#/proc/}" != "$atrium_pid" ]] || continue
        [[ "$(readlink "$p/exe" 2>/dev/null)" == "$bin" ]] || continue
        grep -qF "$work" "$p/cmdline" 2>/dev/null || continue
        n=$((n + 1))
        r=$((r + $(rss_kb "${p#/proc/}")))
        s=$((s + $(pss_kb "${p#/proc/}")))
    done
    echo "$n $r $s"
}
# memory_with KEY: the portal's RSS and the supervisors' into rss[KEY*].
memory_with() {
    local sup
    rss[$1]=$(rss_kb "$atrium_pid")
    sup=$(supervisors_kb)
    rss[$1_sup_n]=${sup%% *}
    sup=${sup#* }
    rss[$1_sup_rss]=${sup%% *}
    rss[$1_sup_pss]=${sup#* }
}

atrium_url=""
if [[ -z "$atrium_off" ]]; then
    say "starting $bin serve (4 GPUs declared; environments upstream and jupyter)"
    mkdir -p "$work/atrium" "$work/home"
    cat >"$work/atrium/atrium.toml" <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/atrium/data"
[log]
filter = "warn"
[jobs]
spool_dir = "$work/atrium/spool"
[accounts]
home_root = "$work/home"
[cluster]
cpus = 64
memory_mb = 262144
[[cluster.gpus]]
index = 0
model = "A100-80GB"
memory_mb = 81920
[[cluster.gpus]]
index = 1
model = "A100-80GB"
memory_mb = 81920
[[cluster.gpus]]
index = 2
model = "A100-80GB"
memory_mb = 81920
[[cluster.gpus]]
index = 3
model = "A100-80GB"
memory_mb = 81920
[[cluster.partitions]]
name = "gpu"
default = true
[sessions]
max_per_user = 16

[[environments]]
name = "upstream"
description = "bench upstream"
runtime = "none"
command = ["$upstream_bin", "--unix", "{socket}"]

[[environments]]
name = "jupyter"
description = "JupyterLab from $JUPYTER_VENV"
runtime = "bubblewrap"
env = { PATH = "$JUPYTER_VENV/bin:/usr/local/bin:/usr/bin:/bin" }
TOML
    env -u ATRIUM_CONFIG "$bin" --config "$work/atrium/atrium.toml" serve >"$work/atrium/out" 2>"$work/atrium/err" &
    atrium_pid=$!
    listening() { grep -q "listening on" "$work/atrium/out" 2>/dev/null || ! kill -0 "$atrium_pid" 2>/dev/null; }
    wait_until 30 listening || true
    base=$(sed -n 's/^atrium: listening on //p' "$work/atrium/out")
    if [[ -z "$base" ]]; then
        tail -n 20 "$work/atrium/err" >&2
        atrium_off="the portal did not start with the sessions configuration (above)"
        kill "$atrium_pid" 2>/dev/null || true
        wait "$atrium_pid" 2>/dev/null || true
        atrium_pid=""
    fi
fi
if [[ -z "$atrium_off" ]]; then
    password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
    printf '%s\n' "$password" | env -u ATRIUM_CONFIG "$bin" --config "$work/atrium/atrium.toml" \
        user add bench --uid "$BENCH_UID" --gid "$BENCH_UID" --home "$work/home/bench" >/dev/null ||
        die "atrium user add bench failed"
    jar="$work/atrium/jar"
    csrf=$(curl -sf -c "$jar" -H 'content-type: application/json' \
        -d "{\"username\":\"bench\",\"password\":\"$password\"}" "$base/api/v1/login" |
        sed -n 's/.*"csrf_token": *"\([^"]*\)".*/\1/p') || die "login as bench failed"
    answer=$(curl -s -b "$jar" -H "x-csrf-token: $csrf" -H 'content-type: application/json' \
        -d '{"name":"bench","scopes":["read","sessions"]}' "$base/api/v1/tokens")
    token=$(sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p' <<<"$answer")
    if [[ "$token" != atr_* ]]; then
        atrium_off="no token with the sessions scope: POST /api/v1/tokens answered: $answer"
    fi
fi
if [[ -z "$atrium_off" ]]; then
    export ATRIUM_URL="$base" ATRIUM_TOKEN="$token"
    memory_with idle
    say "starting the session s (bench upstream)"
    if first=$(sessions_py start upstream s 2>"$work/start.err"); then
        session_id=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["id"])' "$first")
        atrium_url="$base$path/bench"
        answer=$(curl -s -H "Authorization: Bearer $token" "$atrium_url")
        [[ "$answer" == "hello, bench" ]] ||
            atrium_off="the session is ready but $atrium_url answered: $answer"
    else
        atrium_off="could not start a session: $(cat "$work/start.err")"
    fi
fi
if [[ -n "$atrium_off" ]]; then
    echo "sessions.sh: atrium sessions are unavailable: $atrium_off" >&2
    echo "sessions.sh: measuring the upstream directly and through CHP only" >&2
fi

# =======================================================================================
# 1 and 2. The proxies
# =======================================================================================
targets=(direct floor chp)
declare -A url ws_url
url[direct]=$direct_url
url[floor]="http://$relay_addr$path/bench"
url[chp]=$chp_url
ws_url[direct]="ws://$upstream_addr$path/ws"
ws_url[floor]="ws://$relay_addr$path/ws"
ws_url[chp]="ws://127.0.0.1:$chp_port$path/ws"
declare -A auth_args
auth_args[direct]=""
auth_args[floor]=""
auth_args[chp]=""
if [[ -n "$atrium_url" ]]; then
    targets+=(atrium)
    url[atrium]=$atrium_url
    ws_url[atrium]="ws://${base#http://}$path/ws"
    auth_args[atrium]="Authorization: Bearer $token"
fi

# wrk_run TARGET THREADS CONNECTIONS SECONDS: prints "rps p50_ms p99_ms".
wrk_run() {
    local target=$1 out non2xx errors
    local args=(-t"$2" -c"$3" -d"$4s" --latency)
    [[ -z "${auth_args[$target]}" ]] || args+=(-H "${auth_args[$target]}")
    out=$(wrk "${args[@]}" "${url[$target]}")
    non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
    errors=$(awk '/Socket errors/ {gsub(",", ""); print $4 + $6 + $8 + $10}' <<<"$out")
    if [[ -n "$non2xx" || "${errors:-0}" -gt 0 ]]; then
        echo "$out" >&2
        die "$target: wrk saw non-2xx answers ($non2xx) or socket errors (${errors:-0})"
    fi
    echo "$(awk '/Requests\/sec/ {print $2}' <<<"$out") $(to_ms "$(awk '$1 == "50%" {print $2}' <<<"$out")") $(to_ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")"
}
# ws_run TARGET: prints "msgs_per_s p50_ms p99_ms".
ws_run() {
    local target=$1 out
    local args=("${ws_url[$target]}" --connections "$WS_CONNECTIONS" --seconds "$WRK_SECONDS")
    [[ -z "${auth_args[$target]}" ]] || args+=(--header "${auth_args[$target]}")
    out=$("$ws_bin" "${args[@]}") || die "$target: bench-ws failed: $out"
    awk '/^ws:/ {for (i = 2; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]} print v["msgs_per_s"], v["p50_ms"], v["p99_ms"]}' <<<"$out"
}

say "warming up (${targets[*]})"
for t in "${targets[@]}"; do
    wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d2s ${auth_args[$t]:+-H "${auth_args[$t]}"} "${url[$t]}" >/dev/null
done

declare -A samples # samples[metric.target] = newline-separated values per round
add() { samples[$1.$2]+="$3"$'\n'; }
for ((r = 1; r <= ROUNDS; r++)); do
    for t in "${targets[@]}"; do
        say "round $r/$ROUNDS: $t: HTTP wrk -t$WRK_THREADS -c$CONNECTIONS -d${WRK_SECONDS}s"
        res=$(wrk_run "$t" "$WRK_THREADS" "$CONNECTIONS" "$WRK_SECONDS")
        read -r rps p50 p99 <<<"$res"
        echo "   $rps requests/s, p50 $p50 ms, p99 $p99 ms" >&2
        add rps "$t" "$rps"; add p50 "$t" "$p50"; add p99 "$t" "$p99"
        say "round $r/$ROUNDS: $t: HTTP, one connection (wrk -t1 -c1 -d${LATENCY_SECONDS}s)"
        res=$(wrk_run "$t" 1 1 "$LATENCY_SECONDS")
        read -r rps1 p50 p99 <<<"$res"
        echo "   $rps1 requests/s, p50 $p50 ms, p99 $p99 ms" >&2
        add p50_1 "$t" "$p50"; add p99_1 "$t" "$p99"
        say "round $r/$ROUNDS: $t: websockets, bench-ws -c $WS_CONNECTIONS, ${WRK_SECONDS}s"
        res=$(ws_run "$t")
        read -r mps p50 p99 <<<"$res"
        echo "   $mps messages/s, round trip p50 $p50 ms, p99 $p99 ms" >&2
        add wsrate "$t" "$mps"; add wsp50 "$t" "$p50"; add wsp99 "$t" "$p99"
    done
done
declare -A fig
for key in "${!samples[@]}"; do
    fig[$key]=$(printf '%s' "${samples[$key]}" | median)
done
chp_rss=$(rss_kb "$chp_pid")
upstream_rss=$(rss_kb "$upstream_pid")

# =======================================================================================
# 3 and 4. Session starts and memory
# =======================================================================================
# A failure here is written down and the report still printed (the proxy figures above
# took the longest); the script then exits with 1.
declare -A start
failures=()
notes=()
failed() {
    echo "sessions.sh: FAILED: $*" >&2
    failures+=("$*")
}
# json_field JSON FIELD
json_field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
# start_runs ENVIRONMENT PREFIX: STARTS sessions one after the other, each stopped before
# the next; prints each start -> ready (ms), the first one's progress events on stderr.
start_runs() {
    local environment=$1 prefix=$2 i out id
    for ((i = 1; i <= STARTS; i++)); do
        out=$(sessions_py start "$environment" "$prefix-$i") || {
            echo "$environment session $i did not start: $out" >&2
            return 1
        }
        id=$(json_field "$out" id)
        if ((i == 1)); then
            echo "   progress events of the first, ms after the POST:" >&2
            python3 -c 'import json, sys
for t, line in json.loads(sys.argv[1])["events"]: print(f"     {t:9.1f}  {line[:150]}")' "$out" >&2
        fi
        sessions_py stop "$id" || return 1
        json_field "$out" ms
    done
}
# with_sessions ENVIRONMENT COUNT TIMEOUT KEY: create COUNT sessions one after the
# other, wait for them all, measure the memory into rss[KEY*], stop them.
with_sessions() {
    local environment=$1 count=$2 timeout=$3 key=$4 ids i names=()
    for ((i = 1; i <= count; i++)); do names+=("$key-$i"); done
    ids=$(sessions_py create "$environment" "${names[@]}" 2>"$work/create.err") || {
        cat "$work/create.err" >&2
        return 1
    }
    if grep -q '^retried' "$work/create.err"; then
        notes+=("creating $count $environment sessions back to back: POST /api/v1/sessions failed and was retried, $(head -c 300 "$work/create.err")")
        echo "sessions.sh: NOTE: ${notes[-1]}" >&2
    fi
    # shellcheck disable=SC2086 # one argument per id
    sessions_py wait-ready "$timeout" $ids || return 1
    memory_with "$key"
    # shellcheck disable=SC2086
    sessions_py stop $ids || return 1
}
session_figures() {
    local runs
    memory_with loaded
    sessions_py stop "$session_id" || { failed "could not stop the session s"; return 1; }

    say "session start -> ready, bench upstream, $STARTS runs"
    if runs=$(start_runs upstream up); then
        start[upstream]=$(median <<<"$runs")
        echo "   ms: $(tr '\n' ' ' <<<"$runs")(median ${start[upstream]})" >&2
    else
        failed "session starts with the bench upstream"
        return 1
    fi
    say "the upstream's own start (exec -> first HTTP answer on its socket), $STARTS runs"
    mkdir -p "$work/alone"
    if runs=$(sessions_py upstream-start "$upstream_bin" "$work/alone" "$STARTS"); then
        start[alone]=$(median <<<"$runs")
        echo "   ms: $(tr '\n' ' ' <<<"$runs")(median ${start[alone]})" >&2
        start[share]=$(minus "${start[upstream]}" "${start[alone]}")
    else
        failed "the upstream's own start"
    fi
    if [[ -x "$JUPYTER_VENV/bin/jupyter-lab" ]]; then
        say "session start -> ready, JupyterLab ($JUPYTER_VENV, bubblewrap), $STARTS runs"
        if runs=$(start_runs jupyter lab); then
            start[jupyter]=$(median <<<"$runs")
            echo "   ms: $(tr '\n' ' ' <<<"$runs")(median ${start[jupyter]})" >&2
        else
            failed "session starts with JupyterLab"
        fi
    else
        echo "sessions.sh: no JupyterLab at $JUPYTER_VENV (tests/install-deps.sh installs it): skipped" >&2
    fi

    say "the portal's memory with 10 upstream sessions"
    with_sessions upstream 10 120 ten_upstream || { failed "10 upstream sessions"; return 1; }
    if [[ -n "${start[jupyter]:-}" && "$JUPYTER_SESSIONS" -gt 0 ]]; then
        say "the portal's memory with $JUPYTER_SESSIONS JupyterLab sessions"
        with_sessions jupyter "$JUPYTER_SESSIONS" 600 ten_jupyter ||
            failed "$JUPYTER_SESSIONS JupyterLab sessions"
    fi
}
if [[ -n "$atrium_url" ]] && ! $proxy_only; then
    session_figures || true
fi
load_end=$(loadavg)

# =======================================================================================
# Report
# =======================================================================================
atrium_version=$([[ -n "${bin:-}" ]] && "$bin" --version 2>/dev/null | awk '{print $2}' || true)
echo
echo "date: $(date -Iseconds)"
echo "uname: $(uname -a)"
echo "nproc: $(nproc); memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); $(. /etc/os-release; echo "$PRETTY_NAME")"
echo "load average (1/5/15 min): start $load_start; end $load_end"
echo "versions: configurable-http-proxy $CHP_VERSION on node $(node --version), wrk $(wrk -v 2>&1 | awk 'NR == 1 {print $2}'), atrium ${atrium_version:-not run}"
echo "sizes: WRK_THREADS=$WRK_THREADS CONNECTIONS=$CONNECTIONS WS_CONNECTIONS=$WS_CONNECTIONS WRK_SECONDS=$WRK_SECONDS LATENCY_SECONDS=$LATENCY_SECONDS ROUNDS=$ROUNDS STARTS=$STARTS JUPYTER_SESSIONS=$JUPYTER_SESSIONS"
echo "upstream: bench-upstream (1 thread), GET $path/bench -> 13 bytes; direct and CHP over TCP, atrium over the session's unix socket"
[[ -z "$atrium_off" ]] || echo "atrium: UNAVAILABLE: $atrium_off"
echo
f() { echo "${fig[$1.$2]:--}"; }
echo "| metric (median over $ROUNDS rounds) | direct | floor (bench-relay) | CHP $CHP_VERSION | atrium | atrium/CHP | floor/CHP |"
echo "|---|---|---|---|---|---|---|"
row3() { printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" "$5" "$(ratio "$5" "$4")" "$(ratio "$3" "$4")"; }
cols() { echo "$(f "$1" direct)" "$(f "$1" floor)" "$(f "$1" chp)" "$(f "$1" atrium)"; }
added() { echo "-" "$(minus "$(f "$1" floor)" "$(f "$1" direct)")" "$(minus "$(f "$1" chp)" "$(f "$1" direct)")" "$(minus "$(f "$1" atrium)" "$(f "$1" direct)")"; }
# shellcheck disable=SC2046 # one argument per column
{
row3 "HTTP requests/s, wrk -t$WRK_THREADS -c$CONNECTIONS" $(cols rps)
row3 "HTTP p50 (ms), wrk -t$WRK_THREADS -c$CONNECTIONS" $(cols p50)
row3 "HTTP p99 (ms), wrk -t$WRK_THREADS -c$CONNECTIONS" $(cols p99)
row3 "added p50 (ms), -c$CONNECTIONS: proxied − direct" $(added p50)
row3 "added p99 (ms), -c$CONNECTIONS: proxied − direct" $(added p99)
row3 "HTTP p50 (ms), one connection (wrk -t1 -c1)" $(cols p50_1)
row3 "HTTP p99 (ms), one connection" $(cols p99_1)
row3 "added p50 (ms), one connection: proxied − direct" $(added p50_1)
row3 "websocket messages/s (round trips), $WS_CONNECTIONS connections" $(cols wsrate)
row3 "websocket round trip p50 (ms)" $(cols wsp50)
row3 "websocket round trip p99 (ms)" $(cols wsp99)
}
echo
echo "atrium/CHP, floor/CHP: for rates higher is better; for times lower is better. The floor"
echo "copies bytes to the upstream's socket and does nothing else: no proxy on these cores does more."
echo "memory after the load: CHP (node) RSS $(mib "$chp_rss") MiB; bench-upstream RSS $(mib "$upstream_rss") MiB"
echo
sup() { [[ -n "${rss[$1]:-}" ]] && echo "$(mib "${rss[$1]}") (+ ${rss[$1_sup_n]} supervisors: RSS $(mib "${rss[$1_sup_rss]}"), PSS $(mib "${rss[$1_sup_pss]}"))" || echo "-"; }
echo "| metric | atrium | JupyterHub (issue 6, this machine; not rerun) |"
echo "|---|---|---|"
echo "| start → ready, bench upstream as the session's command, median of $STARTS (ms) | ${start[upstream]:--} | - |"
echo "| the upstream's own start, alone (exec → first HTTP answer), median of $STARTS (ms) | ${start[alone]:--} | - |"
echo "| the portal's share of start → ready (ms) | ${start[share]:--} | - |"
echo "| start → ready, JupyterLab in bubblewrap, median of $STARTS (ms) | ${start[jupyter]:--} | $JH_SPAWN_MS (spawn → ready, median) |"
echo "| added latency per proxied request, one connection, p50 (ms) | $(minus "$(f p50_1 atrium)" "$(f p50_1 direct)") | $JH_ADDED_MS (CHP here: $(minus "$(f p50_1 chp)" "$(f p50_1 direct)")) |"
echo "| portal RSS idle (MiB) | $(mib "${rss[idle]:-}") | - |"
echo "| portal RSS after the proxy load, 1 session (MiB) | $(sup loaded) | - |"
echo "| portal RSS with 10 upstream sessions (MiB) | $(sup ten_upstream) | $JH_RSS_MB MB (hub + proxy, 10 servers) |"
echo "| portal RSS with $JUPYTER_SESSIONS JupyterLab sessions (MiB) | $(sup ten_jupyter) | $JH_RSS_MB MB (hub + proxy, 10 servers) |"
echo
echo "The sessions' own servers are not counted in either (JupyterHub's figure is the hub and the proxy)."
for note in "${notes[@]}"; do echo "NOTE: $note"; done
if ((${#failures[@]})); then
    echo
    for failure in "${failures[@]}"; do echo "FAILED: $failure"; done
    [[ -z "${work:-}" || ! -s "$work/atrium/err" ]] || {
        echo "the portal's errors:"
        sed 's/\x1b\[[0-9;]*m//g' "$work/atrium/err" | grep -E 'ERROR' | tail -n 10
    }
    exit 1
fi
