#!/bin/bash
# Interconnect benchmark: NCCL all-reduce bus bandwidth between the job's GPUs.
#
# Runs nccl-tests' all_reduce_perf on every GPU of the job (ask for 2 or more), from
# MIN_BYTES (default 8) to MAX_BYTES (default 1G), each size STEP_FACTOR (default 2)
# times the last, ITERS (default 20) iterations each. atrium records the average bus
# bandwidth when the job ends (the #ATRIUM line marks it as a benchmark). Needs
# nccl-tests built on the node (github.com/NVIDIA/nccl-tests): set NCCL_TESTS to its
# build directory if all_reduce_perf is not on the PATH. The #CAMPAIGN lines make it
# a campaign template: these variables are its parameters, and its runs never
# overlap (they would share the links they measure).
#SBATCH --job-name=nccl-allreduce
#SBATCH --gres=gpu:2
#SBATCH --time=00:15:00
#ATRIUM --benchmark=nccl-tests
#CAMPAIGN --title=GPU interconnect all-reduce bandwidth (nccl-tests)
#CAMPAIGN --param MIN_BYTES=8
#CAMPAIGN --param MAX_BYTES=1G
#CAMPAIGN --param STEP_FACTOR=2
#CAMPAIGN --param ITERS=20
#CAMPAIGN --param NCCL_TESTS=
#CAMPAIGN --serial

set -euo pipefail
bin=all_reduce_perf
if [[ -n "${NCCL_TESTS:-}" ]]; then bin="$NCCL_TESTS/all_reduce_perf"; fi
if ! command -v "$bin" >/dev/null; then
    echo "all_reduce_perf (nccl-tests) is not installed on this node" >&2
    exit 1
fi
gpus=$(awk -F, '{print NF}' <<<"${CUDA_VISIBLE_DEVICES:-0}")
"$bin" -b "${MIN_BYTES:-8}" -e "${MAX_BYTES:-1G}" -f "${STEP_FACTOR:-2}" -n "${ITERS:-20}" -g "$gpus"
