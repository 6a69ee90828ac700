#!/usr/bin/env python3
"""MRT and MRMF one fusion with the paper's stage lengths on 64 k Neuron
Inverter samples (configs/experiments/ni64k_long_coarse.yaml: coarse T = 400
stage on the plateau rule eps 0.002, patience 5, up to 35 epochs; dense
stage up to 4 epochs), against the same methods with 10-epoch coarse stages
and 3-epoch dense ones and the baseline (docs/results_mrmf.md, sessions
16-18), in full-resolution epoch equivalents up to 48. Reads:
  ./<method>/seed<k>/<stage>/metrics.jsonl                  (this experiment)
  ../ni64k_tail_ext_2026-11-25/{baseline_seed<k>, mrmf1_seed<k>_finetune}/
  ../ni64k_mrt_mrmf2_2026-11-25/mrt_seed<k>_{coarse,finetune}/
Epoch costs: T = 400 0.30 of a T = 1600 epoch, as in the earlier tables
(this experiment's run measured 0.35 on a busier machine: printed below). Means are over the
seeds a method has, each ratio against the baseline's mean over the same
seeds; "–" where a seed never reached the target within the budget.
Usage: method_table.py [folder]"""
import os
import statistics as st
import sys

HERE = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
EXT = os.path.join(RESULTS, "ni64k_tail_ext_2026-11-25")
SHORT = os.path.join(RESULTS, "ni64k_mrt_mrmf2_2026-11-25")
sys.path.insert(0, os.path.join(RESULTS, "..", "..", "scripts"))
from method_tables import (best_lines, crossing_table, curve, fit_table, print_blocks,  # noqa: E402
                           records, seed_table, seeds_of, stage_cost)
COARSE4 = 0.30
BUDGET = 48


def here(m, s, stage):
    return os.path.join(HERE, m, "seed%d" % s, stage)


final, PRE = {}, {}
for s in (1, 2, 3):
    final[("baseline", s)], PRE[("baseline", s)] = os.path.join(EXT, "baseline_seed%d" % s), 0
    final[("mrt10", s)] = os.path.join(SHORT, "mrt_seed%d_finetune" % s)
    PRE[("mrt10", s)] = stage_cost(os.path.join(SHORT, "mrt_seed%d_coarse" % s), COARSE4)
    final[("mrmf1_10", s)], PRE[("mrmf1_10", s)] = os.path.join(EXT, "mrmf1_seed%d_finetune" % s), 10 * COARSE4 + 3
    if os.path.isfile(os.path.join(here("mrt", s, "finetune"), "metrics.jsonl")):
        final[("mrt", s)] = here("mrt", s, "finetune")
        PRE[("mrt", s)] = stage_cost(here("mrt", s, "coarse"), COARSE4)
    if os.path.isfile(os.path.join(here("mrmf1", s, "finetune"), "metrics.jsonl")):
        final[("mrmf1", s)] = here("mrmf1", s, "finetune")
        PRE[("mrmf1", s)] = (stage_cost(here("mrmf1", s, "stage1_coarse"), COARSE4)
                             + stage_cost(here("mrmf1", s, "stage1_dense"), 1.0))
runs = {k: curve(f, PRE[k], budget=BUDGET) for k, f in final.items()}
train = {k: curve(f, PRE[k], key="train_loss") for k, f in final.items()}
methods = ["baseline", "mrt10", "mrmf1_10", "mrt", "mrmf1"]
NAME = {"baseline": "baseline", "mrt10": "MRT-10", "mrmf1_10": "MRMF1-10", "mrt": "MRT-plateau",
        "mrmf1": "MRMF1-plateau"}
TARGETS = [0.145, 0.140, 0.135, 0.133, 0.131, 0.130, 0.129, 0.125, 0.122, 0.120]


def epoch_s(folder):
    return st.mean(r["epoch_s"] for r in records(folder))


costs = ["%s seed %d: %.2f" % (m, s, epoch_s(here(m, s, "coarse" if m == "mrt" else "stage1_coarse"))
                                 / epoch_s(final[(m, s)]))
         for m in ("mrt", "mrmf1") for s in seeds_of(runs, m)]
print_blocks(
    ["pretraining, epoch equivalents: " + ", ".join(
        "%s %s" % (NAME[m], "/".join("%.1f" % PRE[(m, s)] for s in seeds_of(runs, m))) for m in methods[1:])
     + " (per seed)",
     "seeds: " + ", ".join("%s %s" % (NAME[m], ",".join(map(str, seeds_of(runs, m)))) for m in methods),
     "T = 400 epoch / T = 1600 epoch on this experiment's machine: " + ", ".join(costs)],
    *[crossing_table(runs, methods, NAME, TARGETS, k) for k in (1, 2)],
    *[seed_table(runs, methods, NAME, TARGETS, s) for s in (1, 2, 3)],
    best_lines(runs, methods, BUDGET),
    fit_table(train, methods, NAME, range(8, 48, 4)))
