#!/bin/bash
# Hello: print where the job runs and what the scheduler told it.
#
# A first job to try: no GPU, one CPU, a minute at most. The output appears on
# the job's page while it runs.
#SBATCH --job-name=hello
#SBATCH --cpus-per-task=1
#SBATCH --time=00:01:00

echo "Hello from $(hostname)"
echo "Job ${SLURM_JOB_ID:-?} (${SLURM_JOB_NAME:-?}) of ${SLURM_JOB_USER:-$USER}"
echo "Working directory: $(pwd)"
echo
echo "GPUs on this node:"
nvidia-smi -L || true
echo
echo "Slurm variables:"
env | grep ^SLURM | sort
