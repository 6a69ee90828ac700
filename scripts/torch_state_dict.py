#!/usr/bin/env python3
"""Convert between a PyTorch state_dict (.pt) and an mrmf HDF5 checkpoint.

    torch_state_dict.py to-h5 model.pt ckpt.h5 --model neuron_inverter --sample-shape 3,1600
    torch_state_dict.py to-h5 model.pt ckpt.h5 --model cosmoflow --variant lbann2019 \
        --sample-shape 4,128,128,128 [--option dropout=0.2 ...]
    torch_state_dict.py to-pt ckpt.h5 model.pt

Names and layouts are kept 1:1: mrmf stores each parameter/buffer under
/model/<state_dict key> in PyTorch layout (weights [out, in, k...], float32;
num_batches_tracked a 0-dim int64), which is exactly what
torch.nn.Module.state_dict() holds. For the Neuron Inverter, the keys are those
of Jan Balewski's CNNandFC_Model (cnn_block.0.weight, flat_bn.running_mean,
fc_block.15.bias, ...). CosmoFlow keys are conv{i}.*, bn{i}.*, full{i}.* (mrmf
variant, after the Keras layer names of the MRMF authors' model) or fc{i}.*
(lbann2019, mlperf). Note that the MRMF authors' CosmoFlow is a Keras model:
Keras weights need transposing (and full1 a channels-last -> channel-major
column permutation) before they are a PyTorch state_dict; this script does
not do that.

Only the model is converted: optimizer and scheduler state and epoch/step are
written empty by to-h5 (mrmf starts a fresh optimizer) and ignored by to-pt.
The run configuration decides the data preprocessing `mrmf eval` / `predict`
apply (CosmoFlow's log1p transform, the Neuron Inverter layout): pass it with
`--config run.yaml` (an mrmf run config) or give those keys to eval with --set;
without either, eval warns and uses the defaults. The mrmf loader validates names and shapes against the model built
from --model/--variant/--sample-shape, so a mismatch is reported there.

Needs h5py and numpy; torch only for reading/writing the .pt file.
"""
import argparse
import collections
import os
import sys

import h5py
import numpy as np

FORMAT = "mrmf-checkpoint"
FORMAT_VERSION = "1"
BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked")


def group_of(model, name):
    """The MRMF parameter group: convolutional part 'bottom', FC part 'top'.
    Mirrors models/neuron_inverter.cpp and models/cosmoflow.cpp (flat_bn is top:
    its size depends on the resolution)."""
    if model == "neuron_inverter":
        return "bottom" if name.startswith("cnn_block.") else "top"
    if model == "cosmoflow":
        return "bottom" if name.startswith(("conv", "bn")) else "top"
    raise SystemExit(f"unknown model '{model}': expected neuron_inverter or cosmoflow")


def unwrap_state_dict(obj):
    """Accepts a bare state_dict or a training checkpoint dict holding one;
    strips DistributedDataParallel's 'module.' prefix."""
    if isinstance(obj, dict):
        for key in ("model_state", "state_dict", "model_state_dict", "model"):
            if key in obj and isinstance(obj[key], dict):
                obj = obj[key]
                break
    out = collections.OrderedDict()
    for k, v in obj.items():
        out[k[len("module."):] if k.startswith("module.") else k] = v
    return out


def write_h5(state, path, model, variant, sample_shape, options, config=""):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = FORMAT
        f.attrs["format_version"] = FORMAT_VERSION
        f.attrs["model"] = model
        f.attrs["variant"] = variant
        f.attrs["sample_shape"] = sample_shape
        f.attrs["model_options"] = "".join(f"{k}={v}\n" for k, v in sorted(options.items()))
        f.attrs["layout_hash"] = ""  # computed by mrmf only; not checked on load
        g = f.create_group("model")
        for name, arr in state.items():
            arr = np.asarray(arr)
            if name.endswith("num_batches_tracked"):
                ds = g.create_dataset(name, data=np.int64(arr.reshape(())))
            else:
                ds = g.create_dataset(name, data=np.ascontiguousarray(arr, dtype=np.float32))
            ds.attrs["group"] = group_of(model, name)
            ds.attrs["kind"] = "buffer" if name.endswith(BUFFER_SUFFIXES) else "param"
        f.create_dataset("epoch", data=np.int64(0))
        f.create_dataset("step", data=np.int64(0))
        f.create_group("state")
        f.create_dataset("config", data=config, dtype=h5py.string_dtype())


def read_h5(path):
    try:
        f = h5py.File(path, "r")
    except OSError as e:  # missing, not HDF5, cut short: named, not a traceback
        raise SystemExit(f"{path}: cannot read as HDF5 ({e})")
    with f:
        fmt = f.attrs.get("format", "")
        if isinstance(fmt, bytes):
            fmt = fmt.decode()
        if fmt != FORMAT:
            raise SystemExit(f"{path}: not an mrmf checkpoint (format '{fmt}')")
        state = collections.OrderedDict()
        for name, ds in f["model"].items():
            state[name] = ds[()]  # 0-dim datasets come back as numpy scalars
        meta = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    return state, meta


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("to-h5", help="PyTorch state_dict -> mrmf checkpoint")
    a.add_argument("src")
    a.add_argument("dst")
    a.add_argument("--model", required=True, choices=["neuron_inverter", "cosmoflow"])
    a.add_argument("--variant", default="", help="default: 'default' (NI) / 'mrmf' (CosmoFlow)")
    a.add_argument("--sample-shape", required=True, help="C,T or C,D,H,W (no batch)")
    a.add_argument("--option", action="append", default=[], help="model option key=value (as in the mrmf config)")
    a.add_argument("--config", default="", help="mrmf run config (YAML) to store: eval/predict take the data "
                   "preprocessing from it")
    b = sub.add_parser("to-pt", help="mrmf checkpoint -> PyTorch state_dict")
    b.add_argument("src")
    b.add_argument("dst")
    args = ap.parse_args(argv)
    # The command line checked before torch is imported and the .pt read: a
    # mistake here used to end in a traceback after the slow part (an option
    # without '=' in a dict() ValueError), or in a checkpoint mrmf cannot load
    # (a sample shape that is no list of sizes, written without complaint).
    if not os.path.isfile(args.src):
        ap.error(f"{args.src}: no such file")
    if args.cmd == "to-h5":
        bad = [o for o in args.option if "=" not in o or not o.split("=", 1)[0]]
        if bad:
            ap.error(f"--option expects KEY=VALUE, got {', '.join(repr(o) for o in bad)}")
        dims = args.sample_shape.split(",")
        if len(dims) < 2 or not all(d.strip().isdigit() and int(d) > 0 for d in dims):
            ap.error(f"--sample-shape expects C,T or C,D,H,W (positive sizes), got '{args.sample_shape}'")
        if args.config:
            try:
                with open(args.config) as f:
                    args.config_text = f.read()
            except OSError as e:
                ap.error(f"--config {args.config}: {e.strerror or e}")

    import torch  # only needed here: the rest of the module works without it

    if args.cmd == "to-h5":
        obj = torch.load(args.src, map_location="cpu")
        state = unwrap_state_dict(obj)
        state = collections.OrderedDict((k, v.detach().cpu().numpy()) for k, v in state.items())
        variant = args.variant or ("default" if args.model == "neuron_inverter" else "mrmf")
        options = dict(o.split("=", 1) for o in args.option)
        config = getattr(args, "config_text", "")
        write_h5(state, args.dst, args.model, variant, args.sample_shape, options, config)
        print(f"{args.dst}: {len(state)} tensors, model {args.model}/{variant} ({args.sample_shape})")
    else:
        state, meta = read_h5(args.src)
        out = collections.OrderedDict()
        for name, arr in state.items():
            if name.endswith("num_batches_tracked"):
                out[name] = torch.tensor(int(arr), dtype=torch.int64)
            else:
                out[name] = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))
        torch.save(out, args.dst)
        print(f"{args.dst}: {len(out)} tensors from {meta.get('model')}/{meta.get('variant')} "
              f"({meta.get('sample_shape')})")


if __name__ == "__main__":
    main(sys.argv[1:])
