#!/bin/bash
# Storage benchmark: sequential read throughput of your shared storage, with fio.
#
# Lays out a test file in DIR (default ~/.fio-bench; once), then reads it in blocks
# of BS (default 1M) with several jobs at once, as a training input pipeline does.
# atrium records the read bandwidth and IOPS when the job ends (the #ATRIUM line
# marks it as a benchmark); see them on the Benchmarks page. Sizes: FIO_SIZE per job
# (default 1G), FIO_JOBS (default 4), FIO_RUNTIME seconds (default 30). The
# #CAMPAIGN lines make it a campaign template: these variables are its parameters,
# and its runs never overlap (they would share the storage they measure).
#SBATCH --job-name=fio-seqread
#SBATCH --cpus-per-task=4
#SBATCH --time=00:15:00
#ATRIUM --benchmark=fio
#CAMPAIGN --title=Storage read throughput (fio)
#CAMPAIGN --param BS=1M
#CAMPAIGN --param FIO_JOBS=4
#CAMPAIGN --param FIO_SIZE=1G
#CAMPAIGN --param FIO_RUNTIME=30
#CAMPAIGN --param DIR=
#CAMPAIGN --serial

set -euo pipefail
dir="${DIR:-$HOME/.fio-bench}"
mkdir -p "$dir"
fio --name=seqread --directory="$dir" --rw=read --bs="${BS:-1M}" --ioengine=psync \
    --size="${FIO_SIZE:-1G}" --numjobs="${FIO_JOBS:-4}" --runtime="${FIO_RUNTIME:-30}" \
    --time_based=0 --group_reporting=0 --invalidate=1 --output-format=json
