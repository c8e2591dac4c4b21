#!/usr/bin/env bash
# Benchmark: LDAP logins (POST /api/v1/login, direct bind, memberOf groups) against the
# test directory (tests/fixtures/ldap, OpenLDAP slapd on loopback).
#
#   bench/ldap_login.sh [DURATION_SECONDS]
#
# Prints logins/s with 8 concurrent clients (p50/p95/p99) and the latency of a single
# client's logins. Each login is a full one: bind as the user, read their entry and
# groups, refresh the user row, start a browser session (database insert).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10}
command -v wrk >/dev/null || { echo "wrk is missing: tests/install-deps.sh installs it" >&2; exit 1; }
# BENCH_ATRIUM_BIN=path runs that binary instead of building target/release/atrium
# (to compare two versions in the same minutes).
atrium_bin=${BENCH_ATRIUM_BIN:-target/release/atrium}
[[ -n "${BENCH_ATRIUM_BIN:-}" ]] || cargo build --release --locked -p atrium >/dev/null 2>&1
cargo build --locked -p atrium-tests --bin fixture-slapd >/dev/null 2>&1

work=$(mktemp -d)
cleanup() {
  exec 3>&- 2>/dev/null || true
  kill "$atrium" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkfifo "$work/hold"
target/debug/fixture-slapd <"$work/hold" >"$work/slapd" 2>"$work/slapd.err" &
exec 3>"$work/hold"
for _ in $(seq 1 300); do grep -q ldap:// "$work/slapd" 2>/dev/null && break; sleep 0.05; done
ldap_url=$(head -1 "$work/slapd")
[ -n "$ldap_url" ] || { cat "$work/slapd.err"; exit 1; }

cat >"$work/atrium.toml" <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/var"
[log]
filter = "warn"
[auth.rate_limit]
per_user = 1000000
per_address = 1000000
[auth.ldap]
url = "$ldap_url"
bind_dn_templates = ["uid={username},ou=people,dc=example,dc=org"]
allowed_groups = ["gpu-users"]
pool_size = 8
TOML
env -u ATRIUM_CONFIG "$atrium_bin" --config "$work/atrium.toml" serve >"$work/out" 2>"$work/err" &
atrium=$!
for _ in $(seq 1 200); do grep -q "listening on" "$work/out" 2>/dev/null && break; sleep 0.05; done
base=$(sed -n 's/^atrium: listening on //p' "$work/out")
[ -n "$base" ] || { cat "$work/err"; exit 1; }

cat >"$work/login.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"username":"alice","password":"alice-secret"}'
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests)
  io.write(string.format("non2xx=%d errors=%d\n", summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
  for _, p in pairs({50, 95, 99}) do
    io.write(string.format("p%d=%.2fms\n", p, latency:percentile(p) / 1000))
  end
end
LUA
curl -sf -X POST -H 'content-type: application/json' -d '{"username":"alice","password":"alice-secret"}' "$base/api/v1/login" >/dev/null

echo "== 8 clients, ${duration}s"
wrk -t2 -c8 -d"${duration}s" -s "$work/login.lua" "$base/api/v1/login" | grep -E "Requests/sec|p50|p95|p99|non2xx"
echo "== 1 client, ${duration}s"
wrk -t1 -c1 -d"${duration}s" -s "$work/login.lua" "$base/api/v1/login" | grep -E "Requests/sec|p50|p95|p99|non2xx"
echo "machine: $(nproc) cores, $(. /etc/os-release; echo "$PRETTY_NAME"), slapd $(dpkg-query -W -f='${Version}' slapd)"
