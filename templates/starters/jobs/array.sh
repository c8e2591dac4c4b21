#!/bin/bash
# Array: run the same script four times, at most two tasks at once.
#
# Each task gets its own SLURM_ARRAY_TASK_ID (0 to 3): use it to pick an input
# file, a seed or a hyper-parameter. The queue shows the pending tasks as
# JOB_[2-3%2] until they start.
#SBATCH --job-name=array
#SBATCH --array=0-3%2
#SBATCH --cpus-per-task=1
#SBATCH --time=00:02:00

echo "Task ${SLURM_ARRAY_TASK_ID:-?} of array job ${SLURM_ARRAY_JOB_ID:-?} on $(hostname)"
seeds=(11 23 37 41)
echo "Using seed ${seeds[${SLURM_ARRAY_TASK_ID:-0}]}"
sleep 5
echo "Task ${SLURM_ARRAY_TASK_ID:-?} done"
