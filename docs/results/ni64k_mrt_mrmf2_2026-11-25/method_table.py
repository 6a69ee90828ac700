#!/usr/bin/env python3
"""All four methods on 64 k Neuron Inverter samples, in full-resolution epoch
equivalents up to 48 (docs/results_mrmf.md, "Session 17"). Reads:
  ../ni64k_tail_ext_2026-11-25/baseline_seed{1,2,3}/, mrmf1_seed{1,2,3}_finetune/  (sessions 12-16)
  ./mrt_seed1_{coarse,finetune}/, ./mrmf2_seed1_*/                                (session 17, seed 1)
  ./mrt_seed2_{coarse,finetune}/ where present                                     (session 17, seed 2; may be partial)
Epoch costs on the 2-core CPU: T = 400 0.30, T = 800 0.53 of a T = 1600 epoch
(sessions 8 and 10). Pretraining: MRMF one fusion 10 x 0.30 + 3 = 6; MRT 10 x
0.30 = 3; MRMF two fusions 10 x 0.30 + 3 x 0.53 + 10 x 0.53 + 3 = 12.9 (the
stage epoch counts are read from the folders, not assumed).
Usage: method_table.py [folder]"""
import json
import math
import os
import statistics as st
import sys

HERE = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
EXT = os.path.join(HERE, "..", "ni64k_tail_ext_2026-11-25")
# The crossing rule is time_to_target.py's (k epochs in a row at or under the target).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts"))
from time_to_target import first_time  # noqa: E402
COST = {"coarse4": 0.30, "dense2": 0.53, "coarse2": 0.53, "dense1": 1.0}
BUDGET = 48


def records(path):
    with open(os.path.join(path, "metrics.jsonl")) as f:
        recs = {r["epoch"]: r for r in map(json.loads, f)}
    return [recs[e] for e in sorted(recs)]


def curve(path, offset):
    pts = [(offset + i + 1, r["val_loss"]) for i, r in enumerate(records(path))]
    return [p for p in pts if p[0] <= BUDGET + 1e-9]


def pre(stages):
    """Epoch equivalents of the pretraining stages [(folder, cost)]."""
    return sum(len(records(os.path.join(HERE, d))) * c for d, c in stages)


runs = {}
for s in (1, 2, 3):
    runs[("baseline", s)] = curve(os.path.join(EXT, "baseline_seed%d" % s), 0)
    runs[("mrmf1", s)] = curve(os.path.join(EXT, "mrmf1_seed%d_finetune" % s), 10 * 0.30 + 3)
PRE = {"mrt": pre([("mrt_seed1_coarse", COST["coarse4"])]),
       "mrmf2": pre([("mrmf2_seed1_stage1_coarse", COST["coarse4"]), ("mrmf2_seed1_stage1_dense", COST["dense2"]),
                     ("mrmf2_seed1_stage2_coarse", COST["coarse2"]), ("mrmf2_seed1_stage2_dense", COST["dense1"])])}
for m in ("mrt", "mrmf2"):
    runs[(m, 1)] = curve(os.path.join(HERE, "%s_seed1_finetune" % m), PRE[m])
if os.path.isdir(os.path.join(HERE, "mrt_seed2_finetune")):
    runs[("mrt", 2)] = curve(os.path.join(HERE, "mrt_seed2_finetune"), pre([("mrt_seed2_coarse", COST["coarse4"])]))
print("pretraining, epoch equivalents: mrmf1 6.0, mrt %.1f, mrmf2 %.1f" % (PRE["mrt"], PRE["mrmf2"]))


def first(c, target, k):
    t = first_time(c, target, k)
    return None if math.isnan(t) else t


def cell(x):
    return "–" if x is None else "%.1f" % x if x != int(x) else "%d" % x


methods = ["baseline", "mrt", "mrmf1", "mrmf2"]
for k in (1, 2):
    print()
    print("| target (%s) | baseline s1 | MRT s1 | MRMF1 s1 | MRMF2 s1 | baseline mean (3 seeds) | MRMF1 mean (3 seeds) |"
          % ("first crossing" if k == 1 else "2 epochs in a row"))
    print("|---|---|---|---|---|---|---|")
    for target in [0.145, 0.140, 0.135, 0.133, 0.131, 0.130, 0.129, 0.125, 0.122, 0.120]:
        row = ["%.3f" % target] + [cell(first(runs[(m, 1)], target, k)) for m in methods]
        for m in ("baseline", "mrmf1"):
            xs = [first(runs[(m, s)], target, k) for s in (1, 2, 3)]
            row.append("–" if None in xs else "%.1f" % st.mean(xs))
        print("| " + " | ".join(row) + " |")
if ("mrt", 2) in runs:
    print()
    print("| target (first crossing), seed 2 | baseline s2 | MRT s2 | MRMF1 s2 |")
    print("|---|---|---|---|")
    for target in [0.145, 0.140, 0.135, 0.133, 0.131, 0.130, 0.129, 0.125, 0.122, 0.120]:
        print("| %.3f | " % target + " | ".join(cell(first(runs[(m, 2)], target, 1)) for m in ("baseline", "mrt", "mrmf1"))
              + " |")
print()
for key in sorted(runs, key=lambda k: (k[1], methods.index(k[0]))):
    if key[1] == 3 or (key[1] == 2 and ("mrt", 2) not in runs):
        continue
    c = runs[key]
    print("%s seed %d: best %.4f within %g epoch equivalents (curve ends at %g)" % (key[0], key[1], min(v for _, v in c),
                                                                                   BUDGET, c[-1][0]))
