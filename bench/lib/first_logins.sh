# shellcheck shell=bash
# first_logins URL CONNECTIONS USERS KIND [EXTRA_CURL_OPTION…]: every one of the generated
# directory users (user0001 …) logs in once, CONNECTIONS at a time (curl --parallel), and
# prints "logins/s=… p50=…ms p95=…ms p99=…ms ok=… other=…". KIND is `json` (atrium's
# POST /api/v1/login, success: 200) or `form` (JupyterHub's POST /hub/login with
# FORM_SUFFIX appended to the body, success: 302 to /hub/…); EXTRA_CURL_OPTION lines
# (e.g. `header = "Cookie: …"`) go into every transfer. Sourced by bench/ldap_login.sh
# and bench/reference/jupyterhub_ldap.sh.
first_logins() {
    local url=$1 connections=$2 users=$3 kind=$4
    shift 4
    local config out n name start end
    config=$(mktemp)
    out=$(mktemp)
    for ((n = 1; n <= users; n++)); do
        printf -v name 'user%04d' "$n"
        echo "url = \"$url\""
        if [[ $kind == json ]]; then
            echo 'header = "Content-Type: application/json"'
            echo "data = \"{\\\"username\\\":\\\"$name\\\",\\\"password\\\":\\\"$name-secret\\\"}\""
        else
            echo 'header = "Content-Type: application/x-www-form-urlencoded"'
            echo "data = \"username=$name&password=$name-secret$FORM_SUFFIX\""
        fi
        local option
        for option in "$@"; do echo "$option"; done
        echo 'output = "/dev/null"'
        echo 'write-out = "%{http_code} %{time_total} %{redirect_url}\n"'
        ((n == users)) || echo 'next'
    done >"$config"
    start=$(date +%s.%N)
    curl -s --no-progress-meter --parallel --parallel-immediate --parallel-max "$connections" -K "$config" >"$out" || true
    end=$(date +%s.%N)
    local counts
    counts=$(awk -v kind="$kind" '
        {if ((kind == "json") ? ($1 == 200) : ($1 == 302 && $3 ~ /\/hub\//)) ok++; else {other++; status[$1]++}}
        END {printf "ok=%d other=%d", ok, other; for (s in status) printf " (%d: %s)", status[s], s}' "$out")
    awk '{print $2 * 1000}' "$out" | sort -g | awk -v start="$start" -v end="$end" -v counts="$counts" '
        {t[NR] = $1}
        END {
            printf "logins/s=%.1f wall=%.2fs p50=%.2fms p95=%.2fms p99=%.2fms %s\n",
                NR / (end - start), end - start, t[int(NR * 0.50) + 1], t[int(NR * 0.95) + 1],
                t[int(NR * 0.99) + 1], counts
        }'
    rm -f "$config" "$out"
}
