#!/bin/bash
# Storage benchmark: random 4 KiB reads of your shared storage, with fio.
#
# Small random reads are what many small files (or a shuffled dataset of small
# records) ask of a file system. atrium records the IOPS and bandwidth when the job
# ends (the #ATRIUM line marks it as a benchmark). Sizes: FIO_SIZE per job (default
# 1G), FIO_JOBS (default 4), FIO_RUNTIME seconds (default 30).
#SBATCH --job-name=fio-randread
#SBATCH --cpus-per-task=4
#SBATCH --time=00:15:00
#ATRIUM --benchmark=fio

set -euo pipefail
dir="$HOME/.fio-bench"
mkdir -p "$dir"
fio --name=randread --directory="$dir" --rw=randread --bs=4k --ioengine=psync \
    --size="${FIO_SIZE:-1G}" --numjobs="${FIO_JOBS:-4}" --runtime="${FIO_RUNTIME:-30}" \
    --time_based=1 --group_reporting=0 --invalidate=1 --output-format=json
