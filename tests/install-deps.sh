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
