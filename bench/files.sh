#!/usr/bin/env bash
# Benchmark: the Files app's upload and download throughput through the portal, against
# `cp` of the same file on the same disk, in one run.
#
#   upload:   the file sent as the page sends it: PUT /api/v1/files/upload?path=&offset=
#             pieces of CHUNK_MB (one curl process, one connection, `-T piece URL` per
#             piece, the pieces split off beforehand as a browser slices a File), then
#             POST /api/v1/files/upload/complete. Each piece is opened as the user by
#             `atrium files` (a process through the privilege boundary), streamed to
#             disk by the portal and synced before it is acknowledged.
#   download: GET /api/v1/files/download?path= with curl into a file.
#   cp:       `cp SRC DST` of the same file in the same directory tree.
#   floor:    the same download with curl from bench/py/sendfile_server.py, a server
#             that only has the kernel send the file: what the client and the disk
#             cost without the portal (python3; skipped without it).
#
# MODE=disk (the default) times what a user waits for when the disk is involved: before
# each of the three the page cache is dropped (sync; echo 3 > /proc/sys/vm/drop_caches),
# so the source is read from the disk, and each ends when its copy is on the disk: `cp`
# and the download are followed by `sync FILE` (an fsync of the copy), the upload by the
# portal's answer (it has synced every piece and the folder). MODE=cached times the
# transfer alone: nothing is dropped or synced by the script, the source is read from
# the page cache, and the copies of `cp` and the download are left in it for the kernel
# to write later (the upload still waits for its syncs: the portal acknowledges only
# what is on disk). The result is checked byte for byte (cmp) after each run, outside
# the timing.
#
# Median of RUNS runs each, in MiB/s, and the ratios to cp.
#
#   bench/files.sh
#
# Sizes (environment): SIZE_MB=1024, CHUNK_MB=64, RUNS=5; MODE=disk or cached.
#
# Runs as root (the portal acts as a user made for the run, uid 20950; dropping the page
# cache needs root too). Builds target/release/atrium unless BENCH_ATRIUM_BIN=path names
# a binary. Everything listens on 127.0.0.1 and lives in a temporary directory below
# BENCH_DIR (default /var/tmp, a disk, not tmpfs), removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/common.sh
repo=$(pwd)

case "${1:-}" in
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) echo "files.sh: unknown argument: $1 (try --help)" >&2; exit 2 ;;
esac

SIZE_MB=${SIZE_MB:-1024}
CHUNK_MB=${CHUNK_MB:-64}
RUNS=${RUNS:-5}
MODE=${MODE:-disk}
BENCH_UID=20950

die() { echo "files.sh: $*" >&2; exit 1; }
[[ "$(id -u)" -eq 0 ]] || die "must run as root (the portal switches to the run's user)"
command -v curl >/dev/null || die "curl is missing"
case "$MODE" in
    disk | cached) ;;
    *) die "MODE must be disk or cached, not $MODE" ;;
esac

work=$(mktemp -d -p "${BENCH_DIR:-/var/tmp}" atrium-files-bench-XXXXXX)
chmod 0711 "$work"
atrium_pid="" floor_pid=""
cleanup() {
    local pid
    for pid in $atrium_pid $floor_pid; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

if [[ -n "${BENCH_ATRIUM_BIN:-}" ]]; then
    bin=$(realpath "$BENCH_ATRIUM_BIN")
else
    echo "== building target/release/atrium" >&2
    cargo build --release --locked -p atrium >/dev/null 2>&1 || die "cargo build --release -p atrium failed"
    bin="$repo/target/release/atrium"
fi

mkdir -p "$work/atrium" "$work/home" "$work/src" "$work/pieces"
home="$work/home/bench"
mkdir -m 0700 "$home" && chown "$BENCH_UID:$BENCH_UID" "$home"
cat >"$work/atrium/atrium.toml" <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/atrium/data"
[log]
filter = "warn"
[accounts]
home_root = "$work/home"
[storage]
max_upload_chunk_mb = $CHUNK_MB
TOML
conf=(--config "$work/atrium/atrium.toml")
env -u ATRIUM_CONFIG "$bin" "${conf[@]}" user add bench --uid "$BENCH_UID" --gid "$BENCH_UID" --home "$home" \
    <<<"bench-password-of-some-length" >/dev/null || die "user add failed"
portal_serve "$work/atrium" 30 "$bin" "${conf[@]}" || die "atrium did not start"
base=$portal_base

token=$(portal_bearer "$base" bench bench-password-of-some-length "$work/atrium/jar") \
    || die "could not log in and create a token"
auth="Authorization: Bearer $token"

echo "== $SIZE_MB MiB of random data, pieces of $CHUNK_MB MiB, $RUNS runs, MODE=$MODE; load $(loadavg)" >&2
src="$work/src/data.bin"
head -c "$((SIZE_MB << 20))" /dev/urandom >"$src"
chmod 0644 "$src"
split -b "$((CHUNK_MB << 20))" -d -a 4 "$src" "$work/pieces/p."
size=$(stat -c %s "$src")
floor_port=""
if command -v python3 >/dev/null; then
    cp "$src" "$work/src/floor.bin"
    python3 bench/py/sendfile_server.py "$work/src/floor.bin" >"$work/floor.port" &
    floor_pid=$!
    has_port() { [[ -s "$work/floor.port" ]]; }
    wait_until 10 has_port || die "the sendfile server did not start"
    floor_port=$(cat "$work/floor.port")
else
    echo "== no python3: the floor is not measured" >&2
fi
# The curl arguments of an upload to $1: one `-T piece URL` per piece, in order.
upload_args() {
    local piece offset=0
    for piece in "$work"/pieces/p.*; do
        printf '%s\n' -T "$piece" "$base/api/v1/files/upload?path=$1&offset=$offset"
        offset=$((offset + $(stat -c %s "$piece")))
    done
}
now() { date +%s.%N; }
# Before a timed copy: in MODE=disk, nothing of the run in the page cache.
cold() {
    [[ "$MODE" == disk ]] || return 0
    sync
    echo 3 >/proc/sys/vm/drop_caches
}
# After a timed copy to $1: in MODE=disk, wait until it is on the disk.
durable() {
    [[ "$MODE" == disk ]] || return 0
    sync "$1"
}
rate() { awk -v mb="$SIZE_MB" -v s="$1" 'BEGIN { printf "%.1f", mb / s }'; }

cp_s=() up_s=() down_s=() floor_s=()
for run in $(seq "$RUNS"); do
    cold
    t0=$(now); cp "$src" "$work/src/copy.bin"; durable "$work/src/copy.bin"; t1=$(now)
    cp_s+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')")
    cmp -s "$src" "$work/src/copy.bin" || die "cp made a different file"
    rm -f "$work/src/copy.bin"

    target="$home/up-$run.bin"
    mapfile -t args < <(upload_args "$target")
    cold
    t0=$(now)
    curl -sf -H "$auth" -H 'content-type: application/octet-stream' -H 'Expect:' "${args[@]}" >/dev/null \
        || die "upload failed"
    curl -sf -H "$auth" -H 'content-type: application/json' \
        -d "{\"path\":\"$target\",\"size\":$size}" "$base/api/v1/files/upload/complete" -o /dev/null \
        || die "completing the upload failed"
    t1=$(now)
    up_s+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')")
    cmp -s "$src" "$target" || die "the upload made a different file"
    [[ "$(stat -c %u "$target")" == "$BENCH_UID" ]] || die "the upload is not the user's"

    cold
    t0=$(now)
    curl -sf -H "$auth" -o "$work/src/down.bin" "$base/api/v1/files/download?path=$target" \
        || die "download failed"
    durable "$work/src/down.bin"
    t1=$(now)
    down_s+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')")
    cmp -s "$src" "$work/src/down.bin" || die "the download differs"
    rm -f "$work/src/down.bin" "$target"

    floor="-"
    if [[ -n "$floor_port" ]]; then
        cold
        t0=$(now)
        curl -sf -o "$work/src/down.bin" "http://127.0.0.1:$floor_port/" || die "download from the sendfile server failed"
        durable "$work/src/down.bin"
        t1=$(now)
        floor_s+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')")
        cmp -s "$src" "$work/src/down.bin" || die "the sendfile server's download differs"
        rm -f "$work/src/down.bin"
        floor=$(rate "${floor_s[-1]}")
    fi
    echo "   run $run: cp $(rate "${cp_s[-1]}") MiB/s, upload $(rate "${up_s[-1]}") MiB/s, download $(rate "${down_s[-1]}") MiB/s, floor $floor MiB/s" >&2
done

cp_med=$(printf '%s\n' "${cp_s[@]}" | median)
up_med=$(printf '%s\n' "${up_s[@]}" | median)
down_med=$(printf '%s\n' "${down_s[@]}" | median)
echo "== load after: $(loadavg)" >&2
printf '%-10s %10s %10s %8s\n' what seconds MiB/s "of cp"
printf '%-10s %10.3f %10s %8s\n' cp "$cp_med" "$(rate "$cp_med")" "100%"
printf '%-10s %10.3f %10s %7.0f%%\n' upload "$up_med" "$(rate "$up_med")" "$(awk -v a="$cp_med" -v b="$up_med" 'BEGIN { print 100 * a / b }')"
printf '%-10s %10.3f %10s %7.0f%%\n' download "$down_med" "$(rate "$down_med")" "$(awk -v a="$cp_med" -v b="$down_med" 'BEGIN { print 100 * a / b }')"
if ((${#floor_s[@]})); then
    floor_med=$(printf '%s\n' "${floor_s[@]}" | median)
    printf '%-10s %10.3f %10s %7.0f%%   (the download is %.0f%% of it)\n' floor "$floor_med" "$(rate "$floor_med")" \
        "$(awk -v a="$cp_med" -v b="$floor_med" 'BEGIN { print 100 * a / b }')" \
        "$(awk -v a="$floor_med" -v b="$down_med" 'BEGIN { print 100 * a / b }')"
fi
