# Helpers the benchmark scripts share; sourced after they `cd` to the repository root.
#
#   median                 the median of the numbers on standard input (one a line)
#   loadavg                the 1, 5 and 15 minute load averages
#   wait_until SECONDS CMD poll CMD every $POLL seconds (0.05 unless the script sets it)
#                          until it succeeds; fail after SECONDS
#   cpu_ticks PID...       user + system clock ticks (1/100 s) of these processes, summed
#                          (those gone count nothing)
#   portal_serve DIR SECONDS ATRIUM... start `ATRIUM... serve` (the binary and its
#                          --config) in the background, output in DIR/out and DIR/err;
#                          sets atrium_pid, then portal_base to the URL it listens on;
#                          fails (the end of its log on stderr) if it does not in time
#   portal_login, portal_token, portal_bearer: below

median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
wait_until() {
    local limit=$1 end
    shift
    end=$((SECONDS + limit))
    until "$@"; do
        ((SECONDS < end)) || return 1
        sleep "${POLL:-0.05}"
    done
}
cpu_ticks() {
    local pid sum=0 t
    for pid in "$@"; do
        # After the command name (which may hold spaces): utime and stime are the 12th
        # and 13th fields.
        t=$(awk '{s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[12] + f[13]}' "/proc/$pid/stat" 2>/dev/null) || continue
        sum=$((sum + ${t:-0}))
    done
    echo "$sum"
}

# portal_login BASE USER PASSWORD JAR: log in to the portal at BASE, keeping the cookie
# in JAR; prints the CSRF token.
portal_login() {
    curl -sf -c "$4" -H 'content-type: application/json' \
        -d "{\"username\":\"$2\",\"password\":\"$3\"}" "$1/api/v1/login" |
        sed -n 's/.*"csrf_token": *"\([^"]*\)".*/\1/p'
}

# portal_token BASE JAR CSRF: a personal token with scopes read and jobs, for the user
# logged in with JAR; prints its secret.
portal_token() {
    curl -sf -b "$2" -H "x-csrf-token: $3" -H 'content-type: application/json' \
        -d '{"name":"bench","scopes":["read","jobs"]}' "$1/api/v1/tokens" |
        sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p'
}

portal_serve() {
    local dir=$1 limit=$2
    shift 2
    env -u ATRIUM_CONFIG "$@" serve >"$dir/out" 2>>"$dir/err" &
    atrium_pid=$!
    _portal_out=$dir/out
    wait_until "$limit" _portal_listening || true
    portal_base=$(sed -n 's/^atrium: listening on //p' "$dir/out")
    [[ -n "$portal_base" ]] || { tail -n 20 "$dir/err" >&2; return 1; }
}
_portal_listening() { grep -q "listening on" "$_portal_out" 2>/dev/null || ! kill -0 "$atrium_pid" 2>/dev/null; }

# portal_bearer BASE USER PASSWORD JAR: log in (the cookie in JAR) and print the secret
# of a new personal token (portal_token's scopes); fails unless both work.
portal_bearer() {
    local csrf token
    csrf=$(portal_login "$@") && [[ -n "$csrf" ]] || return 1
    token=$(portal_token "$1" "$4" "$csrf") || return 1
    [[ "$token" == atr_* ]] || return 1
    echo "$token"
}
