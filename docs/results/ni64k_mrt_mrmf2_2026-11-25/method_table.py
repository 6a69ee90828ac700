#!/usr/bin/env python3
"""All four methods on 64 k Neuron Inverter samples, in full-resolution epoch
equivalents up to 48 (docs/results_mrmf.md, "Session 17"). Reads:
  ../ni64k_tail_ext_2026-11-25/baseline_seed{1,2,3}/, mrmf1_seed{1,2,3}_finetune/  (sessions 12-16)
  ./mrt_seed<k>_{coarse,finetune}/, ./mrmf2_seed<k>_*/ for every seed present    (sessions 17-18)
Epoch costs on the 2-core CPU: T = 400 0.30, T = 800 0.53 of a T = 1600 epoch
(sessions 8 and 10). Pretraining: MRMF one fusion 10 x 0.30 + 3 = 6; MRT 10 x
0.30 = 3; MRMF two fusions 10 x 0.30 + 3 x 0.53 + 10 x 0.53 + 3 = 12.9 (the
stage epoch counts are read from the folders, not assumed). Means are over
the seeds a method has, each ratio against the baseline's mean over the same
seeds; "–" where a seed never reached the target within the budget.
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
from time_to_target import first_time, value_at  # noqa: E402
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


runs, PRE = {}, {}
for s in (1, 2, 3):
    runs[("baseline", s)] = curve(os.path.join(EXT, "baseline_seed%d" % s), 0)
    runs[("mrmf1", s)] = curve(os.path.join(EXT, "mrmf1_seed%d_finetune" % s), 10 * 0.30 + 3)
    PRE[("mrmf1", s)] = 10 * 0.30 + 3
    if os.path.isdir(os.path.join(HERE, "mrt_seed%d_finetune" % s)):
        PRE[("mrt", s)] = pre([("mrt_seed%d_coarse" % s, COST["coarse4"])])
    if os.path.isdir(os.path.join(HERE, "mrmf2_seed%d_finetune" % s)):
        PRE[("mrmf2", s)] = pre([("mrmf2_seed%d_stage1_coarse" % s, COST["coarse4"]),
                                 ("mrmf2_seed%d_stage1_dense" % s, COST["dense2"]),
                                 ("mrmf2_seed%d_stage2_coarse" % s, COST["coarse2"]),
                                 ("mrmf2_seed%d_stage2_dense" % s, COST["dense1"])])
for (m, s), p in PRE.items():
    if m != "mrmf1":
        runs[(m, s)] = curve(os.path.join(HERE, "%s_seed%d_finetune" % (m, s)), p)
methods = ["baseline", "mrt", "mrmf1", "mrmf2"]
seeds = {m: [s for s in (1, 2, 3) if (m, s) in runs] for m in methods}
print("pretraining, epoch equivalents: " + ", ".join(
    "%s %s" % (m, "/".join("%.1f" % PRE[(m, s)] for s in seeds[m])) for m in methods[1:]) + " (per seed)")
print("seeds: " + ", ".join("%s %s" % (m, ",".join(map(str, seeds[m]))) for m in methods))


def first(c, target, k):
    t = first_time(c, target, k)
    return None if math.isnan(t) else t


def cell(x):
    return "–" if x is None else "%.1f" % x if x != int(x) else "%d" % x


def mean_of(m, ss, target, k):
    xs = [first(runs[(m, s)], target, k) for s in ss]
    return None if None in xs else st.mean(xs)


TARGETS = [0.145, 0.140, 0.135, 0.133, 0.131, 0.130, 0.129, 0.125, 0.122, 0.120]
NAME = {"baseline": "baseline", "mrt": "MRT", "mrmf1": "MRMF1", "mrmf2": "MRMF2"}
for k in (1, 2):
    print()
    print("| target (%s) | " % ("first crossing" if k == 1 else "2 epochs in a row")
          + " | ".join("%s (%d)" % (NAME[m], len(seeds[m])) for m in methods) + " | "
          + " | ".join("%s / baseline" % NAME[m] for m in methods[1:]) + " |")
    print("|---" * (2 * len(methods)) + "|")
    for target in TARGETS:
        row = ["%.3f" % target] + [cell(None if (v := mean_of(m, seeds[m], target, k)) is None else round(v, 1))
                                   for m in methods]
        for m in methods[1:]:
            a, b = mean_of(m, seeds[m], target, k), mean_of("baseline", seeds[m], target, k)
            row.append("–" if a is None or b is None else "%.2fx" % (a / b))
        print("| " + " | ".join(row) + " |")
for s in (1, 2, 3):
    have = [m for m in methods if (m, s) in runs]
    print()
    print("| target (first crossing), seed %d | " % s + " | ".join(NAME[m] for m in have) + " |")
    print("|---" * (len(have) + 1) + "|")
    for target in TARGETS:
        print("| %.3f | " % target + " | ".join(cell(first(runs[(m, s)], target, 1)) for m in have) + " |")
print()
for key in sorted(runs, key=lambda k: (k[1], methods.index(k[0]))):
    c = runs[key]
    print("%s seed %d: best %.4f within %g epoch equivalents (curve ends at %g)" % (key[0], key[1], min(v for _, v in c),
                                                                                   BUDGET, c[-1][0]))


# Training loss (the epoch's mean over its steps) at whole epoch equivalents,
# mean over each method's seeds: how fast each model fits, apart from the
# validation loss's noise. A stage's last epoch at or before the point counts.
def train_curve(m, s):
    folder = {"baseline": os.path.join(EXT, "baseline_seed%d" % s),
              "mrmf1": os.path.join(EXT, "mrmf1_seed%d_finetune" % s)}.get(m, os.path.join(HERE, "%s_seed%d_finetune" % (m, s)))
    off = 0 if m == "baseline" else PRE[(m, s)]
    return [(off + i + 1, r["train_loss"]) for i, r in enumerate(records(folder))]


print()
print("| epoch equivalents | " + " | ".join("%s train loss" % NAME[m] for m in methods) + " |")
print("|---" * (len(methods) + 1) + "|")
for x in range(8, 40, 4):
    vals = []
    for m in methods:
        xs = [value_at(train_curve(m, s), x) for s in seeds[m]]
        vals.append("–" if any(math.isnan(v) for v in xs) else "%.4f" % st.mean(xs))
    print("| %d | " % x + " | ".join(vals) + " |")
