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
import os
import sys

HERE = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
EXT = os.path.join(HERE, "..", "ni64k_tail_ext_2026-11-25")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts"))
from method_tables import (best_lines, crossing_table, curve, fit_table, print_blocks,  # noqa: E402
                           seed_table, seeds_of, stage_cost)
COST = {"coarse4": 0.30, "dense2": 0.53, "coarse2": 0.53, "dense1": 1.0}
BUDGET = 48


def pre(stages):
    """Epoch equivalents of the pretraining stages [(folder, cost)]."""
    return sum(stage_cost(os.path.join(HERE, d), c) for d, c in stages)


def final_folder(m, s):
    return {"baseline": os.path.join(EXT, "baseline_seed%d" % s),
            "mrmf1": os.path.join(EXT, "mrmf1_seed%d_finetune" % s)}.get(m, os.path.join(HERE, "%s_seed%d_finetune" % (m, s)))


PRE = {}
for s in (1, 2, 3):
    PRE[("baseline", s)] = 0
    PRE[("mrmf1", s)] = 10 * 0.30 + 3
    if os.path.isdir(os.path.join(HERE, "mrt_seed%d_finetune" % s)):
        PRE[("mrt", s)] = pre([("mrt_seed%d_coarse" % s, COST["coarse4"])])
    if os.path.isdir(os.path.join(HERE, "mrmf2_seed%d_finetune" % s)):
        PRE[("mrmf2", s)] = pre([("mrmf2_seed%d_stage1_coarse" % s, COST["coarse4"]),
                                 ("mrmf2_seed%d_stage1_dense" % s, COST["dense2"]),
                                 ("mrmf2_seed%d_stage2_coarse" % s, COST["coarse2"]),
                                 ("mrmf2_seed%d_stage2_dense" % s, COST["dense1"])])
runs = {k: curve(final_folder(*k), p, budget=BUDGET) for k, p in PRE.items()}
train = {k: curve(final_folder(*k), p, key="train_loss") for k, p in PRE.items()}
methods = ["baseline", "mrt", "mrmf1", "mrmf2"]
NAME = {"baseline": "baseline", "mrt": "MRT", "mrmf1": "MRMF1", "mrmf2": "MRMF2"}
TARGETS = [0.145, 0.140, 0.135, 0.133, 0.131, 0.130, 0.129, 0.125, 0.122, 0.120]
print_blocks(
    ["pretraining, epoch equivalents: " + ", ".join(
        "%s %s" % (m, "/".join("%.1f" % PRE[(m, s)] for s in seeds_of(runs, m))) for m in methods[1:]) + " (per seed)",
     "seeds: " + ", ".join("%s %s" % (m, ",".join(map(str, seeds_of(runs, m)))) for m in methods)],
    *[crossing_table(runs, methods, NAME, TARGETS, k) for k in (1, 2)],
    *[seed_table(runs, methods, NAME, TARGETS, s) for s in (1, 2, 3)],
    best_lines(runs, methods, BUDGET),
    fit_table(train, methods, NAME, range(8, 40, 4)))
