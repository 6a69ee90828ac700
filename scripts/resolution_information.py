#!/usr/bin/env python3
"""How much each label can be predicted from a data set at several resolutions,
by a model-free yardstick: ridge regression on summary statistics.

Why: when a CNN trained on coarse data plateaus, either the coarse data lacks
the information or the network does not extract it. This script answers the
first question per label. For each averaging factor k it reduces every sample
by the mean of k adjacent elements along every spatial axis (the offline and
fused reducers' operation; channels are never averaged), computes per-sample
statistics -- per-channel mean and standard deviation, the correlations
between channels, and each channel's power spectrum in radial bins (log) --
and fits ridge regression on linear and squared statistics (training split),
then reports the validation MSE per label next to that of predicting the
training mean. Compare with `mrmf eval`'s per-target MSE of a trained model.
A lower bound on the information, not a model: on CosmoFlow-like fields these
statistics are close to sufficient (synthetic 32^3: mean MSE 0.0014 at 1/1,
0.005 at 1/8, where the CNN reaches ~0.01-0.05); on Neuron Inverter traces
they see much less than a CNN (16 k samples: 0.24 against ~0.16).

  python3 scripts/resolution_information.py runs/data/cosmo32 --factors 1 2
  python3 scripts/resolution_information.py runs/data/ni16k.h5 --factors 1 2 4 --transform none

CosmoFlow folders ({train,val}/*.h5 with 3Dmap and unitPar) take log1p by
default (data.transform of the CosmoFlow configs); Neuron Inverter files
({train,val}_frames, {train,val}_unitStar_par) take none.
"""
import argparse
import glob
import os
import sys

import h5py
import numpy as np


def check_size(shape, limit, max_gb, what):
    """Refuses a load that would not fit: statistics need the samples as float32, plus copies."""
    per = 4 * int(np.prod(shape))
    need = 3 * per * limit / 1e9
    if need > max_gb:
        sys.exit(f"error: {what}: {limit} samples of {tuple(shape)} need ~{need:.0f} GB here (float32 and two "
                 f"working copies); give --max-samples {max(1, int(max_gb * 1e9 / (3 * per)))} or raise --max-gb")


def open_h5(path):
    """An HDF5 file opened for reading, or an error naming it (not HDF5, cut short)."""
    try:
        return h5py.File(path, "r")
    except OSError as e:
        sys.exit(f"error: {path}: cannot read as HDF5 ({e})")


def load_cosmoflow(folder, split, limit, max_gb):
    files = sorted(glob.glob(os.path.join(folder, split, "*.h5")))
    if not files:
        sys.exit(f"error: no HDF5 files under {os.path.join(folder, split)}")
    xs, ys, n = [], [], 0
    for f in files:
        with open_h5(f) as h:
            for key in ("3Dmap", "unitPar"):
                if key not in h:
                    sys.exit(f"error: {f} has no dataset '{key}' (not a CosmoFlow file)")
            if n == 0:
                check_size(h["3Dmap"].shape[1:], limit, max_gb, f)
            take = min(limit - n, h["3Dmap"].shape[0])
            xs.append(h["3Dmap"][:take].astype(np.float32))
            ys.append(h["unitPar"][:take].astype(np.float64))
        n += take
        if n >= limit:
            break
    return np.concatenate(xs), np.concatenate(ys)  # (N, D, H, W, C), (N, P)


def load_neuron_inverter(path, split, limit, max_gb):
    if not os.path.isfile(path):
        sys.exit(f"error: {path}: no such file or folder")
    with open_h5(path) as h:
        for key in (f"{split}_frames", f"{split}_unitStar_par"):
            if key not in h:
                sys.exit(f"error: {path} has no dataset '{key}'")
        check_size(h[f"{split}_frames"].shape[1:], limit, max_gb, path)
        return (h[f"{split}_frames"][:limit].astype(np.float32),  # (N, T, C)
                h[f"{split}_unitStar_par"][:limit].astype(np.float64))


def reduce_by(x, k):
    """Mean of k adjacent elements along every spatial axis of (N, *spatial, C)."""
    if k == 1:
        return x
    spatial = x.shape[1:-1]
    for s in spatial:
        if s % k:
            sys.exit(f"error: factor {k} does not divide the spatial extent {s}")
    shape = [x.shape[0]]
    for s in spatial:
        shape += [s // k, k]
    shape.append(x.shape[-1])
    return x.reshape(shape).mean(axis=tuple(2 + 2 * i for i in range(len(spatial))))


def statistics(x, bins=8):
    n, c = x.shape[0], x.shape[-1]
    axes = tuple(range(1, x.ndim - 1))
    mean = x.mean(axis=axes)
    xc = x - x.mean(axis=axes, keepdims=True)
    sd = xc.std(axis=axes)
    cols = [mean, sd]
    for a in range(c):
        for b in range(a + 1, c):
            cov = (xc[..., a] * xc[..., b]).mean(axis=axes)
            cols.append((cov / np.maximum(sd[:, a] * sd[:, b], 1e-12))[:, None])
    # Radial bins of |k| in cycles per element, up to the corner of the grid.
    spatial = x.shape[1:-1]
    freqs = [np.fft.fftfreq(s) for s in spatial[:-1]] + [np.fft.rfftfreq(spatial[-1])]
    grids = np.meshgrid(*freqs, indexing="ij")
    k = np.sqrt(sum(g ** 2 for g in grids))
    edges = np.linspace(0.0, k.max() + 1e-9, bins + 1)
    masks = [(k > edges[i]) & (k <= edges[i + 1]) for i in range(bins)]
    for ch in range(c):
        power = np.abs(np.fft.rfftn(xc[..., ch], axes=axes)) ** 2
        for m in masks:
            if m.any():
                cols.append(np.log(power[:, m].mean(axis=1) + 1e-12)[:, None])
    return np.concatenate(cols, axis=1)


def ridge_mse(ftrain, ytrain, fval, yval, lam):
    """Ridge on standardized linear and squared statistics; centred columns and
    labels, so that the penalty shrinks towards the training mean, not 0."""
    mu, sd = ftrain.mean(0), ftrain.std(0) + 1e-9
    a, b = (ftrain - mu) / sd, (fval - mu) / sd
    a, b = np.concatenate([a, a ** 2], axis=1), np.concatenate([b, b ** 2], axis=1)
    ca, ym = a.mean(0), ytrain.mean(0)
    a, b = a - ca, b - ca
    w = np.linalg.solve(a.T @ a + lam * np.eye(a.shape[1]), a.T @ (ytrain - ym))
    return ((b @ w + ym - yval) ** 2).mean(axis=0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="CosmoFlow folder or Neuron Inverter .h5 file")
    p.add_argument("--factors", type=int, nargs="+", default=[1, 2], help="averaging factors per spatial axis")
    p.add_argument("--transform", choices=["auto", "none", "log1p"], default="auto",
                   help="applied to the stored values before averaging (auto: log1p for CosmoFlow)")
    p.add_argument("--max-samples", type=int, default=2048, help="per split")
    p.add_argument("--ridge", type=float, default=1.0, help="ridge penalty on the standardized statistics (> 0)")
    p.add_argument("--max-gb", type=float, default=8.0, help="refuse loads needing more memory than this")
    args = p.parse_args()
    if any(k < 1 for k in args.factors):
        p.error("--factors must be >= 1")
    if args.max_samples < 8:
        p.error("--max-samples must be at least 8")
    if not args.ridge > 0:
        p.error("--ridge must be > 0")

    cosmo = os.path.isdir(args.data)
    load = load_cosmoflow if cosmo else load_neuron_inverter
    xt, yt = load(args.data, "train", args.max_samples, args.max_gb)
    xv, yv = load(args.data, "val", args.max_samples, args.max_gb)
    transform = args.transform if args.transform != "auto" else ("log1p" if cosmo else "none")
    if transform == "log1p":
        if min(xt.min(), xv.min()) <= -1:
            sys.exit("error: log1p needs values above -1 (use --transform none)")
        xt, xv = np.log1p(xt), np.log1p(xv)
    if len(xt) < 8 or len(xv) < 2:
        sys.exit(f"error: too few samples (train {len(xt)}, val {len(xv)})")

    # Every factor checked before the table starts (a factor that does not
    # divide the extent used to end it half printed).
    for k in args.factors:
        for ext in xt.shape[1:-1]:
            if ext % k:
                sys.exit(f"error: factor {k} does not divide the spatial extent {ext}")
    labels = ["Omega_m", "sigma_8", "n_s", "H0"] if cosmo and yt.shape[1] == 4 else \
        [f"y{i}" for i in range(yt.shape[1])]
    print(f"{args.data}: train {len(xt)}, val {len(xv)}, sample {xt.shape[1:]}, transform {transform}; "
          f"validation MSE per label")
    print("| resolution | " + " | ".join(labels) + " | mean |")
    print("|---" * (len(labels) + 2) + "|")
    base = ((yv - yt.mean(0)) ** 2).mean(0)
    print("| predict the mean | " + " | ".join(f"{v:.4f}" for v in base) + f" | {base.mean():.4f} |")
    ndim = xt.ndim - 2
    for k in args.factors:
        mse = ridge_mse(statistics(reduce_by(xt, k)), yt, statistics(reduce_by(xv, k)), yv, args.ridge)
        name = "1/1" if k == 1 else f"1/{k ** ndim}"
        print(f"| {name} (ridge) | " + " | ".join(f"{v:.4f}" for v in mse) + f" | {mse.mean():.4f} |")


if __name__ == "__main__":
    main()
