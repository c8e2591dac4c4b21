#!/usr/bin/env bash
# GPU check: what only a real NVIDIA GPU can show. CI has no GPU, so this is run by hand
# on a GPU host (as root: jobs and sessions run as a user); it prints PASS or FAIL for
# each check and exits with 1 if any failed.
#
#   bench/gpu-check.sh
#
# 1. Discovery: a portal with no GPU declared (cluster.discover_gpus) lists, in
#    GET /api/v1/nodes, each GPU `nvidia-smi` reports, with its index, UUID, model and
#    memory.
# 2. Isolation, jobs in bubblewrap: a job given one GPU has CUDA_VISIBLE_DEVICES set to
#    it, only that GPU's device file, `nvidia-smi -L` lists that one GPU, and PyTorch
#    sees one device and multiplies matrices on it; a job given no GPU has an empty
#    CUDA_VISIBLE_DEVICES, no /dev/nvidiaN, and PyTorch sees no device.
# 3. Culling by GPU utilisation: two sessions (sessions.idle_timeout 20s, cull_interval
#    2s), both serving tests/src/bin/bench-upstream on their socket and visited by no one;
#    one holds the GPU and keeps it busy with PyTorch, the other has none. After 45 s
#    the idle one was stopped ("idle") and the busy one still runs.
#
# Environment: TORCH_PYTHON (a python3 with CUDA PyTorch; default python3),
# BENCH_ATRIUM_BIN and BENCH_UPSTREAM_BIN (binaries to use instead of building them),
# KEEP_WORK=1 keeps the temporary directory. Everything listens on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

[[ "${1:-}" != -h && "${1:-}" != --help ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
die() { echo "gpu-check.sh: $*" >&2; exit 2; }
[[ $(id -u) == 0 ]] || die "run as root (jobs and sessions run as a user)"
nvidia-smi -L >/dev/null 2>&1 || die "nvidia-smi does not work here: this check needs an NVIDIA GPU"
command -v bwrap >/dev/null || die "bubblewrap (bwrap) is not installed"
command -v curl >/dev/null || die "curl is not installed"
python=${TORCH_PYTHON:-python3}
"$python" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
    die "$python has no PyTorch with CUDA (set TORCH_PYTHON)"
python=$(command -v "$python")

bin=${BENCH_ATRIUM_BIN:-}
upstream_bin=${BENCH_UPSTREAM_BIN:-}
if [[ -z "$bin" || -z "$upstream_bin" ]]; then
    cargo build --release --locked -p atrium -p atrium-tests --bins >&2
    bin=${bin:-$PWD/target/release/atrium}
    upstream_bin=${upstream_bin:-$PWD/target/release/bench-upstream}
fi
bin=$(realpath "$bin")
upstream_bin=$(realpath "$upstream_bin")

work=$(mktemp -d /tmp/atrium-gpu-check.XXXXXX)
chmod 755 "$work"
pid=""
cleanup() {
    [[ -z "$pid" ]] || kill "$pid" 2>/dev/null || true
    [[ -z "$pid" ]] || wait "$pid" 2>/dev/null || true
    # The step supervisors of this run (the portal leaves them running by design).
    for p in /proc/[0-9]*; do
        grep -qF "$work" "$p/cmdline" 2>/dev/null && kill -9 "${p#/proc/}" 2>/dev/null || true
    done
    if [[ "${KEEP_WORK:-}" == 1 ]]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

failed=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failed=1; }
deadline_until() { # SECONDS COMMAND...: poll COMMAND every 0.2 s until it succeeds
    local end=$((SECONDS + $1)); shift
    until "$@"; do ((SECONDS < end)) || return 1; sleep 0.2; done
}
json() { "$python" -c "import json, sys; d = json.load(sys.stdin); print($1)"; }

cat >"$work/atrium.toml" <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/data"
[log]
filter = "info"
[jobs]
spool_dir = "$work/spool"
runtime = "bubblewrap"
[accounts]
home_root = "$work/home"
[cluster]
discover_gpus = true
[[cluster.partitions]]
name = "main"
default = true
cpus_per_gpu = 1
mem_per_gpu_mb = 1024
[sessions]
idle_timeout = "20s"
cull_interval = "2s"
[[environments]]
name = "upstream"
description = "bench upstream"
runtime = "none"
command = ["$upstream_bin", "--unix", "{socket}"]
[[environments]]
name = "gpu-busy"
description = "bench upstream with PyTorch keeping the session's GPU busy"
runtime = "none"
command = ["/bin/sh", "-c", "$python $work/busy.py & exec $upstream_bin --unix {socket}"]
TOML
cat >"$work/busy.py" <<'PY'
import time, torch
a = torch.randn(4096, 4096, device="cuda")
end = time.time() + 600
while time.time() < end:
    a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
PY
mkdir -p "$work/home"
env -u ATRIUM_CONFIG "$bin" --config "$work/atrium.toml" serve >"$work/out" 2>"$work/err" &
pid=$!
listening() { grep -q "listening on" "$work/out" 2>/dev/null || ! kill -0 "$pid" 2>/dev/null; }
deadline_until 30 listening || true
base=$(sed -n 's/^atrium: listening on //p' "$work/out")
[[ -n "$base" ]] || { tail -n 30 "$work/err" >&2; die "the portal did not start"; }

password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
printf '%s\n' "$password" | env -u ATRIUM_CONFIG "$bin" --config "$work/atrium.toml" \
    user add gpu --uid 20051 --gid 20051 --home "$work/home/gpu" >/dev/null
jar="$work/jar"
csrf=$(curl -sf -c "$jar" -H 'content-type: application/json' \
    -d "{\"username\":\"gpu\",\"password\":\"$password\"}" "$base/api/v1/login" | json 'd["csrf_token"]')
token=$(curl -sf -b "$jar" -H "x-csrf-token: $csrf" -H 'content-type: application/json' \
    -d '{"name":"check","scopes":["read","jobs","sessions"]}' "$base/api/v1/tokens" | json 'd["secret"]')
api() { curl -sS -H "Authorization: Bearer $token" -H 'content-type: application/json' "$@"; }

# --- 1. Discovery ----------------------------------------------------------------------
smi=$(nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits)
listed=$(api "$base/api/v1/nodes" | "$python" -c 'import json, sys
for g in json.load(sys.stdin)["gpus"]:
    print(", ".join(str(g[k]) for k in ("index", "uuid", "memory_mb", "model", "source", "present")))')
echo "nvidia-smi:"; sed 's/^/  /' <<<"$smi"
echo "GET /api/v1/nodes:"; sed 's/^/  /' <<<"$listed"
while IFS=, read -r index uuid name memory; do
    uuid=${uuid# }; memory=${memory# }
    if grep -q "^$index, $uuid, $memory, .*, discovered, True$" <<<"$listed"; then
        pass "discovery: GPU $index ($name, $uuid, $memory MiB) is listed"
    else
        fail "discovery: GPU $index ($name, $uuid, $memory MiB) is not listed as discovered"
    fi
done <<<"$smi"
first_index=$(head -n1 <<<"$smi" | cut -d, -f1)
first_uuid=$(head -n1 <<<"$smi" | cut -d, -f2 | tr -d ' ')

# --- 2. Isolation ----------------------------------------------------------------------
probe='echo "CVD=${CUDA_VISIBLE_DEVICES-unset}"
echo "DEV=$(ls /dev | grep -E "^nvidia[0-9]+$" | tr "\n" " ")"
echo "SMI=$(nvidia-smi -L 2>&1 | grep -c "^GPU ")"
'"$python"' -c "import torch
n = torch.cuda.device_count()
print(\"TORCH=%d\" % n)
if n:
    a = torch.ones(1024, 1024, device=\"cuda\")
    print(\"MATMUL=%d\" % int((a @ a)[0, 0].item()))
    print(\"NAME=%s\" % torch.cuda.get_device_name(0))
"'
submit() { # GRES -> job id
    local script="#!/bin/bash
#SBATCH -J gpu-check -c 1 --mem=1G
${1:+#SBATCH --gres=$1}
$probe"
    api -d "$("$python" -c 'import json, sys; print(json.dumps({"script": sys.argv[1], "working_directory": sys.argv[2]}))' "$script" "$work/home/gpu")" \
        "$base/api/v1/jobs" | json 'd.get("id") or sys.exit("submit: %s" % d)'
}
finished() { [[ "$(api "$base/api/v1/jobs/$1" | json 'd["state"]')" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)$ ]]; }
output() { api "$base/api/v1/jobs/$1/output" 2>/dev/null || true; }
with_gpu=$(submit gpu:1)
without=$(submit "")
for job in "$with_gpu" "$without"; do
    deadline_until 120 finished "$job" || fail "job $job did not finish in 120 s"
done
out_gpu=$(output "$with_gpu")
out_none=$(output "$without")
echo "job with one GPU:"; sed 's/^/  /' <<<"$out_gpu"
echo "job without a GPU:"; sed 's/^/  /' <<<"$out_none"
grep -qx "CVD=$first_index" <<<"$out_gpu" && grep -qx "DEV=nvidia$first_index " <<<"$out_gpu" &&
    grep -qx "SMI=1" <<<"$out_gpu" && grep -qx "TORCH=1" <<<"$out_gpu" && grep -qx "MATMUL=1024" <<<"$out_gpu" &&
    pass "isolation: the 1-GPU job sees GPU $first_index alone and computes on it" ||
    fail "isolation: the 1-GPU job (above)"
grep -qx "CVD=" <<<"$out_none" && grep -qx "DEV=" <<<"$out_none" && grep -qx "TORCH=0" <<<"$out_none" &&
    pass "isolation: the job without a GPU sees none" ||
    fail "isolation: the job without a GPU (above)"

# --- 3. Culling by GPU utilisation -------------------------------------------------------
start() { # NAME ENVIRONMENT GPUS -> session id
    api -d "{\"name\":\"$1\",\"kind\":\"notebook\",\"environment\":\"$2\",\"gpus\":$3,\"hours\":1}" \
        "$base/api/v1/sessions" | json 'd["id"]'
}
state() { api "$base/api/v1/sessions/$1" | json 'd["state"] + " " + str(d.get("end_reason") or d.get("reason") or "")'; }
ready() { [[ "$(state "$1")" == ready* ]]; }
busy=$(start busy gpu-busy 1)
idle=$(start idle upstream 0)
deadline_until 60 ready "$busy" || fail "the busy session is not ready: $(state "$busy")"
deadline_until 60 ready "$idle" || fail "the idle session is not ready: $(state "$idle")"
sleep_until=$((SECONDS + 45))
while ((SECONDS < sleep_until)); do sleep 1; done
echo "GPU utilisation now: $(nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader)"
echo "after 45 s: busy: $(state "$busy"); idle: $(state "$idle")"
[[ "$(state "$idle")" == "ended idle"* ]] && pass "culling: the idle session was stopped as idle" ||
    fail "culling: the idle session: $(state "$idle")"
ready "$busy" && pass "culling: the session keeping its GPU busy still runs" ||
    fail "culling: the busy session: $(state "$busy")"
api -X DELETE "$base/api/v1/sessions/$busy" >/dev/null || true

grep -iE "gpu|nvidia" "$work/err" | head -n 5 | sed 's/^/portal log: /'
exit "$failed"
