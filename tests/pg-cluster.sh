#!/usr/bin/env bash
# One throwaway PostgreSQL cluster shared by every test process of a run.
#
# Without it, each test process (nextest runs one per test) starts a private cluster
# (~0.5-1.5 s each). With it:
#
#     eval "$(tests/pg-cluster.sh start /tmp/atrium-pg)"    # exports ATRIUM_TEST_PG_URL
#     cargo nextest run -p atrium-tests
#     tests/pg-cluster.sh stop /tmp/atrium-pg               # stops it and removes DIR
#
# start DIR: DIR must not exist (or be empty). initdb (as the `postgres` OS user when run as
#            root), trust auth, no TCP (unix socket in DIR), fsync off. Prints the export line
#            on stdout; everything else goes to stderr / DIR/postgres.log.
# stop DIR:  immediate shutdown, then rm -rf DIR. Safe to call twice.
#
# Unlike the per-process private cluster, this one is NOT stopped automatically: always pair
# start with stop (e.g. `trap 'tests/pg-cluster.sh stop "$dir"' EXIT`).
set -euo pipefail

usage() {
    echo "usage: $0 start|stop DIR" >&2
    exit 2
}
[[ $# -eq 2 ]] || usage
cmd=$1
dir=$2
[[ "$dir" == /* ]] || dir="$PWD/$dir"

pg_bin="${ATRIUM_TEST_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)}"
if [[ -z "$pg_bin" || ! -x "$pg_bin/pg_ctl" ]]; then
    echo "pg-cluster: PostgreSQL binaries not found; run tests/install-deps.sh" >&2
    exit 1
fi

as_owner() {
    if [[ "$(id -u)" -eq 0 ]]; then
        setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
    else
        "$@"
    fi
}

case "$cmd" in
start)
    if [[ -e "$dir" && -n "$(ls -A "$dir")" ]]; then
        echo "pg-cluster: $dir exists and is not empty" >&2
        exit 1
    fi
    mkdir -p "$dir"
    if [[ "$(id -u)" -eq 0 ]]; then
        chown postgres:postgres "$dir"
    fi
    if (( ${#dir} > 90 )); then
        echo "pg-cluster: $dir is too long for a unix socket path" >&2
        exit 1
    fi
    cd "$dir"
    as_owner "$pg_bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 \
        --no-sync --no-instructions >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    as_owner "$pg_bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
        -o "-c listen_addresses= -c unix_socket_directories=$dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=500" \
        start >&2 || { tail -n 30 "$dir/postgres.log" >&2; exit 1; }
    echo "export ATRIUM_TEST_PG_URL='postgres://postgres@localhost/postgres?host=$dir'"
    ;;
stop)
    if [[ -f "$dir/data/postmaster.pid" ]]; then
        cd /
        as_owner "$pg_bin/pg_ctl" -D "$dir/data" -m immediate -w stop >&2 || true
    fi
    rm -rf -- "$dir"
    ;;
*)
    usage
    ;;
esac
