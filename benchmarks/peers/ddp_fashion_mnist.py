#!/usr/bin/python3
"""PyTorch's own DistributedDataParallel on idist's main job: the peer of examples/fashion_mnist.

Written for Debian's /usr/bin/python3 with python3-torch (CPU); with --device cuda, for PyTorch's wheel
on GPUs. Two modes:

  cnn  the example's work: the same CNN (examples/fashion_mnist/net.hpp), the same Fashion-MNIST
       IDX gzip files normalised with the same mean / std, DistributedSampler shuffled with seed +
       epoch, SGD with momentum and the example's linear decay per step, the global batch divided
       over the ranks (drop_last), then the test accuracy over the test split. Rank 0 prints one
       JSON line with the example's keys; images_per_s covers the training loop only, timed as the
       example times it (after a barrier, until the last step of the epoch returns on rank 0).
  mlp  the 32x512 MLP step of benchmarks/training (synthetic batch, SGD lr 0.05), DDP defaults;
       per-step times are maxima over the ranks; rank 0 prints one JSON line with their median.

--device cuda (the peer of the example under --backend nccl): each rank computes on cuda:<LOCAL_RANK>
(torchrun's local rank, else its rank: the device idist::device() gives), the backend defaults to
nccl, DDP gets device_ids=[that index], each batch is copied to the device after the CPU loader (as
the example copies it), and the tensors given to the collectives live on the device. The JSON line
then has a "device" key; everything else is as on CPUs.

Launch with --nproc N (the script spawns N ranks on this host, rendezvous on a free port), or under
torchrun (RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT in the environment) with --nproc 0.

  /usr/bin/python3 benchmarks/peers/ddp_fashion_mnist.py --nproc 2
  /usr/bin/python3 benchmarks/peers/ddp_fashion_mnist.py --nproc 2 --mode mlp
  torchrun --standalone --nproc_per_node 1 benchmarks/peers/ddp_fashion_mnist.py --nproc 0 --device cuda
"""
import argparse
import datetime
import gzip
import json
import os
import socket
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

# examples/fashion_mnist/dataset.hpp
PIXEL_MEAN = 0.2860
PIXEL_STD = 0.3530
IMAGES_MAGIC = 0x00000803
LABELS_MAGIC = 0x00000801


class Net(nn.Module):
    """examples/fashion_mnist/net.hpp without batch norm: conv 5x5 1->16, ReLU, max-pool 2, conv 5x5
    16->32, ReLU, max-pool 2, linear 512->128, ReLU, linear 128->10 (registered in the same order)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(32 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def mlp(depth, width):
    """benchmarks/training/models.cpp's mlp(): `depth` Linear width -> width with ReLU between them."""
    layers = []
    for i in range(depth):
        layers.append(nn.Linear(width, width))
        if i + 1 < depth:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def read_be32(raw, offset, path):
    if len(raw) < offset + 4:
        raise ValueError(f"{path}: truncated header")
    return int.from_bytes(raw[offset:offset + 4], "big")


def read_split(data_dir, prefix, limit=0):
    """The IDX gzip files of one split as (images uint8 [n, 28, 28], labels uint8 [n]); checks as
    examples/fashion_mnist/idx_reader.cpp does."""
    ipath = os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz")
    lpath = os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz")
    with gzip.open(ipath, "rb") as f:
        raw = f.read()
    if read_be32(raw, 0, ipath) != IMAGES_MAGIC:
        raise ValueError(f"{ipath}: bad magic number, not an IDX images file")
    count, rows, cols = (read_be32(raw, o, ipath) for o in (4, 8, 12))
    if (rows, cols) != (28, 28):
        raise ValueError(f"{ipath}: images are {rows} x {cols}, expected 28 x 28")
    n = min(limit, count) if limit > 0 else count
    if len(raw) < 16 + n * rows * cols:
        raise ValueError(f"{ipath}: truncated pixels")
    images = np.frombuffer(raw, dtype=np.uint8, count=n * rows * cols, offset=16).reshape(n, rows, cols)
    with gzip.open(lpath, "rb") as f:
        raw = f.read()
    if read_be32(raw, 0, lpath) != LABELS_MAGIC:
        raise ValueError(f"{lpath}: bad magic number, not an IDX labels file")
    if read_be32(raw, 4, lpath) != count:
        raise ValueError(f"{ipath} and {lpath} hold different counts")
    if len(raw) < 8 + n:
        raise ValueError(f"{lpath}: truncated labels")
    labels = np.frombuffer(raw, dtype=np.uint8, count=n, offset=8)
    if labels.max(initial=0) >= 10:
        raise ValueError(f"{lpath}: a label is out of range 0..9")
    return images, labels


def to_tensors(images, labels):
    """The example's normalisation, in the same operations and order (float32 / 255, - mean, / std)."""
    x = torch.from_numpy(images.copy()).reshape(-1, 1, 28, 28).to(torch.float32).div_(255.0)
    x = x.sub_(PIXEL_MEAN).div_(PIXEL_STD)
    y = torch.from_numpy(labels.copy()).to(torch.int64)
    return x, y


def on(device, t):
    """`t` on `device` (a CUDA device), or `t` itself on CPUs (device None)."""
    return t if device is None else t.to(device)


def weights_digest(model):
    """examples/fashion_mnist/metrics.cpp's FNV-1a (64 bits) of the parameters' bytes in registration
    order, so that equal digests mean bitwise-equal weights across the programs."""
    h = 14695981039346656037
    for p in model.parameters():
        for b in p.detach().cpu().contiguous().numpy().tobytes():
            h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def evaluate(model, test_x, test_y, world, rank, device=None):
    """Accuracy over the whole test split: each rank scores its unshuffled DistributedSampler share
    in batches of 1000, without the padding repeats; counts are summed over the ranks."""
    model.eval()
    n = test_x.shape[0]
    keep = len(range(rank, n, world))  # the unpadded part of this rank's share
    test_set = TensorDataset(test_x, test_y)
    loader = DataLoader(test_set, batch_size=1000, sampler=DistributedSampler(test_set, world, rank, shuffle=False))
    counts = torch.zeros(2, dtype=torch.int64, device=device)  # correct, total
    with torch.no_grad():
        for x, y in loader:
            m = min(x.shape[0], keep - int(counts[1]))
            if m <= 0:
                break
            counts[0] += int(model(on(device, x[:m])).argmax(1).eq(on(device, y[:m])).sum())
            counts[1] += m
    dist.all_reduce(counts)
    return float(counts[0]) / float(counts[1]) if counts[1] > 0 else 0.0


def train_cnn(args, rank, world, device=None):
    torch.manual_seed(args.seed)
    images, labels = read_split(args.data_dir, "train", args.limit)
    train_x, train_y = to_tensors(images, labels)
    test_x, test_y = to_tensors(*read_split(args.data_dir, "t10k"))
    # auto_dataloader's (ignite's) rule: the global batch divided over the ranks when it is >= world.
    local_batch = args.batch_size // world if args.batch_size >= world else args.batch_size

    train_set = TensorDataset(train_x, train_y)
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=local_batch, sampler=sampler, drop_last=True, num_workers=0)
    steps = len(loader)

    if device is None:
        model = DDP(Net())  # broadcasts rank 0's weights; DDP's default buckets
    else:
        model = DDP(Net().to(device), device_ids=[device.index])
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    if rank == 0:
        print(f"ddp_fashion_mnist: {train_x.shape[0]} training / {test_x.shape[0]} test images, global batch "
              f"{local_batch * world} ({local_batch} per rank x {world} ranks), {steps} steps per epoch, "
              f"{torch.get_num_threads()} intra-op thread(s) per rank, metrics reduced per {args.metrics}"
              + ("" if device is None else f", device {device} ({torch.cuda.get_device_name(device)})"),
              file=sys.stderr, flush=True)

    trained = 0.0
    images_done = 0
    totals = [0.0, 0.0, 0.0]  # loss * n, correct, n of the last epoch, over all ranks
    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch - 1)
        model.train()
        local = [0.0, 0.0, 0.0]
        epoch_totals = [0.0, 0.0, 0.0]
        dist.barrier()  # start the clock together, as the example does
        start = time.perf_counter()
        for step, (x, y) in enumerate(loader):
            if device is not None:
                x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            loss.backward()
            progress = ((epoch - 1) * steps + step) / (args.epochs * steps)
            lr = args.lr * (1.0 - progress) if args.lr_schedule == "linear" else args.lr
            for group in optimizer.param_groups:
                group["lr"] = lr
            optimizer.step()
            n = float(y.shape[0])
            step_totals = [loss.item() * n, float(logits.detach().argmax(1).eq(y).sum().item()), n]
            if args.metrics == "step":  # the example's progress line: one all-reduce of 4 doubles per step
                v = torch.tensor(step_totals + [0.0], dtype=torch.float64, device=device)
                dist.all_reduce(v)
                epoch_totals = [a + float(b) for a, b in zip(epoch_totals, v[:3])]
            else:
                local = [a + b for a, b in zip(local, step_totals)]
        trained += time.perf_counter() - start
        images_done += steps * local_batch * world
        if args.metrics != "step":
            v = torch.tensor(local, dtype=torch.float64, device=device)
            dist.all_reduce(v)
            epoch_totals = [float(a) for a in v]
        totals = epoch_totals
        accuracy = evaluate(model, test_x, test_y, world, rank, device)
        if rank == 0:
            print(f"epoch {epoch}/{args.epochs}: test accuracy {accuracy:.4f}", file=sys.stderr, flush=True)

    if rank == 0:
        report = {
            "world_size": world, "backend": args.backend, "epochs": args.epochs, "first_epoch": 1,
            "last_epoch": args.epochs, "batch_size": local_batch * world, "train_images": int(train_x.shape[0]),
            "threads_per_rank": torch.get_num_threads(), "train_seconds": round(trained, 3),
            "images_per_s": round(images_done / trained, 1) if trained > 0 else 0.0,
            "train_loss": round(totals[0] / totals[2], 6) if totals[2] else float("nan"),
            "train_accuracy": round(totals[1] / totals[2], 6) if totals[2] else float("nan"),
            "test_accuracy": round(accuracy, 4), "comm_hook": "none",
            "weights_digest": weights_digest(model.module), "sync_bn": False,
            "program": "pytorch_ddp", "torch": torch.__version__, "metrics": args.metrics,
        }
        if device is not None:
            report["device"] = str(device)
        print(json.dumps(report), flush=True)


def train_mlp(args, rank, world, device=None):
    torch.manual_seed(args.seed)
    model = mlp(args.depth, args.width)
    torch.manual_seed(args.seed + 1000 + rank)  # benchmarks/training: a different batch per rank
    x = torch.randn(args.mlp_batch, args.width)
    y = torch.randint(0, args.width, (args.mlp_batch,), dtype=torch.int64)
    ddp_args = {}
    if device is not None:  # the same weights and batch as on CPUs, moved to the device
        model, x, y = model.to(device), x.to(device), y.to(device)
        ddp_args["device_ids"] = [device.index]
    if args.bucket_cap_mb:
        ddp_args["bucket_cap_mb"] = args.bucket_cap_mb
    model = DDP(model, **ddp_args)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    def step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    dist.barrier()
    step()  # untimed, as benchmarks/training does after its barrier (so that the last losses compare)
    samples = []
    loss = float("nan")
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        samples.append((time.perf_counter() - t0) * 1000.0)
    t = torch.tensor(samples, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # per-step maxima over ranks, as benchmarks/training reports
    samples = t.tolist()
    if rank == 0:
        q = statistics.quantiles(samples, n=10) if len(samples) > 1 else samples * 9
        report = {
            "program": "pytorch_ddp", "mode": f"mlp{args.depth}x{args.width}", "world_size": world,
            "backend": args.backend, "batch_per_rank": args.mlp_batch, "threads_per_rank": torch.get_num_threads(),
            "bucket_cap_mb": args.bucket_cap_mb or 25.0, "warmup": args.warmup, "steps": args.steps,
            "p50_ms": round(statistics.median(samples), 3), "p90_ms": round(q[8], 3),
            "mean_ms": round(statistics.fmean(samples), 3), "min_ms": round(min(samples), 3),
            "samples_per_s": round(args.mlp_batch * world * 1000.0 / statistics.median(samples), 1),
            "last_loss": round(loss, 6), "torch": torch.__version__,
        }
        if device is not None:
            report["device"] = str(device)
        print(json.dumps(report), flush=True)


def worker(rank, world, args, master_port):
    if master_port is not None:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(master_port)
    torch.set_num_threads(args.threads)
    device = None
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))  # torchrun's; spawned: the rank
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    try:
        if args.mode == "cnn":
            train_cnn(args, rank, world, device)
        else:
            train_mlp(args, rank, world, device)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["cnn", "mlp"], default="cnn")
    p.add_argument("--nproc", type=int, default=2, help="ranks to spawn here; 0: launched by torchrun")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cpu, or cuda: each rank on cuda:<LOCAL_RANK> (one GPU per rank)")
    p.add_argument("--backend", default=None,
                   help="gloo (mpi only where this torch has it); --device cuda: nccl (default) or gloo")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per rank")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds a collective may wait")
    # cnn
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--limit", type=int, default=0, help="train on the first N images only (0: all)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64, help="global batch, divided over the ranks")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--lr-schedule", choices=["linear", "constant"], default="linear")
    p.add_argument("--metrics", choices=["epoch", "step"], default="epoch",
                   help="reduce the training loss / accuracy over the ranks once per epoch (what a DDP script "
                        "does) or every step (what the example's progress line does)")
    # mlp
    p.add_argument("--depth", type=int, default=32)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--mlp-batch", type=int, default=16, help="samples per rank per step")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--bucket-cap-mb", type=float, default=0.0, help="0: DDP's default")
    args = p.parse_args(argv)
    for name in ("epochs", "batch_size", "threads", "depth", "width", "mlp_batch", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.limit < 0 or args.warmup < 0 or args.nproc < 0:
        p.error("--limit, --warmup and --nproc must be >= 0")
    if args.device == "cuda":
        if args.backend is None:
            args.backend = "nccl"
        if args.backend not in ("nccl", "gloo"):
            p.error(f"--backend {args.backend}: expected nccl or gloo with --device cuda")
        if not torch.cuda.is_available():
            p.error(f"--device cuda: no CUDA device is visible (torch {torch.__version__}, CUDA "
                    f"{torch.version.cuda or 'none'})")
        if args.nproc > torch.cuda.device_count():
            p.error(f"--nproc {args.nproc}: only {torch.cuda.device_count()} GPU(s) visible (one rank per GPU)")
        return args
    if args.backend is None:
        args.backend = "gloo"
    if args.backend == "mpi" and not dist.is_mpi_available():
        p.error("--backend mpi: this torch was built without MPI (torch.distributed.is_mpi_available() is False)")
    if args.backend not in ("gloo", "mpi"):
        p.error(f"--backend {args.backend}: expected gloo (or mpi where available)")
    return args


def main(argv):
    args = parse_args(argv)
    if args.nproc == 0:  # torchrun (or any launcher setting the env:// variables)
        for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            if var not in os.environ:
                sys.exit(f"ddp_fashion_mnist: --nproc 0 expects a launcher's {var} in the environment")
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, None)
        return
    mp.spawn(worker, args=(args.nproc, args, free_port()), nprocs=args.nproc, join=True)


if __name__ == "__main__":
    main(sys.argv[1:])
