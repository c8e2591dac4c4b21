#!/usr/bin/env bash
# Install the system packages the end-to-end tests (tests/) and benchmarks need.
#
# Usage: tests/install-deps.sh
#
# Idempotent and non-interactive: installs only what is missing and is a fast
# no-op (no apt-get, no pip) when everything is already present. Works as root;
# otherwise it uses sudo when available, or prints exactly what to install and
# exits 1.
#
# To add a dependency, append the Debian package name to PACKAGES below; Python
# packages of the session servers (JupyterLab, TensorBoard) go to JUPYTER_PINS, the programs
# that drive Slurm's commands to SLURM_TOOLS_PINS.
#
# Environment:
#   ATRIUM_TEST_JUPYTER  the Python virtual environment holding JupyterLab and
#                        TensorBoard for the session tests (default /opt/atrium-test/jupyter)
#   ATRIUM_TEST_SLURM_TOOLS  the Python environment holding submitit and snakemake (with its
#                        Slurm executor) for the Slurm tools' tests (default /opt/atrium-test/slurm-tools)
#   ATRIUM_TEST_CODE_SERVER  where code-server (VS Code in the browser, from npm) is
#                        installed for the apps tests (default /opt/atrium-test/code-server)
#   ATRIUM_TEST_AXE_PREFIX  where npm installs axe-core for the page tests
#                        (default /opt/atrium-test/axe)
set -euo pipefail

# Debian packages required by the test suite. One per line; keep sorted by purpose.
PACKAGES=(
    ca-certificates     # TLS roots for curl/cargo
    curl                # health checks in scripts
    postgresql          # tests/src/support/pg.rs (initdb, postgres, psql)
    chromium            # tests/src/support/browser.rs (headless browser)
    chromium-driver     # chromedriver, WebDriver bridge for fantoccini
    wrk                 # HTTP load generator for bench/
    sqlite3             # bench/accounting.sh fills a SQLite database with generated jobs
    jq                  # bench/accounting.sh reads the answers it times
    procps              # pkill/pgrep used by the process supervisor in support/process.rs
    slapd               # tests/src/support/ldap.rs (slapd, slapadd; modules back_mdb, memberof, refint)
    ldap-utils          # ldapsearch/ldapmodify/ldapwhoami used by support/ldap.rs and its self-test
    openssl             # throwaway CA and server certificate for the LDAP fixture's TLS mode
    slurm-wlm           # bench/slurm/setup.sh and tests/src/support/slurm (slurmctld, slurmd, sbatch, squeue): the Slurm reference
    munge               # munged and mungekey for that throwaway Slurm's authentication
    libnss-wrapper      # tests/src/support/slurm: the Slurm daemons and jobs resolve test users (and nodes) not in /etc
    iproute2            # tests/src/support/slurm/nodes.rs: the three-node cluster's bridge and veth pairs (ip)
    slurmdbd            # tests/src/support/slurm with accounting: sacct, AllocTRES with gres/gpu, sacctmgr limits
    mariadb-server      # the private MariaDB behind that slurmdbd (mariadbd, mariadb-install-db)
    bubblewrap          # the job container runtime the job tests run (server/src/launch)
    prometheus          # promtool: tests/tests/api/metrics.rs lints a live /metrics and checks deploy/prometheus's rules
    fio                 # server/src/benchmarks/parse: a parser test runs fio; the fio starter benchmark job
    python3             # job scripts in tests and starter scripts
    python3-venv        # the session tests' JupyterLab/TensorBoard environment (ATRIUM_TEST_JUPYTER)
    r-cran-irkernel     # the R kernel the notebook app offers (tests/tests/api/apps.rs); registered in ATRIUM_TEST_JUPYTER
    g++                 # code-server's native modules (npm builds them: node-pty, spdlog, kerberos, argon2)
    make                #   "
    pkg-config          #   "
    libkrb5-dev         #   kerberos' gssapi headers
    ripgrep             # code-server's search: its npm postinstall downloads rg from GitHub; Debian's is used instead
)

# The session tests' Python environment: JupyterLab, Jupyter Server, the Python kernel and
# TensorBoard, exactly these versions, from PyPI. Built on Debian's python3 so that the
# users the tests create can run it (an interpreter under /root, say, is out of their reach).
JUPYTER_VENV="${ATRIUM_TEST_JUPYTER:-/opt/atrium-test/jupyter}"
JUPYTER_PINS=(
    jupyterlab==4.6.6
    jupyter-server==2.21.1
    ipykernel==7.4.0
    tensorboard==2.21.0
    # With it importable, jsonschema (through Jupyter Server's event schemas) skips
    # building its own IRI grammar at import: Jupyter Server starts in half the time.
    rfc3987==1.3.8
)

# Programs that drive Slurm's commands, which tests/tests/api/slurm_tools.rs runs unchanged
# against atrium's: submitit and snakemake with its Slurm executor, exactly these versions.
SLURM_TOOLS_VENV="${ATRIUM_TEST_SLURM_TOOLS:-/opt/atrium-test/slurm-tools}"
SLURM_TOOLS_PINS=(
    submitit==1.5.4
    snakemake==9.27.1
    snakemake-executor-plugin-slurm==2.8.0
    snakemake-executor-plugin-slurm-jobstep==0.6.1
)

# Cargo tools required by the test runner: "binary-name crate-name" (crate@version pins one).
CARGO_TOOLS=(
    "cargo-nextest cargo-nextest"
    # The Debian package (server/Cargo.toml, tests/tests/api/package.rs): this version's
    # symlink assets. About 80 s to build on two cores.
    "cargo-deb cargo-deb@3.8.0"
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

# Debian's slapd, munge, slurm-wlm, slurmdbd and mariadb-server packages enable (and may
# start) system daemons: slapd on port 389, munged on /run/munge, slurmctld/slurmd on
# 6817/6818, slurmdbd on 6819, MariaDB on 3306. The tests and
# benchmarks start their own private ones (on free ports, with their own sockets and
# configuration) and never use these: keep them stopped and disabled.
#
# keep_system_service_off SERVICE PROCESS MARKER: disable SERVICE and stop any running
# PROCESS whose command line lacks MARKER (the private daemons' command lines carry it).
keep_system_service_off() {
    local service=$1 process=$2 marker=$3 pid
    local sudo=()
    [[ "$(id -u)" -eq 0 ]] || sudo=(sudo -n)
    if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
        if systemctl is-enabled --quiet "$service" 2>/dev/null || systemctl is-active --quiet "$service" 2>/dev/null; then
            echo "install-deps: stopping and disabling the system $service service (tests use their own)"
            "${sudo[@]}" systemctl disable --now "$service" >/dev/null 2>&1 || true
        fi
    elif [[ -e "/etc/init.d/$service" ]] && command -v update-rc.d >/dev/null 2>&1 \
        && compgen -G "/etc/rc[2-5].d/S*$service" >/dev/null; then
        echo "install-deps: disabling the system $service service (tests use their own)"
        "${sudo[@]}" update-rc.d "$service" disable >/dev/null 2>&1 || true
    fi
    for pid in $(pgrep -x "$process" || true); do
        [[ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null || echo Z)" != Z ]] || continue # exited
        if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$marker"; then
            echo "install-deps: stopping the system $process (pid $pid)"
            "${sudo[@]}" service "$service" stop >/dev/null 2>&1 || "${sudo[@]}" kill "$pid" 2>/dev/null || true
        fi
    done
}
# The test slapd runs with -F <tmpdir>/atrium-slapd-*; bench/slurm/setup.sh and the Slurm test
# fixture start slurmctld and slurmd with -f <dir>/etc/slurm.conf and munged with --socket=<dir>/...
if is_installed slapd; then keep_system_service_off slapd slapd 'atrium-slapd-'; fi
if is_installed slurmd; then keep_system_service_off slurmd slurmd 'etc/slurm.conf'; fi
if is_installed slurmctld; then keep_system_service_off slurmctld slurmctld 'etc/slurm.conf'; fi
if is_installed munge; then keep_system_service_off munge munged '--socket='; fi
# The fixture's slurmdbd runs as `slurmdbd -D -v` (the system unit: `-D -s`), its MariaDB with
# --datadir=<dir>/mysql/data under an atrium-slurm-* temp dir.
if is_installed slurmdbd; then keep_system_service_off slurmdbd slurmdbd '-D -v'; fi
# Only promtool is used; Debian's prometheus package enables a server on port 9090.
if is_installed prometheus; then keep_system_service_off prometheus prometheus 'atrium-prometheus-'; fi
if is_installed mariadb-server; then keep_system_service_off mariadb mariadbd 'atrium-slurm-'; fi

# ensure_venv VENV ENV_NAME BINARY... -- PIN...: create the Python environment VENV with exactly
# the PINs unless its stamp says it holds them, built on the same interpreter, and has every
# BINARY in bin/. The stamp is written only after pip succeeded, so an interrupted install is
# redone from scratch (`venv --clear`) on the next run. ENV_NAME is the variable that moves it.
ensure_venv() {
    local venv=$1 env_name=$2 python want dir sudo=() binaries=() pins=() ok=1
    shift 2
    while [[ $# -gt 0 && $1 != -- ]]; do binaries+=("$1"); shift; done
    shift
    pins=("$@")
    python="$(command -v /usr/bin/python3 || command -v python3 || true)"
    if [[ -z "$python" ]]; then
        echo "install-deps: python3 not found; cannot create $venv" >&2
        exit 1
    fi
    want="$("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])') ${pins[*]}"
    for b in python "${binaries[@]}"; do [[ -x "$venv/bin/$b" ]] || ok=0; done
    if [[ $ok == 1 && "$(cat "$venv/.atrium-stamp" 2>/dev/null || true)" == "$want" ]]; then
        return
    fi
    if [[ -e "$venv" && ! -e "$venv/pyvenv.cfg" ]] && [[ -n "$(ls -A "$venv" 2>/dev/null)" ]]; then
        echo "install-deps: $venv exists and is not a Python virtual environment; set $env_name elsewhere or remove it" >&2
        exit 1
    fi
    # sudo only where the nearest existing directory is not ours to write.
    dir=$venv
    while [[ ! -e "$dir" ]]; do dir="$(dirname "$dir")"; done
    if [[ ! -w "$dir" ]]; then
        if [[ "$(id -u)" -ne 0 ]] && command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            echo "install-deps: cannot write $dir; run as root or set $env_name to a writable path" >&2
            exit 1
        fi
    fi
    echo "install-deps: creating the Python environment $venv (${pins[*]})"
    # umask 022: the environment must be readable by every test user, whatever ours is.
    (
        umask 022
        "${sudo[@]}" mkdir -p "$venv"
        "${sudo[@]}" "$python" -m venv --clear "$venv"
        "${sudo[@]}" "$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
            "${pins[@]}"
        printf '%s\n' "$want" | "${sudo[@]}" tee "$venv/.atrium-stamp" >/dev/null
    )
}
ensure_venv "$JUPYTER_VENV" ATRIUM_TEST_JUPYTER jupyter-lab tensorboard -- "${JUPYTER_PINS[@]}"
ensure_venv "$SLURM_TOOLS_VENV" ATRIUM_TEST_SLURM_TOOLS snakemake -- "${SLURM_TOOLS_PINS[@]}"

# ensure_r_kernel: register Debian's IRkernel as the kernelspec `ir` in the Jupyter
# environment, so that JupyterLab there offers R beside Python.
ensure_r_kernel() {
    local spec="$JUPYTER_VENV/share/jupyter/kernels/ir/kernel.json"
    [[ -f "$spec" ]] && return
    echo "install-deps: registering the R kernel (IRkernel) in $JUPYTER_VENV"
    (
        umask 022
        PATH="$JUPYTER_VENV/bin:$PATH" R --quiet --no-save -e \
            "IRkernel::installspec(user = FALSE, prefix = '$JUPYTER_VENV', name = 'ir', displayname = 'R')" >/dev/null
    )
    [[ -f "$spec" ]] || { echo "install-deps: IRkernel::installspec did not write $spec" >&2; exit 1; }
}
ensure_r_kernel

# ensure_code_server: code-server $CODE_SERVER_VERSION (the last release for Node 20) from
# npm into $CODE_SERVER, for the VS Code app's tests. Not `npm install -g`: its
# postinstall runs a nested `npm install` that inherits the global flag and fails, so the
# package is unpacked and installed in place. Its ripgrep download (from GitHub) is served
# from npm's own cache path with Debian's rg.
CODE_SERVER="${ATRIUM_TEST_CODE_SERVER:-/opt/atrium-test/code-server}"
CODE_SERVER_VERSION=4.100.3
ensure_code_server() {
    local dir="$CODE_SERVER/lib/node_modules/code-server" tmp
    if [[ -x "$CODE_SERVER/bin/code-server" \
        && "$(cat "$CODE_SERVER/.atrium-stamp" 2>/dev/null || true)" == "$CODE_SERVER_VERSION" ]]; then
        return
    fi
    if ! command -v npm >/dev/null 2>&1 || [[ "$(node --version 2>/dev/null)" != v20.* ]]; then
        echo "install-deps: code-server $CODE_SERVER_VERSION needs Node 20 and npm; install them (Debian: nodejs from NodeSource) and run again" >&2
        exit 1
    fi
    echo "install-deps: installing code-server $CODE_SERVER_VERSION into $CODE_SERVER"
    tmp="$(mktemp -d)"
    (
        umask 022
        cd "$tmp"
        npm pack --silent "code-server@$CODE_SERVER_VERSION" >/dev/null
        rm -rf "$CODE_SERVER"
        mkdir -p "$dir" "$CODE_SERVER/bin"
        tar xzf "code-server-$CODE_SERVER_VERSION.tgz" --strip-components=1 -C "$dir"
        # @vscode/ripgrep uses a cached download when there is one.
        local rg_version cache
        rg_version="$(node -p "require('$dir/lib/vscode/npm-shrinkwrap.json').packages['node_modules/@vscode/ripgrep'].version")"
        cache="$(node -p 'require("os").tmpdir()')/vscode-ripgrep-cache-$rg_version"
        mkdir -p "$cache" rg && cp /usr/bin/rg rg/rg
        for v in v13.0.0-10 v13.0.0-4; do
            tar czf "$cache/ripgrep-$v-x86_64-unknown-linux-musl.tar.gz" -C rg rg
        done
        cd "$dir"
        npm_config_yes=true npm_config_unsafe_perm=true npm install --omit=dev --no-audit --no-fund >/dev/null
        ln -sf ../lib/node_modules/code-server/out/node/entry.js "$CODE_SERVER/bin/code-server"
        chmod -R a+rX "$CODE_SERVER"
        printf '%s\n' "$CODE_SERVER_VERSION" >"$CODE_SERVER/.atrium-stamp"
    )
    rm -rf "$tmp"
}
ensure_code_server

# axe-core (npm), which tests/tests/api/pages.rs injects into every page to check its
# accessibility: exactly this version, into a fixed prefix (ATRIUM_TEST_AXE_PREFIX).
AXE_PREFIX="${ATRIUM_TEST_AXE_PREFIX:-/opt/atrium-test/axe}"
AXE_VERSION=4.14.1
ensure_axe_core() {
    local stamp="$AXE_PREFIX/.atrium-stamp"
    if [[ -f "$AXE_PREFIX/node_modules/axe-core/axe.min.js" \
        && "$(cat "$stamp" 2>/dev/null || true)" == "$AXE_VERSION" ]]; then
        return
    fi
    if ! command -v npm >/dev/null 2>&1; then
        echo "install-deps: npm is missing (Debian: apt-get install npm); it installs axe-core for the page tests" >&2
        exit 1
    fi
    echo "install-deps: installing axe-core@$AXE_VERSION into $AXE_PREFIX"
    (
        umask 022
        mkdir -p "$AXE_PREFIX"
        npm install --prefix "$AXE_PREFIX" --no-audit --no-fund --silent "axe-core@$AXE_VERSION"
        printf '%s\n' "$AXE_VERSION" >"$stamp"
    )
}
ensure_axe_core

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

echo "install-deps: all test dependencies present (postgres: $pg_bin, jupyter: $JUPYTER_VENV, slurm tools: $SLURM_TOOLS_VENV, code-server: $CODE_SERVER)"
