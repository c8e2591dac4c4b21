#!/usr/bin/env bash
# Install the system packages the end-to-end tests (tests/) and benchmarks need.
#
# Usage: tests/install-deps.sh
#
# Idempotent and non-interactive: installs only what is missing and is a fast
# no-op (no apt-get at all) when everything is already present. Works as root;
# otherwise it uses sudo when available, or prints exactly what to install and
# exits 1.
#
# To add a dependency, append the Debian package name to PACKAGES below.
set -euo pipefail

# Debian packages required by the test suite. One per line; keep sorted by purpose.
PACKAGES=(
    ca-certificates     # TLS roots for curl/cargo
    curl                # health checks in scripts
    postgresql          # tests/src/support/pg.rs (initdb, postgres, psql)
    chromium            # tests/src/support/browser.rs (headless browser)
    chromium-driver     # chromedriver, WebDriver bridge for fantoccini
    wrk                 # HTTP load generator for bench/
    procps              # pkill/pgrep used by the process supervisor in support/process.rs
    slapd               # tests/src/support/ldap.rs (slapd, slapadd; modules back_mdb, memberof, refint)
    ldap-utils          # ldapsearch/ldapmodify/ldapwhoami used by support/ldap.rs and its self-test
    openssl             # throwaway CA and server certificate for the LDAP fixture's TLS mode
)

# Cargo tools required by the test runner: "binary-name crate-name".
CARGO_TOOLS=(
    "cargo-nextest cargo-nextest"
)

export DEBIAN_FRONTEND=noninteractive

is_installed() {
    # dpkg-query prints e.g. "install ok installed"; anything else means missing.
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! is_installed "$pkg"; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} > 0)); then
    if [[ "$(id -u)" -eq 0 ]]; then
        SUDO=()
    elif command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo --preserve-env=DEBIAN_FRONTEND)
    else
        echo "install-deps: missing packages: ${missing[*]}" >&2
        echo "install-deps: not root and sudo is unavailable; run as root:" >&2
        echo "    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
    echo "install-deps: installing ${missing[*]}"
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Debian's slapd package enables (and may start) a system slapd on port 389. The tests start
# their own private slapd on free ports and never use it: keep it stopped and disabled.
if is_installed slapd; then
    if [[ "$(id -u)" -eq 0 ]]; then
        SUDO=()
    else
        SUDO=(sudo -n)
    fi
    if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
        if systemctl is-enabled --quiet slapd 2>/dev/null || systemctl is-active --quiet slapd 2>/dev/null; then
            echo "install-deps: stopping and disabling the system slapd service (tests use their own)"
            "${SUDO[@]}" systemctl disable --now slapd >/dev/null 2>&1 || true
        fi
    elif [[ -e /etc/init.d/slapd ]] && command -v update-rc.d >/dev/null 2>&1 \
        && compgen -G "/etc/rc[2-5].d/S*slapd" >/dev/null; then
        echo "install-deps: disabling the system slapd service (tests use their own)"
        "${SUDO[@]}" update-rc.d slapd disable >/dev/null 2>&1 || true
    fi
    # A system slapd runs with the Debian config in /etc/ldap; the tests' ones use -F <tmpdir>.
    for pid in $(pgrep -x slapd || true); do
        [[ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null || echo Z)" != Z ]] || continue # exited
        if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'atrium-slapd-'; then
            echo "install-deps: stopping the system slapd (pid $pid)"
            "${SUDO[@]}" service slapd stop >/dev/null 2>&1 || "${SUDO[@]}" kill "$pid" 2>/dev/null || true
        fi
    done
fi

for tool in "${CARGO_TOOLS[@]}"; do
    read -r bin crate <<<"$tool"
    if ! command -v "$bin" >/dev/null 2>&1; then
        if ! command -v cargo >/dev/null 2>&1; then
            echo "install-deps: $bin is missing and cargo is not on PATH; install Rust, then: cargo install $crate --locked" >&2
            exit 1
        fi
        echo "install-deps: installing $crate"
        cargo install "$crate" --locked
    fi
done

# The PostgreSQL server binaries are not on PATH on Debian; report where they are.
pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
if [[ -z "$pg_bin" || ! -x "$pg_bin/initdb" ]]; then
    echo "install-deps: PostgreSQL server binaries (initdb) not found under /usr/lib/postgresql/*/bin" >&2
    exit 1
fi

echo "install-deps: all test dependencies present (postgres: $pg_bin)"
