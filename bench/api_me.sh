#!/usr/bin/env bash
# Benchmark: authenticated `GET /api/v1/me` (bearer token) with wrk, and the portal's RSS.
#
#   bench/api_me.sh [DURATION_SECONDS] [CONNECTIONS]
#
# Builds the release binary, starts it on a free loopback port with a throwaway data
# directory (SQLite), logs in as the printed admin, creates a read token, measures RSS
# at idle, runs wrk (2 threads, 8 connections by default) and prints the figures.
# Traffic goes to 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-15}
connections=${2:-8}

command -v wrk >/dev/null || { echo "wrk is missing: tests/install-deps.sh installs it" >&2; exit 1; }
cargo build --release --locked -p atrium >/dev/null 2>&1
bin=target/release/atrium

work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
cat >"$work/atrium.toml" <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/var"
[log]
filter = "warn"
TOML
env -u ATRIUM_CONFIG "$bin" --config "$work/atrium.toml" serve >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 1 200); do grep -q "listening on" "$work/out" 2>/dev/null && break; sleep 0.05; done
base=$(sed -n 's/^atrium: listening on //p' "$work/out")
password=$(sed -n 's/^ *password: //p' "$work/out")
[ -n "$base" ] || { cat "$work/err"; exit 1; }

jar="$work/jar"
csrf=$(curl -s -c "$jar" -b "$jar" "$base/login" | sed -n 's/.*name="csrf" value="\([^"]*\)".*/\1/p' | head -1)
curl -s -c "$jar" -b "$jar" -o /dev/null -X POST "$base/login" \
  --data-urlencode "username=admin" --data-urlencode "password=$password" --data-urlencode "csrf=$csrf"
session_csrf=$(curl -s -b "$jar" "$base/" | sed -n 's/.*name="csrf" value="\([^"]*\)".*/\1/p' | head -1)
token=$(curl -s -b "$jar" -H "x-csrf-token: $session_csrf" -H 'content-type: application/json' \
  -d '{"name":"bench","scopes":["read"]}' "$base/api/v1/tokens" | sed -n 's/.*"secret":"\([^"]*\)".*/\1/p')
[ -n "$token" ] || { echo "could not create a token" >&2; exit 1; }
curl -sf -H "Authorization: Bearer $token" "$base/api/v1/me" >/dev/null

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
idle_rss=$(rss_kb)

# Warm up, then measure.
wrk -t2 -c"$connections" -d2s -H "Authorization: Bearer $token" "$base/api/v1/me" >/dev/null
result=$(wrk -t2 -c"$connections" -d"${duration}s" --latency -H "Authorization: Bearer $token" "$base/api/v1/me")
loaded_rss=$(rss_kb)

echo "$result"
rps=$(echo "$result" | awk '/Requests\/sec/ {print $2}')
p50=$(echo "$result" | awk '$1=="50%" {print $2}')
p99=$(echo "$result" | awk '$1=="99%" {print $2}')
non2xx=$(echo "$result" | awk '/Non-2xx/ {print $NF}')
echo
echo "requests/s: $rps  p50: $p50  p99: $p99  non-2xx: ${non2xx:-0}"
echo "RSS idle: $((idle_rss / 1024)) MiB ($idle_rss kB)  after load: $((loaded_rss / 1024)) MiB ($loaded_rss kB)"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(. /etc/os-release; echo "$PRETTY_NAME")"
