#!/usr/bin/env python3
"""Validation MSE per target of every final model of an `mrmf experiment`,
as a table by method (mean over seeds).

Why: an experiment's report compares methods on the overall loss; which
targets a method gained or lost on is what explains it (session 28: every
coarse CosmoFlow model learns three of the four parameters and not n_s,
which the full-resolution baseline learns last). The final model of each
run is the checkpoint its last stage kept (`baseline/` or `finetune/`);
each is evaluated with `mrmf eval --json` on the given data set, so give
the data the experiment trained on.

  python3 scripts/per_target_mse.py runs/cf_cpu_scale --data runs/data/cosmo32
  python3 scripts/per_target_mse.py runs/ni --data runs/data/ni16k.h5 --split test --mrmf build/cuda/bin/mrmf
"""
import argparse
import json
import os
import shlex
import subprocess
import sys


def final_checkpoints(exp_dir):
    """(method, seed, path) of each run's final checkpoint, in summary.json's order."""
    summary = os.path.join(exp_dir, "summary.json")
    if not os.path.isfile(summary):
        sys.exit(f"error: {summary} not found (an experiment folder has one after its first finished run)")
    try:
        with open(summary) as f:
            doc = json.load(f)
    except ValueError as e:  # empty or cut short (a full disk, a killed process): said, not a traceback
        sys.exit(f"error: {summary} is not valid JSON ({e})")
    runs = doc.get("runs", []) if isinstance(doc, dict) else []
    if not runs:
        sys.exit(f"error: {summary} lists no runs")
    out = []
    for r in runs:
        method, seed = r["method"], r["seed"]
        stage = "baseline" if method == "baseline" else "finetune"
        # A final stage that diverged may have kept the checkpoint of an
        # epoch before it: evaluated, but named below the table.
        stages = r.get("stages") or []
        diverged = bool(stages) and stages[-1].get("stop_reason") == "diverged"
        out.append((method, seed, os.path.join(exp_dir, method, f"seed{seed}", stage, "checkpoint.h5"), diverged))
    return out


def evaluate(mrmf, ckpt, data, split, threads):
    cmd = [mrmf, "eval", "--checkpoint", ckpt, "--data", data, "--split", split, "--json"]
    if threads:
        cmd += ["--threads", str(threads)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:  # no such binary, or not executable
        sys.exit(f"error: cannot run {mrmf}: {e.strerror or e} (give the mrmf binary with --mrmf)")
    shown = " ".join(shlex.quote(c) for c in cmd)  # paths with spaces stay one argument
    if p.returncode != 0:
        sys.exit(f"error: {shown} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        sys.exit(f"error: {shown} printed no JSON result:\n{p.stdout}{p.stderr}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("experiment", help="folder written by mrmf experiment")
    p.add_argument("--data", required=True, help="the data set the experiment trained on")
    p.add_argument("--split", choices=["train", "val", "test"], default="val")
    p.add_argument("--mrmf", default=None, help="the mrmf binary (default: build/*/bin/mrmf of this checkout, or PATH)")
    p.add_argument("--threads", type=int, default=0, help="OpenMP threads for mrmf eval (default: all cores)")
    args = p.parse_args()

    mrmf = args.mrmf
    if mrmf is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for preset in ("cuda", "cpu"):
            cand = os.path.join(root, "build", preset, "bin", "mrmf")
            if os.access(cand, os.X_OK):
                mrmf = cand
                break
        mrmf = mrmf or "mrmf"

    by_method, names, missing, diverged = {}, None, [], []
    for method, seed, ckpt, div in final_checkpoints(args.experiment):
        if not os.path.isfile(ckpt):
            missing.append(f"{method} seed {seed}")  # diverged, or stage checkpoints off
            continue
        if div:
            diverged.append(f"{method} seed {seed}")
        r = evaluate(mrmf, ckpt, args.data, args.split, args.threads)
        names = names or r.get("target_names") or [f"y{i}" for i in range(len(r["mse_per_target"]))]
        by_method.setdefault(method, []).append((r["mse"], r["mse_per_target"]))
    if not by_method:
        sys.exit("error: no run of this experiment kept a final checkpoint")

    print(f"{args.experiment}: {args.split} MSE per target of each method's final models (mean over seeds)")
    print("| method | seeds | MSE | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 3) + "|")
    for method, rs in by_method.items():
        n = len(rs)
        mse = sum(m for m, _ in rs) / n
        per = [sum(v[j] for _, v in rs) / n for j in range(len(names))]
        print(f"| {method} | {n} | {mse:.4f} | " + " | ".join(f"{v:.4f}" for v in per) + " |")
    if missing:
        print("no final checkpoint (not evaluated): " + ", ".join(missing))
    if diverged:
        print("diverged in the final stage (its last checkpoint before that evaluated): " + ", ".join(diverged))


if __name__ == "__main__":
    main()
