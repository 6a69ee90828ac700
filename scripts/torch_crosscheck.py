#!/usr/bin/env python3
"""Cross-check mrmf against PyTorch: same weights, same data -> same outputs,
same loss, same weights after one Adam step.

    /usr/bin/python3 scripts/torch_crosscheck.py --mrmf build/cpu/bin/mrmf [--model ni|cosmo|both]

For each model (Neuron Inverter at T=1600; CosmoFlow `mrmf` variant at 16^3):
  1. `mrmf datagen` writes a small data set whose training split is exactly one
     batch B, so the one training step sees every training sample whatever the
     loader's shuffle order (MSE, its gradient and the BN batch statistics are
     all invariant to the order of the samples in a batch);
  2. PyTorch builds the model with the same structure and state_dict names
     (dropout 0 on both sides), seeded, and writes its weights as an mrmf
     checkpoint (scripts/torch_state_dict.py write_h5);
  3. `mrmf predict` of that checkpoint on the test split (eval mode: BN uses
     its running statistics) vs model.eval()(x)            -> forward error;
  4. `mrmf train --init <it> -- one epoch = one step` (Adam, constant lr) vs
     loss.backward(); torch.optim.Adam.step() in train mode  -> loss error,
     updated-parameter error, BN running-statistics error.
Reported: max relative errors max|a - b| / max|b| per tensor (worst tensor
shown), and for the Adam step also the error of the update w1 - w0 itself.

Needs torch and h5py (Debian: apt-get install python3-torch python3-h5py; use
/usr/bin/python3 where a pyenv python shadows it). Not part of the test suite.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_state_dict  # noqa: E402  (write_h5: state_dict -> mrmf checkpoint)


# --------------------------------------------------------------------- models
class NeuronInverter(nn.Module):
    """Balewski's CNNandFC_Model as mrmf builds it (models/neuron_inverter.cpp)."""

    def __init__(self, C, T, conv=(30, 90, 180), k=4, pool=4, fc=(512, 512, 512, 256, 128), out=19):
        super().__init__()
        layers, cin, L = [], C, T
        for w in conv:
            layers += [nn.Conv1d(cin, w, k), nn.MaxPool1d(pool), nn.ReLU()]
            cin, L = w, (L - k + 1) // pool
        self.cnn_block = nn.Sequential(*layers)
        flat = cin * L
        self.flat_bn = nn.BatchNorm1d(flat)
        fcl, fin = [], flat
        for w in fc:  # dropout 0: mrmf then uses 2 indices per layer (Linear, ReLU)
            fcl += [nn.Linear(fin, w), nn.ReLU()]
            fin = w
        fcl.append(nn.Linear(fin, out))
        self.fc_block = nn.Sequential(*fcl)

    def forward(self, x):
        x = self.cnn_block(x).flatten(1)
        return self.fc_block(self.flat_bn(x))


class CosmoFlowMrmf(nn.Module):
    """The MRMF authors' 7-conv CosmoFlow as mrmf builds it (models/cosmoflow.cpp):
    BN on the input; conv(k3, pad 1; conv4 stride 2) -> BN -> ReLU -> AvgPool(2)
    after conv1-5 unless the input is smaller than the window."""

    def __init__(self, size, C=4, out=4, eps=1e-3, momentum=0.01):
        super().__init__()
        self.bn1 = nn.BatchNorm3d(C, eps=eps, momentum=momentum)
        widths = [16, 32, 64, 128, 256, 256, 256]
        cin, s, self.pools = C, size, []
        for i, w in enumerate(widths, 1):
            stride = 2 if i == 4 else 1
            setattr(self, f"conv{i}", nn.Conv3d(cin, w, 3, stride=stride, padding=1))
            setattr(self, f"bn{i + 1}", nn.BatchNorm3d(w, eps=eps, momentum=momentum))
            s = (s + 2 - 3) // stride + 1
            pool = i <= 5 and s >= 2
            self.pools.append(pool)
            if pool:
                s //= 2
            cin = w
        self.full1 = nn.Linear(cin * s ** 3, 2048)
        self.full2 = nn.Linear(2048, 256)
        self.full3 = nn.Linear(256, out)

    def forward(self, x):
        x = self.bn1(x)
        for i in range(1, 8):
            x = torch.relu(getattr(self, f"bn{i + 1}")(getattr(self, f"conv{i}")(x)))
            if self.pools[i - 1]:
                x = nn.functional.avg_pool3d(x, 2)
        x = torch.relu(self.full1(x.flatten(1)))
        x = torch.relu(self.full2(x))
        return self.full3(x)


# ---------------------------------------------------------------------- data
def ni_split(path, split):
    with h5py.File(path, "r") as f:
        x = torch.from_numpy(f[f"{split}_frames"][()].astype(np.float32)).transpose(1, 2).contiguous()
        y = torch.from_numpy(f[f"{split}_unitStar_par"][()])
    return x, y


def cosmo_split(folder, split):
    xs, ys = [], []
    d = os.path.join(folder, split)
    for name in sorted(os.listdir(d)):
        with h5py.File(os.path.join(d, name), "r") as f:
            xs.append(f["3Dmap"][()].astype(np.float32))
            ys.append(f["unitPar"][()])
    x = torch.log1p(torch.from_numpy(np.concatenate(xs))).permute(0, 4, 1, 2, 3).contiguous()
    return x, torch.from_numpy(np.concatenate(ys))


# ------------------------------------------------------------------- helpers
def sh(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}")
    return r.stdout


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    den = np.abs(b).max()
    return float(np.abs(a - b).max() / den) if den > 0 else float(np.abs(a - b).max())


def read_model(path):
    with h5py.File(path, "r") as f:
        return {k: np.asarray(v[()]) for k, v in f["model"].items()}


def read_exp_avg(path):
    """Adam's first moment after one step is (1 - beta1) * gradient: our gradients."""
    with h5py.File(path, "r") as f:
        return {k: np.asarray(v[()]) for k, v in f["optimizer"]["exp_avg"].items()}


def worst(d):
    k = max(d, key=d.get)
    return d[k], k


# --------------------------------------------------------------------- check
def check(kind, mrmf, work, seed=0):
    torch.manual_seed(seed)
    B = 16 if kind == "ni" else 8
    if kind == "ni":
        data = os.path.join(work, "ni.h5")
        sh([mrmf, "datagen", "neuron-inverter", "--out", data, "--train", str(B), "--val", str(B), "--test", "32",
            "--seed", "7", "--force"])
        xtr, ytr = ni_split(data, "train")
        xte, yte = ni_split(data, "test")
        model = NeuronInverter(C=xtr.shape[1], T=xtr.shape[2])
        name, sample, fmt, opts = "neuron_inverter", f"{xtr.shape[1]},{xtr.shape[2]}", "neuron_inverter", \
            "{dropout: 0}"
        extra = "  layout: transpose\n"
    else:
        data = os.path.join(work, "cosmo16")
        sh([mrmf, "datagen", "cosmoflow", "--out", data, "--size", "16", "--train", str(B), "--val", str(B),
            "--test", "16", "--per-file", str(B), "--seed", "7", "--force"])
        xtr, ytr = cosmo_split(data, "train")
        xte, yte = cosmo_split(data, "test")
        model = CosmoFlowMrmf(16)
        name, sample, fmt, opts = "cosmoflow", "4,16,16,16", "cosmoflow", "{dropout: 0}"
        extra = "  transform: log1p\n"
    # Non-trivial BN running statistics for the eval-mode forward check.
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    init = os.path.join(work, f"{kind}_init.h5")
    torch_state_dict.write_h5(state, init, name, "default" if kind == "ni" else "mrmf", sample, {"dropout": "0"})

    # 1. forward, eval mode
    pred = os.path.join(work, f"{kind}_pred.h5")
    sh([mrmf, "predict", "--checkpoint", init, "--data", data, "--split", "test", "--out", pred, "--batch", "8",
        "--set", f"data.format={fmt}"] + (["--set", "data.transform=log1p"] if kind == "cosmo" else []))
    with h5py.File(pred, "r") as f:
        ours_fwd = f["predictions"][()]
    model.eval()
    with torch.no_grad():
        ref_fwd = model(xte).numpy()
    fwd_err = rel(ours_fwd, ref_fwd)

    # 2. one Adam step, train mode (dropout 0), on the whole (one-batch) training split
    cfg = os.path.join(work, f"{kind}.yaml")
    with open(cfg, "w") as f:
        f.write(f"model: {{name: {name}, options: {opts}}}\n"
                f"data:\n  format: {fmt}\n  path: {data}\n{extra}"
                f"train: {{batch_size: {B}, seed: 1}}\n"
                "optimizer: {name: adam, lr: 1.0e-3, beta1: 0.9, beta2: 0.999, eps: 1.0e-8}\n"
                "schedule: {type: constant}\nstop: {max_epochs: 1}\nruntime: {device: cpu}\n")
    out = os.path.join(work, f"{kind}_run")
    sh([mrmf, "train", "--config", cfg, "--out", out, "--init", init])
    with open(os.path.join(out, "metrics.jsonl")) as f:
        ours_loss = json.loads(f.readline())["train_loss"]
    ours = read_model(os.path.join(out, "checkpoint.h5"))
    ours_grad = {k: v / 0.1 for k, v in read_exp_avg(os.path.join(out, "checkpoint.h5")).items()}

    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(xtr), ytr)
    loss.backward()
    opt.step()
    after = model.state_dict()
    grads = {k: p.grad.abs().max().item() for k, p in model.named_parameters()}
    gmax = max(grads.values())
    w_err, d_err, b_err, g_err, null = {}, {}, {}, {}, []
    num = den = 0.0
    for k, v in after.items():
        if k.endswith("num_batches_tracked"):
            continue
        if k.endswith(("running_mean", "running_var")):
            b_err[k] = rel(ours[k], v.numpy())
        else:
            w_err[k] = rel(ours[k], v.numpy())
            # A conv bias right before a batch norm has an exactly-zero gradient in
            # exact arithmetic (BN subtracts the mean): what is left is rounding
            # noise, which Adam's first step turns into +-lr of either sign. Those
            # tensors are listed, not compared.
            du, dt = ours[k] - state[k], v.numpy() - state[k]
            num += float(((du - dt).astype(np.float64) ** 2).sum())
            den += float((dt.astype(np.float64) ** 2).sum())
            if grads[k] < 1e-5 * gmax:
                null.append(k)
                continue
            g_err[k] = rel(ours_grad[k], dict(model.named_parameters())[k].grad.numpy())
            d_err[k] = rel(du, dt)
    return {
        "model": f"{name} {sample}",
        "params": int(sum(p.numel() for p in model.parameters())),
        "forward_eval_rel": fwd_err,
        "loss_ours": ours_loss,
        "loss_torch": float(loss),
        "loss_rel": abs(ours_loss - float(loss)) / abs(float(loss)),
        "weights_after_step_rel": worst({k: e for k, e in w_err.items() if k not in null}),
        "weights_after_step_rel_all": worst(w_err),
        "gradient_rel": worst(g_err),
        "adam_update_rel_max": worst(d_err),
        "adam_update_rel_l2": (num / den) ** 0.5,
        "bn_running_stats_rel": worst(b_err),
        "null_gradient_tensors": null,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # scripts/test.sh builds build/cuda wherever nvcc exists, build/cpu elsewhere.
    # Looked for under this checkout, not the current folder (run from
    # elsewhere, the default named a binary that did not exist there).
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    builds = [os.path.join(root, "build", b, "bin", "mrmf") for b in ("cuda", "cpu")]
    ap.add_argument("--mrmf", default=next((p for p in builds if os.path.exists(p)), builds[1]))
    ap.add_argument("--model", choices=["ni", "cosmo", "both"], default="both")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if not os.access(args.mrmf, os.X_OK):  # said before any work, not a traceback from subprocess
        ap.error(f"--mrmf {args.mrmf}: no such executable (build first: bash scripts/build.sh)")
    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ["MRMF_DEVICE"] = "cpu"
    with tempfile.TemporaryDirectory(prefix="mrmf_xcheck_") as work:
        for kind in (["ni", "cosmo"] if args.model == "both" else [args.model]):
            r = check(kind, os.path.abspath(args.mrmf), work)
            print(json.dumps(r))


if __name__ == "__main__":
    main()
