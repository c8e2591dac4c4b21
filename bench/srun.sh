#!/usr/bin/env bash
# Benchmark: start-up of a 4-task step, `srun -n 4` inside a job of atrium's own
# scheduler against `torchrun --standalone --nproc_per_node=4` (mpirun-free, one node),
# both running the trivial `python3 -c pass`.
#
#   bench/srun.sh
#
# A throwaway portal (127.0.0.1, port 0, bubblewrap when installed, SQLite) runs one
# batch job of user `bench` (-n 4). Inside it, RUNS times after WARM unrecorded ones,
# alternately:
#   (a) srun -n 4 python3 -c pass        (the step recorded with the portal: two calls)
#   (b) torchrun --standalone --nproc_per_node=4 --no-python python3 -c pass
#       (its rendezvous store on loopback, 4 workers; torchrun from TORCH_VENV, bound
#       read-only into the job)
# and prints each wall time (ms) from launching the command to its return (all four
# tasks started, ran and ended), then the medians and their ratio.
#
# Environment: RUNS=20, WARM=3, TORCH_VENV (default /tmp/srun-bench/venv: a venv with
# torch, e.g. `python3 -m venv /tmp/srun-bench/venv && /tmp/srun-bench/venv/bin/pip
# install torch`; without it only srun is timed), BENCH_ATRIUM_BIN (default:
# target/release/atrium, else target/debug/atrium). Runs as root (the job runs as
# uid BENCH_UID=20990). Never part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/common.sh
repo=$(pwd)
RUNS=${RUNS:-20}
WARM=${WARM:-3}
BENCH_UID=${BENCH_UID:-20990}
TORCH_VENV=${TORCH_VENV:-/tmp/srun-bench/venv}
die() { echo "srun.sh: $*" >&2; exit 1; }
say() { echo "srun.sh: $*" >&2; }
[[ "$(id -u)" -eq 0 ]] || die "must run as root (the job runs as another uid)"
command -v curl >/dev/null || die "curl is missing"
bin=${BENCH_ATRIUM_BIN:-}
if [[ -z "$bin" ]]; then
    for b in target/release/atrium target/debug/atrium; do
        [[ -x "$b" ]] && { bin="$repo/$b"; break; }
    done
fi
[[ -x "$bin" ]] || die "no atrium binary: cargo build -p atrium (or set BENCH_ATRIUM_BIN)"
torchrun=""
if [[ -x "$TORCH_VENV/bin/torchrun" ]]; then
    torchrun="$TORCH_VENV/bin/torchrun"
else
    say "no torchrun in $TORCH_VENV: timing srun only"
fi

work=$(mktemp -d -t atrium-srun-bench-XXXXXX)
chmod 0711 "$work"
atrium_pid=""
cleanup() {
    if [[ -n "$atrium_pid" ]]; then
        kill "$atrium_pid" 2>/dev/null || true
        wait "$atrium_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/data" "$work/home/bench"
chmod 0755 "$work/home"
cat >"$work/atrium.toml" <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/data"
[log]
filter = "warn"
[jobs]
spool_dir = "$work/spool"
[accounts]
home_root = "$work/home"
[cluster]
node_name = "head"
cpus = 16
memory_mb = 64000
discover_gpus = false
[[cluster.partitions]]
name = "cpu"
default = true
TOML
# The venv (under /tmp, which bubblewrap replaces) bound read-only into the job.
if [[ -n "$torchrun" ]]; then
    printf '[[storage.datasets]]\nsource = "%s"\n' "$TORCH_VENV" >>"$work/atrium.toml"
fi
env -u ATRIUM_CONFIG "$bin" --config "$work/atrium.toml" serve >"$work/out" 2>"$work/err" &
atrium_pid=$!
listening() { grep -q "listening on" "$work/out" 2>/dev/null || ! kill -0 "$atrium_pid" 2>/dev/null; }
wait_until 30 listening || true
base=$(sed -n 's/^atrium: listening on //p' "$work/out")
[[ -n "$base" ]] || { tail -n 20 "$work/err" >&2; die "the portal did not start"; }
password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
printf '%s\n' "$password" | env -u ATRIUM_CONFIG "$bin" --config "$work/atrium.toml" \
    user add bench --uid "$BENCH_UID" --gid "$BENCH_UID" --home "$work/home/bench" >/dev/null ||
    die "atrium user add bench failed"
chown "$BENCH_UID:$BENCH_UID" "$work/home/bench"
jar="$work/jar"
csrf=$(curl -sf -c "$jar" -H 'content-type: application/json' \
    -d "{\"username\":\"bench\",\"password\":\"$password\"}" "$base/api/v1/login" |
    sed -n 's/.*"csrf_token": *"\([^"]*\)".*/\1/p') || die "login as bench failed"
token=$(curl -s -b "$jar" -H "x-csrf-token: $csrf" -H 'content-type: application/json' \
    -d '{"name":"bench","scopes":["read","jobs"]}' "$base/api/v1/tokens" |
    sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p')
[[ "$token" == atr_* ]] || die "no token"

# The job: alternate the two, each timed with bash's clock, one line per run.
cat >"$work/home/bench/bench.sh" <<SH
#!/bin/bash
#SBATCH -n 4
#SBATCH -J srun-bench
cd "\$HOME"
ms() { local t0=\${EPOCHREALTIME/./} t1; "\$@" >/dev/null 2>&1 || echo "FAILED \$*"; t1=\${EPOCHREALTIME/./}; echo \$(( (t1 - t0) / 1000 )).\$(( (t1 - t0) % 1000 / 100 )); }
for ((i = 0; i < $((RUNS + WARM)); i++)); do
    s=\$(ms srun -n 4 python3 -c pass)
    t=-
    if [[ -n "$torchrun" ]]; then
        t=\$(ms "$torchrun" --standalone --nproc_per_node=4 --no-python python3 -c pass)
    fi
    (( i >= $WARM )) && echo "RUN \$s \$t"
done
echo DONE
SH
chown "$BENCH_UID:$BENCH_UID" "$work/home/bench/bench.sh"
cd "$work/home/bench"
job=$(ATRIUM_URL="$base" ATRIUM_TOKEN="$token" "$bin" sbatch --parsable bench.sh) || die "sbatch failed"
say "job $job runs $RUNS + $WARM rounds"
out="$work/home/bench/slurm-$job.out"
done_yet() { grep -q '^DONE' "$out" 2>/dev/null; }
wait_until 1800 done_yet || { cat "$out" >&2; die "the job did not finish"; }
if grep -q FAILED "$out"; then cat "$out" >&2; die "a run failed"; fi
s_ms=$(awk '/^RUN/ {print $2}' "$out")
t_ms=$(awk '/^RUN/ && $3 != "-" {print $3}' "$out")
s_med=$(median <<<"$s_ms")
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1); $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $bin"
echo "srun -n 4 python3 -c pass (ms): $(tr '\n' ' ' <<<"$s_ms")"
echo "srun median: $s_med ms"
if [[ -n "$t_ms" ]]; then
    t_med=$(median <<<"$t_ms")
    echo "torchrun --standalone --nproc_per_node=4 (ms): $(tr '\n' ' ' <<<"$t_ms")"
    echo "torchrun median: $t_med ms ($("$TORCH_VENV/bin/python" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null))"
    awk -v s="$s_med" -v t="$t_med" 'BEGIN {printf "srun / torchrun: %.3g\n", s / t}'
fi
steps=$(ATRIUM_URL="$base" ATRIUM_TOKEN="$token" "$bin" sacct -j "$job" -n -P -o JobID | grep -c '\.')
echo "steps recorded in sacct: $steps"
