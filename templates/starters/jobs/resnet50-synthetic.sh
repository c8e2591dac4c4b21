#!/bin/bash
# Training throughput: ResNet-50 on synthetic images with PyTorch.
#
# Measures images/sec of the model alone (no data loading), on the job's GPUs when
# there are any (all of them, with DataParallel), otherwise a small run on the CPU.
# atrium records the images/sec when the job ends (the #ATRIUM line marks it as a
# benchmark); compare it with the published figures on the Benchmarks page.
# BATCH per GPU (default 64; 8 on the CPU), STEPS (default 100; 5 on the CPU),
# PRECISION fp32 or fp16 (default fp16 on GPUs). DATA_DIR: a folder of images, one
# folder per class (ImageNet's layout), read from storage instead of synthetic
# images: atrium then measures what it read (MB/s per GPU, for sizing). The #CAMPAIGN
# lines make it a campaign template: these variables are its parameters.
#SBATCH --job-name=resnet50-synthetic
#SBATCH --gres=gpu:1
#SBATCH --time=00:30:00
#ATRIUM --benchmark=custom
#CAMPAIGN --title=ResNet-50 training (synthetic images)
#CAMPAIGN --param PRECISION=fp16
#CAMPAIGN --param BATCH=64
#CAMPAIGN --param STEPS=100
#CAMPAIGN --param DATA_DIR=

set -euo pipefail
python3 - <<'PY'
import os, time
import torch

try:
    from torchvision.models import resnet50
except ImportError:
    raise SystemExit("torchvision is not installed: pip install torchvision")

gpus = torch.cuda.device_count()
device = "cuda" if gpus else "cpu"
batch = int(os.environ.get("BATCH") or (64 if gpus else 8))
steps = int(os.environ.get("STEPS") or (100 if gpus else 5))
precision = os.environ.get("PRECISION") or ("fp16" if gpus else "fp32")
data_dir = os.environ.get("DATA_DIR", "")
model = resnet50().to(device)
if gpus > 1:
    model = torch.nn.DataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
total = batch * max(gpus, 1)
use_amp = precision == "fp16" and gpus > 0
scaler = torch.amp.GradScaler("cuda", enabled=use_amp)

if data_dir:
    # Images read, decoded and cropped by worker processes, as in training.
    from torchvision import datasets, transforms
    images = datasets.ImageFolder(data_dir, transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ]))
    workers = int(os.environ.get("SLURM_CPUS_PER_TASK") or min(8, os.cpu_count() or 1))
    loader = torch.utils.data.DataLoader(images, batch_size=total, shuffle=True,
                                         num_workers=workers, pin_memory=gpus > 0,
                                         drop_last=True, persistent_workers=True)
    if len(images) < total:
        raise SystemExit(f"{data_dir} holds {len(images)} images, fewer than one batch ({total})")

    def batches():
        while True:
            for x, y in loader:
                yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    dataset = "".join(c if c.isalnum() or c in "._-" else "_"
                      for c in os.path.basename(os.path.normpath(data_dir))) or "images"
else:
    x = torch.randn(total, 3, 224, 224, device=device)
    y = torch.randint(0, 1000, (total,), device=device)

    def batches():
        while True:
            yield x, y
    dataset = "synthetic"
feed = batches()

def step():
    images, labels = next(feed)
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device, dtype=torch.float16, enabled=use_amp):
        loss = loss_fn(model(images), labels)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()

for _ in range(min(10, steps)):  # warm-up, not timed
    step()
if gpus:
    torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(steps):
    step()
if gpus:
    torch.cuda.synchronize()
elapsed = time.perf_counter() - start
rate = total * steps / elapsed
name = torch.cuda.get_device_name(0) if gpus else "cpu"
print(f"{steps} steps of {total} images on {max(gpus, 1)} x {name}: {rate:.1f} images/sec")
print(f"ATRIUM_RUN model=resnet50 framework=pytorch precision={'fp16' if use_amp else 'fp32'} "
      f"batch_size={batch} gpus={gpus} dataset={dataset}")
print(f"ATRIUM_METRIC images_per_sec={rate:.2f} unit=images/s")
PY
