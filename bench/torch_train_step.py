#!/usr/bin/env python3
"""One full training step (forward, MSE, backward, Adam) of the mrmf workloads in PyTorch, on the CPU or a GPU.

The PyTorch counterpart of bench/bench_train_step.cpp (same workloads, same step, same statistics:
median of N timed steps after W warm-up steps). scripts/bench_vs_torch.sh runs both and prints ratios.

  torch_train_step.py [--workload ni1600|ni800|cf16|cf32|cf64|cf128]... [--steps N] [--warmup W] [--threads 2]
                      [--device cpu|cuda] [--json]

On a GPU, cuDNN autotuning (torch.backends.cudnn.benchmark) is on -- PyTorch's fastest setting -- and the
peak memory PyTorch's allocator held during the timed steps is reported.

Models:
  Neuron Inverter exactly as Balewski's toolbox/Model.py: input frames (N, T, C) reinterpreted with
  x.view(-1, C, T); 3 x [Conv1d k4 -> MaxPool1d 4 -> ReLU]; flatten; BatchNorm1d(flat);
  5 x [Linear -> ReLU -> Dropout 0.05] (512, 512, 512, 256, 128); Linear -> 19.
  CosmoFlow 'mrmf' as in the MRMF authors' denser_model.py (see the project's REFERENCE): BatchNorm3d on
  the input; 7 x [Conv3d k3 pad 1 (16, 32, 64, 128 stride 2, 256, 256, 256) -> BatchNorm3d -> ReLU],
  AvgPool3d(2) after conv1-5 (skipped where it would reach size 0, like mrmf's builder); flatten;
  Dropout -> Linear 2048 -> Dropout -> ReLU -> Linear 256 -> Dropout -> ReLU -> Linear 4.
  BN eps 1e-3, momentum 0.01 (Keras defaults).
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn as nn


class NeuronInverter(nn.Module):
    def __init__(self, channels=3, time_bins=1600):
        super().__init__()
        self.C, self.T = channels, time_bins
        self.cnn_block = nn.ModuleList()
        c_in, length = channels, time_bins
        for c_out in (30, 90, 180):
            self.cnn_block.append(nn.Conv1d(c_in, c_out, 4))
            self.cnn_block.append(nn.MaxPool1d(4))
            self.cnn_block.append(nn.ReLU())
            c_in, length = c_out, (length - 3) // 4
        self.flat_dim = c_in * length
        self.flat_bn = nn.BatchNorm1d(self.flat_dim)
        self.fc_block = nn.ModuleList()
        f_in = self.flat_dim
        for w in (512, 512, 512, 256, 128):
            self.fc_block.append(nn.Linear(f_in, w))
            self.fc_block.append(nn.ReLU())
            self.fc_block.append(nn.Dropout(0.05))
            f_in = w
        self.fc_block.append(nn.Linear(f_in, 19))

    def forward(self, x):
        x = x.view(-1, self.C, self.T)  # Balewski's reinterpretation of (N, T, C) frames
        for m in self.cnn_block:
            x = m(x)
        x = x.view(-1, self.flat_dim)
        x = self.flat_bn(x)
        for m in self.fc_block:
            x = m(x)
        return x


class CosmoFlowMrmf(nn.Module):
    def __init__(self, size=32, channels=4, dropout=0.05):
        super().__init__()
        layers = [nn.BatchNorm3d(channels, eps=1e-3, momentum=0.01)]
        c_in, s = channels, size
        for i, c_out in enumerate((16, 32, 64, 128, 256, 256, 256), start=1):
            stride = 2 if i == 4 else 1
            layers += [nn.Conv3d(c_in, c_out, 3, stride=stride, padding=1),
                       nn.BatchNorm3d(c_out, eps=1e-3, momentum=0.01), nn.ReLU()]
            s = (s + 2 - 3) // stride + 1
            if i <= 5 and s >= 2:  # a pool that would reach size 0 is skipped
                layers.append(nn.AvgPool3d(2))
                s //= 2
            c_in = c_out
        self.features = nn.Sequential(*layers)
        flat = c_in * s ** 3
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(flat, 2048), nn.Dropout(dropout),
                                  nn.ReLU(), nn.Linear(2048, 256), nn.Dropout(dropout), nn.ReLU(), nn.Linear(256, 4))

    def forward(self, x):
        return self.head(self.features(x))


WORKLOADS = {
    "ni1600": ("Neuron Inverter, batch 512, T = 1600", lambda: NeuronInverter(3, 1600), (512, 1600, 3), 19),
    "ni800": ("Neuron Inverter, batch 512, T = 800", lambda: NeuronInverter(3, 800), (512, 800, 3), 19),
    "cf16": ("CosmoFlow mrmf, batch 8, 16^3", lambda: CosmoFlowMrmf(16), (8, 4, 16, 16, 16), 4),
    "cf32": ("CosmoFlow mrmf, batch 8, 32^3", lambda: CosmoFlowMrmf(32), (8, 4, 32, 32, 32), 4),
    "cf64": ("CosmoFlow mrmf, batch 8, 64^3", lambda: CosmoFlowMrmf(64), (8, 4, 64, 64, 64), 4),
    "cf128": ("CosmoFlow mrmf, batch 8, 128^3", lambda: CosmoFlowMrmf(128), (8, 4, 128, 128, 128), 4),
}


def run(key, warmup, steps, device="cpu"):
    label, make, xshape, nout = WORKLOADS[key]
    torch.manual_seed(1)
    cuda = device.startswith("cuda")
    model = make().train().to(device)
    # fused=True: one kernel for the whole update on the GPU, like mrmf's fused Adam.
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, **({"fused": True} if cuda else {}))
    x = (torch.rand(xshape) * 2 - 1).to(device)
    y = (torch.rand(xshape[0], nout) * 2 - 1).to(device)
    loss_fn = nn.MSELoss()
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        if cuda and i == warmup - 1:
            torch.cuda.reset_peak_memory_stats()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    med = times[len(times) // 2]
    peak = torch.cuda.max_memory_allocated() / 1e9 if cuda else 0.0
    return dict(workload=key, label=label, batch=xshape[0], steps=steps, ms_per_step=round(med, 2),
                min_ms=round(times[0], 2), max_ms=round(times[-1], 2), samples_per_s=round(1e3 * xshape[0] / med, 2),
                peak_gpu_gb=round(peak, 3))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", action="append", choices=sorted(WORKLOADS))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-tf32", action="store_true", help="strict FP32 convolutions (cudnn.allow_tf32 = False)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.device.startswith("cuda"):
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = not a.no_tf32
    keys = a.workload or ["ni1600", "ni800", "cf32"]
    results = []
    for k in keys:
        r = run(k, a.warmup, a.steps, a.device)
        results.append(r)
        if not a.json:
            print(f"{r['label']:<40} {r['ms_per_step']:9.1f} ms/step (min {r['min_ms']:.1f}, max {r['max_ms']:.1f})"
                  f"  {r['samples_per_s']:8.1f} samples/s  peak GPU {r['peak_gpu_gb']:.2f} GB", flush=True)
    if a.json:
        json.dump({"engine": "pytorch " + torch.__version__, "device": a.device, "tf32": torch.backends.cudnn.allow_tf32, "threads": torch.get_num_threads(), "results": results},
                  sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
