#!/usr/bin/env python3
"""scripts/per_target_mse.py on a tiny experiment (baseline and MRT, two seeds):
a row per method with its seed count and one column per target, the overall
MSE equal to the mean of the per-target ones (equal weights), agreement with
`mrmf eval` on one checkpoint, a run without its final checkpoint listed as
not evaluated, and a folder that is no experiment refused by name.
Usage: test_per_target_mse.py MRMF_BINARY"""
import json
import os
import subprocess
import sys
import tempfile

from script_checks import check, run_script, table_rows

MRMF = sys.argv[1]


def run(args):
    return run_script("per_target_mse.py", args)


with tempfile.TemporaryDirectory() as d:
    data = os.path.join(d, "ni.h5")
    subprocess.run([MRMF, "datagen", "neuron-inverter", "--out", data, "--train", "128", "--val", "64", "--test", "16",
                    "--time-bins", "64", "--seed", "3"], check=True, capture_output=True)
    with open(os.path.join(d, "tiny.yaml"), "w") as f:
        f.write("model:\n  name: neuron_inverter\n"
                "  options: {conv_channels: '8,16,16', kernel: 3, pool: 2, fc: '32,32'}\n"
                f"data: {{format: neuron_inverter, path: '{data}'}}\n"
                "train: {batch_size: 32, seed: 1}\noptimizer: {name: adam, lr: 2.0e-3}\n"
                "stop: {max_epochs: 2}\nruntime: {device: cpu}\n")
    with open(os.path.join(d, "exp.yaml"), "w") as f:
        f.write("base: tiny.yaml\nexperiment:\n  methods: [baseline, mrt]\n  seeds: [1, 2]\n"
                "  target_val_loss: 0.001\n  max_epochs: 1\n  ladder: [[2], [1]]\n"
                "  coarse_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n")
    out = os.path.join(d, "exp")
    p = subprocess.run([MRMF, "experiment", "--config", os.path.join(d, "exp.yaml"), "--out", out, "--threads", "1"],
                       capture_output=True, text=True)
    check(p.returncode == 0, "the tiny experiment runs", p.stdout + p.stderr)

    code, text = run([out, "--data", data, "--mrmf", MRMF, "--threads", "1"])
    check(code == 0, "exit 0", text)
    rows = table_rows(text)  # method -> [seeds, MSE, per target...]
    check(set(rows) == {"baseline", "mrt"}, "a row per method", text)
    for m, cells in rows.items():
        check(cells[0] == "2" and len(cells) == 2 + 19, m + ": two seeds, 19 targets", text)
        per = [float(c) for c in cells[2:]]
        check(abs(float(cells[1]) - sum(per) / 19) < 2e-4, m + ": the MSE is the mean over targets", text)
    one = json.loads(subprocess.run([MRMF, "eval", "--checkpoint",
                                     os.path.join(out, "mrt", "seed1", "finetune", "checkpoint.h5"), "--data", data,
                                     "--json", "--threads", "1"], capture_output=True, text=True,
                                    check=True).stdout.strip().splitlines()[-1])
    os.remove(os.path.join(out, "mrt", "seed2", "finetune", "checkpoint.h5"))
    code, text = run([out, "--data", data, "--mrmf", MRMF, "--threads", "1"])
    check(code == 0 and "no final checkpoint (not evaluated): mrt seed 2" in text, "a missing checkpoint is listed",
          text)
    mrt = table_rows(text)["mrt"]
    check(mrt[0] == "1" and abs(float(mrt[1]) - one["mse"]) < 1e-4, "one seed left: mrmf eval's MSE", text)
    code, text = run([d, "--data", data, "--mrmf", MRMF])
    check(code != 0 and "summary.json not found" in text, "a folder that is no experiment", text)
    code, text = run([out, "--data", data, "--mrmf", os.path.join(d, "no-mrmf")])
    check(code == 1 and "cannot run" in text and "Traceback" not in text, "a missing mrmf binary is named", text)
    with open(os.path.join(out, "summary.json"), "w") as f:
        f.write('{"runs": [')  # cut short
    code, text = run([out, "--data", data, "--mrmf", MRMF])
    check(code == 1 and "not valid JSON" in text and "Traceback" not in text, "a damaged summary.json", text)
print("ok")
