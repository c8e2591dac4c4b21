#!/usr/bin/env bash
# Benchmark: LDAP logins (POST /api/v1/login, direct bind, memberOf groups) against the
# test directory (tests/fixtures/ldap, OpenLDAP slapd on loopback).
#
#   bench/ldap_login.sh [DURATION_SECONDS] [--many-only]
#
# Prints logins/s with 8 concurrent clients (p50/p95/p99) and the latency of a single
# client's logins, as alice. Then many users at once: MANY_CONNECTIONS (200) connections
# logging in as the directory's MANY_USERS (2,000) generated users (user0001 …, see
# tests/src/support/many_users.rs), round-robin (each request the next user), logins/s,
# p50/p95/p99, every answer checked (200): first each user once (their first login, which
# creates the account; curl --parallel, bench/lib/first_logins.sh), then for
# DURATION_SECONDS with every user known (wrk, Lua); the accounts
# created and the portal's RSS. Homes are not created (accounts.create_homes = false).
# --many-only runs that part alone. Each login is a full one: bind as the user, read their
# entry and groups, refresh (or, at a user's first login, create) the user row and its
# memberships, start a browser session (database insert).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/first_logins.sh
duration=10
many_only=false
for arg in "$@"; do
  case $arg in
    --many-only) many_only=true ;;
    *) duration=$arg ;;
  esac
done
MANY_CONNECTIONS=${MANY_CONNECTIONS:-200}
MANY_USERS=${MANY_USERS:-2000}
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
[accounts]
# As root the portal would make each user's home in /home at their first login (the
# directory says /home/<user>): not on this machine. JupyterHub makes none either.
create_homes = false
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

if ! $many_only; then
  echo "== 8 clients, ${duration}s"
  wrk -t2 -c8 -d"${duration}s" -s "$work/login.lua" "$base/api/v1/login" | grep -E "Requests/sec|p50|p95|p99|non2xx"
  echo "== 1 client, ${duration}s"
  wrk -t1 -c1 -d"${duration}s" -s "$work/login.lua" "$base/api/v1/login" | grep -E "Requests/sec|p50|p95|p99|non2xx"
fi

# Many users: each thread takes every second user (2 threads), so that the connections
# together go round the MANY_USERS users one after the other.
cat >"$work/many.lua" <<LUA
local users, nthreads = $MANY_USERS, 2
LUA
cat >>"$work/many.lua" <<'LUA'
local threads, index = {}, 0
setup = function(thread)
  index = index + 1
  thread:set("next_user", index - 1)
  table.insert(threads, thread)
end
init = function(args) ok = 0; other = 0 end
request = function()
  local name = string.format("user%04d", next_user % users + 1)
  next_user = next_user + nthreads
  return wrk.format("POST", "/api/v1/login", {["Content-Type"] = "application/json"},
    '{"username":"' .. name .. '","password":"' .. name .. '-secret"}')
end
response = function(status, headers, body)
  if status == 200 then ok = ok + 1 else other = other + 1 end
end
done = function(summary, latency, requests)
  local good, bad = 0, 0
  for _, t in ipairs(threads) do good = good + t:get("ok"); bad = bad + t:get("other") end
  io.write(string.format("non2xx=%d errors=%d\n", summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
  io.write(string.format("responses: 200=%d other=%d\n", good, bad))
  for _, p in pairs({50, 95, 99}) do
    io.write(string.format("p%d=%.2fms\n", p, latency:percentile(p) / 1000))
  end
end
LUA
rss() { awk '/^VmRSS/ {printf "%.1f MiB", $2 / 1024}' "/proc/$atrium/status"; }
accounts() { env -u ATRIUM_CONFIG "$atrium_bin" --config "$work/atrium.toml" user list | grep -c '^user[0-9]' || true; }
echo "portal RSS before: $(rss)"
echo "== first logins: each of the $MANY_USERS users once (accounts created), $MANY_CONNECTIONS clients (load average $(cut -d' ' -f1-3 /proc/loadavg))"
first_logins "$base/api/v1/login" "$MANY_CONNECTIONS" "$MANY_USERS" json
echo "accounts from the directory: $(accounts) (of $MANY_USERS users)"
echo "== returning users: $MANY_CONNECTIONS clients, $MANY_USERS users round-robin, ${duration}s (load average $(cut -d' ' -f1-3 /proc/loadavg))"
wrk -t2 -c"$MANY_CONNECTIONS" -d"${duration}s" --timeout 10s -s "$work/many.lua" "$base/api/v1/login" | grep -E "Requests/sec|p50|p95|p99|non2xx|responses"
echo "portal RSS after: $(rss)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "machine: $(nproc) cores, $(. /etc/os-release; echo "$PRETTY_NAME"), slapd $(dpkg-query -W -f='${Version}' slapd)"
