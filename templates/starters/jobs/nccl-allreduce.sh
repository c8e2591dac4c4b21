#!/bin/bash
# Interconnect benchmark: NCCL all-reduce bus bandwidth between the job's GPUs.
#
# Runs nccl-tests' all_reduce_perf from 8 bytes to 1 GiB on every GPU of the job
# (ask for 2 or more). atrium records the average bus bandwidth when the job ends
# (the #ATRIUM line marks it as a benchmark). Needs nccl-tests built on the node
# (github.com/NVIDIA/nccl-tests): set NCCL_TESTS to its build directory if
# all_reduce_perf is not on the PATH.
#SBATCH --job-name=nccl-allreduce
#SBATCH --gres=gpu:2
#SBATCH --time=00:15:00
#ATRIUM --benchmark=nccl-tests

set -euo pipefail
bin=all_reduce_perf
if [[ -n "${NCCL_TESTS:-}" ]]; then bin="$NCCL_TESTS/all_reduce_perf"; fi
if ! command -v "$bin" >/dev/null; then
    echo "all_reduce_perf (nccl-tests) is not installed on this node" >&2
    exit 1
fi
gpus=$(awk -F, '{print NF}' <<<"${CUDA_VISIBLE_DEVICES:-0}")
"$bin" -b 8 -e 1G -f 2 -g "$gpus"
