#!/usr/bin/env python3
"""scripts/resolution_information.py on small generated data sets: the table
has a row per resolution plus the mean-prediction baseline, the statistics
predict the labels far better than the mean at full resolution for both
applications (the generators' tasks are learnable), and a factor that does
not divide the data is an error naming it. Usage: test_resolution_information.py MRMF_BINARY"""
import os
import subprocess
import sys
import tempfile

from script_checks import check, run_script, table_rows

MRMF = sys.argv[1]


def run(args):
    return run_script("resolution_information.py", args)


def table(text):
    return {k: [float(c) for c in v] for k, v in table_rows(text).items()}


with tempfile.TemporaryDirectory() as d:
    cf = os.path.join(d, "cf")
    subprocess.run([MRMF, "datagen", "cosmoflow", "--out", cf, "--size", "16", "--train", "384", "--val", "64",
                    "--test", "0", "--seed", "2"], check=True, capture_output=True)
    code, out = run([cf, "--factors", "1", "2"])
    check(code == 0, "exit 0 on CosmoFlow", out)
    rows = table(out)
    check(set(rows) == {"predict the mean", "1/1 (ridge)", "1/8 (ridge)"}, "rows", out)
    check(all(len(v) == 5 for v in rows.values()), "four labels and their mean", out)
    check(rows["1/1 (ridge)"][-1] < 0.5 * rows["predict the mean"][-1], "statistics beat the mean", out)
    check("transform log1p" in out, "CosmoFlow takes log1p by default", out)
    code, out = run([cf, "--factors", "3"])
    check(code != 0 and "factor 3 does not divide the spatial extent 16" in out, "a factor that does not divide", out)
    code, out = run([cf, "--factors", "1", "3"])
    check(code != 0 and "| resolution" not in out, "a bad factor refused before the table starts", out)

    ni = os.path.join(d, "ni.h5")
    subprocess.run([MRMF, "datagen", "neuron-inverter", "--out", ni, "--train", "1024", "--val", "256", "--test", "16",
                    "--time-bins", "128", "--seed", "2"], check=True, capture_output=True)
    code, out = run([ni, "--factors", "1", "2", "4"])
    check(code == 0, "exit 0 on Neuron Inverter", out)
    rows = table(out)
    check(set(rows) == {"predict the mean", "1/1 (ridge)", "1/2 (ridge)", "1/4 (ridge)"}, "rows", out)
    check(all(len(v) == 20 for v in rows.values()), "19 labels and their mean", out)
    check(rows["1/1 (ridge)"][-1] < 0.9 * rows["predict the mean"][-1], "statistics beat the mean", out)
    code, out = run([os.path.join(d, "missing")])
    check(code != 0 and "no such file" in out, "a missing input is an error", out)
    notes = os.path.join(d, "not hdf5.h5")
    with open(notes, "w") as f:
        f.write("not HDF5")
    code, out = run([notes])
    check(code == 1 and "cannot read as HDF5" in out and "Traceback" not in out, "a file that is not HDF5", out)
    for bad, needle in ((["--factors", "0"], "--factors must be >= 1"), (["--max-samples", "-5"], "at least 8"),
                        (["--ridge", "0"], "--ridge must be > 0"), (["--max-gb", "0.001"], "give --max-samples")):
        code, out = run([ni] + bad)
        check(code != 0 and needle in out and "Traceback" not in out, "refused: " + " ".join(bad), out)
print("ok")
