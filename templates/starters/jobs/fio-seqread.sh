#!/bin/bash
# Storage benchmark: sequential read throughput of your shared storage, with fio.
#
# Lays out a test file in ~/.fio-bench (once), then reads it in 1 MiB blocks with
# several jobs at once, as a training input pipeline does. atrium records the read
# bandwidth and IOPS when the job ends (the #ATRIUM line marks it as a benchmark);
# see them on the Benchmarks page. Sizes: FIO_SIZE per job (default 1G), FIO_JOBS
# (default 4), FIO_RUNTIME seconds (default 30).
#SBATCH --job-name=fio-seqread
#SBATCH --cpus-per-task=4
#SBATCH --time=00:15:00
#ATRIUM --benchmark=fio

set -euo pipefail
dir="$HOME/.fio-bench"
mkdir -p "$dir"
fio --name=seqread --directory="$dir" --rw=read --bs=1M --ioengine=psync \
    --size="${FIO_SIZE:-1G}" --numjobs="${FIO_JOBS:-4}" --runtime="${FIO_RUNTIME:-30}" \
    --time_based=0 --group_reporting=0 --invalidate=1 --output-format=json
