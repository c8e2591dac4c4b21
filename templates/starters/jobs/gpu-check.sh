#!/bin/bash
# GPU check: ask for one GPU and show what the job got.
#
# Prints CUDA_VISIBLE_DEVICES and the GPU's details; if Python with PyTorch is
# installed, also checks that CUDA works by multiplying two matrices on the GPU.
#SBATCH --job-name=gpu-check
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=2
#SBATCH --time=00:05:00

echo "Job ${SLURM_JOB_ID:-?} on $(hostname)"
echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-<unset>}"
echo
nvidia-smi || echo "nvidia-smi is not available on this node"
echo

if command -v python3 >/dev/null && python3 -c "import torch" 2>/dev/null; then
    python3 -c "
import torch
print('torch', torch.__version__, '- CUDA available:', torch.cuda.is_available())
if torch.cuda.is_available():
    print('device:', torch.cuda.get_device_name(0))
    a = torch.randn(2048, 2048, device='cuda')
    print('matmul checksum:', float((a @ a).sum()))
"
else
    echo "PyTorch is not installed here: skipping the CUDA check."
fi
