#!/usr/bin/env python3
"""scripts/torch_state_dict.py, its HDF5 side (no torch needed): an mrmf
checkpoint read with read_h5 and written back with write_h5 evaluates to the
same loss with `mrmf eval`, tensor for tensor equal; a CosmoFlow checkpoint
converted with its run config keeps the log1p preprocessing, and one converted
without it makes eval warn (and gives a different loss).

    test_torch_state_dict.py MRMF_BINARY   (exit 77: h5py missing, skipped)"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError:
    print("h5py/numpy not importable by", sys.executable, "- skipped")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import torch_state_dict as tsd  # noqa: E402

MRMF = sys.argv[1]
ENV = dict(os.environ, OMP_NUM_THREADS="1", MRMF_DEVICE="cpu", HDF5_USE_FILE_LOCKING="FALSE")


def mrmf(*args):
    p = subprocess.run([MRMF] + list(args), capture_output=True, text=True, env=ENV)
    if p.returncode != 0:
        raise SystemExit(f"mrmf {' '.join(args)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


def eval_mse(ckpt, data, *sets):
    # One batch size for every eval: a checkpoint without its run config
    # would evaluate in the default batch, and GEMM blocking that depends on
    # the batch rounds differently on some CPUs (MSE equal only to ~1e-10:
    # failed on a 2-core EPYC without AVX-512, 2026-11-28).
    out = mrmf("eval", "--checkpoint", ckpt, "--data", data, "--json", "--batch", "8", *sets)
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    return json.loads(line)["mse"], out


def convert(src, dst, with_config):
    state, meta = tsd.read_h5(src)
    opts = dict(l.split("=", 1) for l in meta["model_options"].splitlines() if l)
    config = ""
    if with_config:
        with h5py.File(src, "r") as f:
            config = f["config"][()].decode()
    tsd.write_h5(state, dst, meta["model"], meta["variant"], meta["sample_shape"], opts, config)
    with h5py.File(src, "r") as a, h5py.File(dst, "r") as b:
        assert set(a["model"].keys()) == set(b["model"].keys()), "tensor names differ"
        for k in a["model"]:
            x, y = a["model"][k][()], b["model"][k][()]
            assert np.array_equal(x, y) and np.asarray(x).dtype == np.asarray(y).dtype, k
            # mrmf writes fixed-length strings (h5py reads bytes), h5py variable-length ones (str)
            ga, gb = (g.decode() if isinstance(g, bytes) else g for g in (a["model"][k].attrs["group"], b["model"][k].attrs["group"]))
            assert ga == gb, k
    return len(state)


def train(d, cfg_text, name):
    cfg = os.path.join(d, name + ".yaml")
    with open(cfg, "w") as f:
        f.write(cfg_text)
    out = os.path.join(d, name)
    mrmf("train", "--config", cfg, "--out", out)
    return os.path.join(out, "checkpoint.h5")


def main():
    fails = 0
    with tempfile.TemporaryDirectory() as d:
        # Neuron Inverter (the original's full model is too slow for a test: a small one, same structure).
        ni = os.path.join(d, "ni.h5")
        mrmf("datagen", "neuron-inverter", "--out", ni, "--train", "64", "--val", "32", "--test", "32",
             "--time-bins", "64", "--seed", "2")
        ck = train(d, "model: {name: neuron_inverter, options: {conv_channels: '8,16,16', kernel: 3, pool: 2, "
                      "fc: '32,32'}}\ndata: {format: neuron_inverter, path: '" + ni + "'}\n"
                      "train: {batch_size: 16}\nstop: {max_epochs: 1}\nruntime: {device: cpu}\n", "ni_run")
        conv = os.path.join(d, "ni_conv.h5")
        n = convert(ck, conv, with_config=False)
        want, _ = eval_mse(ck, ni)
        got, out = eval_mse(conv, ni)
        ok = want == got
        print(f"NI: {n} tensors; eval MSE {want} -> {got}: {'ok' if ok else 'MISMATCH'}")
        fails += not ok

        # CosmoFlow with log1p: the config travels, or eval warns.
        cf = os.path.join(d, "cf")
        mrmf("datagen", "cosmoflow", "--out", cf, "--size", "16", "--train", "16", "--val", "8", "--test", "8",
             "--per-file", "8", "--seed", "2")
        ck = train(d, "model: {name: cosmoflow, variant: mrmf}\ndata: {format: cosmoflow, path: '" + cf +
                   "', transform: log1p}\ntrain: {batch_size: 4}\nstop: {max_epochs: 1}\nruntime: {device: cpu}\n",
                   "cf_run")
        with_cfg, without = os.path.join(d, "cf_cfg.h5"), os.path.join(d, "cf_nocfg.h5")
        convert(ck, with_cfg, with_config=True)
        convert(ck, without, with_config=False)
        want, _ = eval_mse(ck, cf)
        got, out = eval_mse(with_cfg, cf)
        ok = want == got and "carries no run configuration" not in out
        print(f"CosmoFlow with its config: eval MSE {want} -> {got}: {'ok' if ok else 'MISMATCH'}")
        fails += not ok
        got, out = eval_mse(without, cf)
        ok = "carries no run configuration" in out and "data.transform=log1p" in out and got != want
        print(f"CosmoFlow without a config: warned {'carries no run configuration' in out}, MSE {got}: "
              f"{'ok' if ok else 'WRONG'}")
        fails += not ok
        got, out = eval_mse(without, cf, "--set", "data.transform=log1p")
        ok = got == want and "carries no run configuration" not in out
        print(f"... and with --set data.transform=log1p: MSE {got}: {'ok' if ok else 'MISMATCH'}")
        fails += not ok
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
