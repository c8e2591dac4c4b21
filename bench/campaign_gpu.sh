#!/usr/bin/env bash
# Benchmark campaign on a real GPU: the ResNet-50 starter (PyTorch, synthetic images)
# over precisions and batch sizes, submitted with `atrium campaign submit` to a portal
# that runs the jobs on this machine's GPUs, then its report (JSON, HTML, CSV) and
# `atrium campaign show`'s lines.
#
#   bench/campaign_gpu.sh OUT_DIR
#
# Environment: PRECISIONS=fp16,fp32, BATCHES=64,256, GPUS=1, REPEAT=2, STEPS=60,
# DATA_DIR (a folder of images, one folder per class, read by the training instead of
# synthetic images; it must be readable by every user),
# BENCH_ATRIUM_BIN (default: builds target/release/atrium). Needs python3 with torch
# and torchvision on PATH (the jobs get this shell's environment, as from sbatch),
# nvidia-smi, and root (the jobs run as a user made for the run, uid 20960).
# Everything listens on 127.0.0.1 and lives in a temporary directory removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/common.sh
repo=$(pwd)

out=${1:?usage: bench/campaign_gpu.sh OUT_DIR}
mkdir -p "$out"
PRECISIONS=${PRECISIONS:-fp16,fp32}
BATCHES=${BATCHES:-64,256}
GPUS=${GPUS:-1}
REPEAT=${REPEAT:-2}
STEPS=${STEPS:-60}
DATA_DIR=${DATA_DIR:-}
BENCH_UID=20960

die() { echo "campaign_gpu.sh: $*" >&2; exit 1; }
[[ "$(id -u)" -eq 0 ]] || die "must run as root (the jobs run as the run's user)"
command -v nvidia-smi >/dev/null || die "nvidia-smi is missing"
python3 -c 'import torch, torchvision' || die "python3 on PATH has no torch and torchvision"

if [[ -n "${BENCH_ATRIUM_BIN:-}" ]]; then
    bin=$(realpath "$BENCH_ATRIUM_BIN")
else
    cargo build --release --locked -p atrium >/dev/null 2>&1 || die "cargo build --release failed"
    bin="$repo/target/release/atrium"
fi

work=$(mktemp -d /tmp/atrium-campaign-XXXXXX)
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

mkdir -p "$work/home" "$work/atrium"
chmod 0755 "$work/home"
home="$work/home/bench"
mkdir -m 0700 "$home" && chown "$BENCH_UID:$BENCH_UID" "$home"
cat >"$work/atrium/atrium.toml" <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/atrium/data"
[log]
filter = "warn"
[jobs]
spool_dir = "$work/spool"
usage_interval_seconds = 5
[cluster]
node_name = "gpu-node"
[accounts]
home_root = "$work/home"
TOML
conf=(--config "$work/atrium/atrium.toml")
env -u ATRIUM_CONFIG "$bin" "${conf[@]}" user add bench --uid "$BENCH_UID" --gid "$BENCH_UID" --home "$home" \
    <<<"bench-password-of-some-length" >/dev/null || die "user add failed"
portal_serve "$work/atrium" 30 "$bin" "${conf[@]}" || die "atrium did not start"
base=$portal_base

token=$(portal_bearer "$base" bench bench-password-of-some-length "$work/atrium/jar") \
    || die "could not log in and create a token"
export ATRIUM_URL="$base" ATRIUM_TOKEN="$token"
curl -sf -H "Authorization: Bearer $token" "$base/api/v1/cluster/gpus" >"$out/gpus.json" || true
nvidia-smi -L >"$out/nvidia-smi.txt" 2>&1 || true

args=(resnet50-synthetic --gpus "$GPUS" --param "PRECISION=$PRECISIONS" --param "BATCH=$BATCHES"
      --param "STEPS=$STEPS" --repeat "$REPEAT"
      --name "ResNet-50 (${DATA_DIR:-synthetic images}) on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)")
[[ -z "$DATA_DIR" ]] || args+=(--param "DATA_DIR=$DATA_DIR")
"$bin" campaign submit "${args[@]}" --dry-run | tee "$out/estimate.txt"
submitted=$("$bin" campaign submit "${args[@]}")
echo "$submitted"
id=$(sed -n 's/^Submitted campaign \([0-9]*\).*/\1/p' <<<"$submitted")
[[ -n "$id" ]] || die "no campaign id in: $submitted"

# Until every task has ended and been read.
start=$(date +%s)
while :; do
    curl -sf -H "Authorization: Bearer $token" "$base/api/v1/campaigns/$id" >"$out/campaign.json" || die "reading the campaign failed"
    state=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["report"]["progress"]; print(p["recorded"], p["planned"], p["running_or_pending"], p["failed"])' "$out/campaign.json")
    read -r recorded planned pending failed <<<"$state"
    echo "   $(( $(date +%s) - start )) s: $recorded of $planned recorded, $pending running or waiting, $failed failed" >&2
    if [[ "$pending" -eq 0 && "$recorded" -ge $((planned - failed)) ]]; then break; fi
    sleep 5
done
"$bin" campaign show "$id" | tee "$out/show.txt"
"$bin" campaign export "$id" --html -o "$out/report.html"
"$bin" campaign export "$id" --csv -o "$out/report.csv"
for f in "$work"/home/bench/slurm-*.out; do
    [[ -e "$f" ]] && tail -n 3 "$f"
done >"$out/outputs.txt" 2>&1 || true
echo "campaign $id: $(( $(date +%s) - start )) s" >&2
