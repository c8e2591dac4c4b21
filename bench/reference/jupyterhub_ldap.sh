#!/usr/bin/env bash
# Reference benchmark: JupyterHub + jupyterhub-ldapauthenticator LDAP logins, against the
# same test directory (target/debug/fixture-slapd, OpenLDAP on loopback) and with the same
# wrk settings as bench/ldap_login.sh, so that the two can be compared in one run.
#
#   bench/reference/jupyterhub_ldap.sh [DURATION_SECONDS] [--many-only]
#
# As bench/ldap_login.sh: 8 clients and 1 client as alice, then MANY_CONNECTIONS (200)
# connections logging in as the MANY_USERS (2,000) generated directory users: each once
# (their first login, which creates the hub's user; curl --parallel), then round-robin for
# DURATION_SECONDS (wrk, Lua); --many-only: that part alone. The hub's RSS before and after.
#
# The virtual environment lives outside the repository, in
# ${XDG_CACHE_HOME:-$HOME/.cache}/atrium-bench/jupyterhub-venv (created on first use, reused
# after; delete it to reinstall). No configurable-http-proxy: the hub gets a proxy class
# that does nothing, and wrk talks to the hub's own port (hub_bind_url), the same hop as
# atrium's benchmark.
#
# Each request is a full JupyterHub form login: POST /hub/login with username, password and
# the _xsrf token (+ _xsrf cookie, same User-Agent as the GET that produced it, since
# JupyterHub ties anonymous xsrf tokens to ip + user agent). ldapauthenticator binds as
# uid=alice,ou=people,dc=example,dc=org, checks cn=gpu-users by a base search on the group,
# JupyterHub upserts the user row and sets the login cookie, and answers 302 to /hub/...
# A 302 whose Location starts with /hub/ counts as a successful login; anything else is
# reported as "other".
set -euo pipefail
cd "$(dirname "$0")/../.."
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
JUPYTERHUB_VERSION=6.1.1
LDAPAUTHENTICATOR_VERSION=2.0.2
command -v wrk >/dev/null || { echo "wrk is missing: tests/install-deps.sh installs it" >&2; exit 1; }
cargo build --locked -p atrium-tests --bin fixture-slapd >/dev/null 2>&1

venv=${XDG_CACHE_HOME:-$HOME/.cache}/atrium-bench/jupyterhub-venv
if ! "$venv/bin/python" -c "import jupyterhub, ldapauthenticator" 2>/dev/null \
  || [ "$("$venv/bin/python" -c 'import jupyterhub; print(jupyterhub.__version__)')" != "$JUPYTERHUB_VERSION" ]; then
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q "jupyterhub==$JUPYTERHUB_VERSION" \
    "jupyterhub-ldapauthenticator==$LDAPAUTHENTICATOR_VERSION" >&2
fi
versions=$("$venv/bin/python" - <<'PY'
from importlib.metadata import version
import sys
print("python %s, " % sys.version.split()[0] + ", ".join(
    "%s %s" % (p, version(p)) for p in
    ("jupyterhub", "jupyterhub-ldapauthenticator", "ldap3", "tornado", "SQLAlchemy")))
PY
)
echo "$versions"

work=$(mktemp -d)
hub=""
cleanup() {
  exec 3>&- 2>/dev/null || true
  [ -n "$hub" ] && kill "$hub" 2>/dev/null || true
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
ldap_port=${ldap_url##*:}

free_port() { "$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
hub_port=$(free_port)
public_port=$(free_port) # never listened on: the null proxy starts nothing
base="http://127.0.0.1:$hub_port"

mkdir -p "$work/var"
cat >"$work/jupyterhub_config.py" <<PY
from jupyterhub.proxy import Proxy

class NullProxy(Proxy):
    """No proxy: requests go straight to the hub's port."""
    should_start = False
    async def start(self): pass
    def stop(self): pass
    async def add_route(self, routespec, target, data): pass
    async def delete_route(self, routespec): pass
    async def get_all_routes(self): return {}

c = get_config()  # noqa
c.JupyterHub.proxy_class = NullProxy
c.JupyterHub.bind_url = "http://127.0.0.1:$public_port"
c.JupyterHub.hub_bind_url = "$base"
c.JupyterHub.db_url = "sqlite:///$work/var/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "$work/var/jupyterhub_cookie_secret"
c.JupyterHub.pid_file = "$work/var/jupyterhub.pid"
c.JupyterHub.log_level = "WARN"
c.JupyterHub.authenticator_class = "ldapauthenticator.LDAPAuthenticator"
c.LDAPAuthenticator.server_address = "127.0.0.1"
c.LDAPAuthenticator.server_port = $ldap_port
# use_ssl is a deprecated no-op in ldapauthenticator 2.x; the default tls_strategy
# "before_bind" would StartTLS, atrium's benchmark uses plain ldap://, so: insecure.
c.LDAPAuthenticator.tls_strategy = "insecure"
c.LDAPAuthenticator.lookup_dn = False
c.LDAPAuthenticator.bind_dn_template = ["uid={username},ou=people,dc=example,dc=org"]
c.LDAPAuthenticator.allowed_groups = ["cn=gpu-users,ou=groups,dc=example,dc=org"]
PY
(cd "$work/var" && exec "$venv/bin/jupyterhub" -f "$work/jupyterhub_config.py") >"$work/hub.out" 2>"$work/hub.err" &
hub=$!
deadline=$((SECONDS + 60))
until curl -sf -o /dev/null "$base/hub/health"; do
  kill -0 "$hub" 2>/dev/null || { echo "jupyterhub exited:" >&2; cat "$work/hub.err" >&2; exit 1; }
  [ "$SECONDS" -lt "$deadline" ] || { echo "jupyterhub did not answer within 60s:" >&2; cat "$work/hub.err" >&2; exit 1; }
  sleep 0.1
done

# one GET of the login form: _xsrf cookie + form value (tied to client ip + User-Agent)
ua="atrium-bench"
curl -sf -A "$ua" -D "$work/login.headers" -o "$work/login.html" "$base/hub/login"
xsrf_cookie=$(sed -n 's/^[Ss]et-[Cc]ookie: _xsrf=\([^;]*\).*/\1/p' "$work/login.headers" | head -1)
xsrf_form=$(sed -n 's/.*name="_xsrf" value="\([^"]*\)".*/\1/p' "$work/login.html" | head -1)
[ -n "$xsrf_cookie" ] && [ -n "$xsrf_form" ] || { echo "no _xsrf cookie/form value on /hub/login" >&2; exit 1; }
xsrf_enc=$("$venv/bin/python" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$xsrf_form")
body="username=alice&password=alice-secret&_xsrf=$xsrf_enc"

# sanity: a login succeeds (302 to /hub/...), a wrong password is refused (403)
login() { # body -> "status location"
  curl -s -o /dev/null -A "$ua" -H "Cookie: _xsrf=$xsrf_cookie" \
    -H 'Content-Type: application/x-www-form-urlencoded' --data "$1" \
    -w '%{http_code} %{redirect_url}' "$base/hub/login"
}
ok=$(login "$body")
bad=$(login "username=alice&password=wrong&_xsrf=$xsrf_enc")
nogroup=$(login "username=carol&password=carol-secret&_xsrf=$xsrf_enc") # not in gpu-users
echo "check: alice/alice-secret -> $ok; alice/wrong -> $bad; carol (no group) -> $nogroup"
case "$ok" in 302\ *"/hub/"*) ;; *) echo "login did not succeed" >&2; cat "$work/hub.err" >&2; exit 1 ;; esac
case "$bad" in 403*) ;; *) echo "wrong password was not refused" >&2; exit 1 ;; esac
case "$nogroup" in 403*) ;; *) echo "user outside allowed_groups was not refused" >&2; exit 1 ;; esac

cat >"$work/login.lua" <<LUA
wrk.method = "POST"
wrk.body = "$body"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Cookie"] = "_xsrf=$xsrf_cookie"
wrk.headers["User-Agent"] = "$ua"
LUA
cat >>"$work/login.lua" <<'LUA'
local threads = {}
setup = function(thread) table.insert(threads, thread) end
init = function(args) ok302 = 0; other = 0 end
response = function(status, headers, body)
  local location = headers["Location"] or headers["location"] or ""
  if status == 302 and string.sub(location, 1, 5) == "/hub/" then ok302 = ok302 + 1 else other = other + 1 end
end
done = function(summary, latency, requests)
  local ok, bad = 0, 0
  for _, t in ipairs(threads) do ok = ok + t:get("ok302"); bad = bad + t:get("other") end
  io.write(string.format("non2xx=%d errors=%d\n", summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
  io.write(string.format("responses: 302_to_hub=%d other=%d\n", ok, bad))
  for _, p in pairs({50, 95, 99}) do
    io.write(string.format("p%d=%.2fms\n", p, latency:percentile(p) / 1000))
  end
end
LUA

if ! $many_only; then
  echo "== 8 clients, ${duration}s"
  wrk -t2 -c8 -d"${duration}s" -s "$work/login.lua" "$base/hub/login" | grep -E "Requests/sec|p50|p95|p99|non2xx|responses"
  echo "== 1 client, ${duration}s"
  wrk -t1 -c1 -d"${duration}s" -s "$work/login.lua" "$base/hub/login" | grep -E "Requests/sec|p50|p95|p99|non2xx|responses"
fi

# Many users, round-robin as in bench/ldap_login.sh (2 threads, each every second user);
# the _xsrf token is tied to the client's address and User-Agent, not to a user, so one
# serves every login.
ok=$(login "username=user0001&password=user0001-secret&_xsrf=$xsrf_enc")
case "$ok" in 302\ *"/hub/"*) ;; *) echo "user0001 did not log in: $ok" >&2; exit 1 ;; esac
cat >"$work/many.lua" <<LUA
local users, nthreads = $MANY_USERS, 2
local xsrf = "$xsrf_enc"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Cookie"] = "_xsrf=$xsrf_cookie"
wrk.headers["User-Agent"] = "$ua"
LUA
cat >>"$work/many.lua" <<'LUA'
local threads, index = {}, 0
setup = function(thread)
  index = index + 1
  thread:set("next_user", index - 1)
  table.insert(threads, thread)
end
init = function(args) ok302 = 0; other = 0 end
request = function()
  local name = string.format("user%04d", next_user % users + 1)
  next_user = next_user + nthreads
  return wrk.format("POST", "/hub/login", nil,
    "username=" .. name .. "&password=" .. name .. "-secret&_xsrf=" .. xsrf)
end
response = function(status, headers, body)
  local location = headers["Location"] or headers["location"] or ""
  if status == 302 and string.sub(location, 1, 5) == "/hub/" then ok302 = ok302 + 1 else other = other + 1 end
end
done = function(summary, latency, requests)
  local ok, bad = 0, 0
  for _, t in ipairs(threads) do ok = ok + t:get("ok302"); bad = bad + t:get("other") end
  io.write(string.format("non2xx=%d errors=%d\n", summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
  io.write(string.format("responses: 302_to_hub=%d other=%d\n", ok, bad))
  for _, p in pairs({50, 95, 99}) do
    io.write(string.format("p%d=%.2fms\n", p, latency:percentile(p) / 1000))
  end
end
LUA
rss() { awk '/^VmRSS/ {printf "%.1f MiB", $2 / 1024}' "/proc/$hub/status"; }
accounts() { "$venv/bin/python" -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM users WHERE name LIKE ?", ("user%",)).fetchone()[0])' "$work/var/jupyterhub.sqlite"; }
echo "hub RSS before: $(rss)"
echo "== first logins: each of the $MANY_USERS users once (users created), $MANY_CONNECTIONS clients (load average $(cut -d' ' -f1-3 /proc/loadavg))"
FORM_SUFFIX="&_xsrf=$xsrf_enc" first_logins "$base/hub/login" "$MANY_CONNECTIONS" "$MANY_USERS" form \
  "header = \"Cookie: _xsrf=$xsrf_cookie\"" "user-agent = \"$ua\"" "max-time = 120"
echo "hub users created: $(accounts) (of $MANY_USERS users)"
echo "== returning users: $MANY_CONNECTIONS clients, $MANY_USERS users round-robin, ${duration}s (load average $(cut -d' ' -f1-3 /proc/loadavg))"
wrk -t2 -c"$MANY_CONNECTIONS" -d"${duration}s" --timeout 10s -s "$work/many.lua" "$base/hub/login" | grep -E "Requests/sec|p50|p95|p99|non2xx|responses"
echo "hub RSS after: $(rss)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "machine: $(nproc) cores, $(. /etc/os-release; echo "$PRETTY_NAME"), slapd $(dpkg-query -W -f='${Version}' slapd)"
echo "$versions"
if grep -qE "ERROR|Traceback" "$work/hub.err"; then echo "hub log has errors:"; grep -E "ERROR|Traceback" "$work/hub.err" | sort | uniq -c | head; fi
